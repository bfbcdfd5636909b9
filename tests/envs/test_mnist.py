"""IDX / .npz loader: round trips on tiny files written here, clear errors on broken ones."""

import gzip
import importlib

import numpy as np
import pytest

# the MNIST file reader (``bandits_jax.envs.mnist`` on the face is the environment factory)
M = importlib.import_module("bandits_jax.envs.mnist")


def tiny(n=20, side=4, seed=0):
    rng = np.random.default_rng(seed)
    images = rng.integers(0, 256, (n, side, side), dtype=np.uint8)
    labels = (np.arange(n) % 10).astype(np.uint8)
    return images, labels


@pytest.mark.parametrize("name", ["a-idx3-ubyte", "a-idx3-ubyte.gz"])
@pytest.mark.parametrize("dtype", [np.uint8, np.int16, np.int32, np.float32, np.float64])
def test_idx_roundtrip(tmp_path, name, dtype):
    arr = (np.arange(2 * 3 * 5) - 7).reshape(2, 3, 5).astype(dtype)
    if dtype == np.uint8:
        arr = np.arange(30, dtype=np.uint8).reshape(2, 3, 5)
    M.write_idx(tmp_path / name, arr)
    raw = (tmp_path / name).read_bytes()
    assert (raw[:2] == b"\x1f\x8b") == name.endswith(".gz")
    back = M.read_idx(tmp_path / name)
    assert back.dtype == np.dtype(dtype) and back.shape == arr.shape
    np.testing.assert_array_equal(back, arr)


def test_idx_header_is_the_standard_one(tmp_path):
    # Independent reference: the header bytes as the MNIST page defines them.
    M.write_idx(tmp_path / "l", np.array([7, 2, 1], np.uint8))
    assert (tmp_path / "l").read_bytes() == bytes([0, 0, 8, 1, 0, 0, 0, 3, 7, 2, 1])


def test_idx_rejects_broken_files(tmp_path):
    images, _ = tiny()
    M.write_idx(tmp_path / "ok", images)
    good = (tmp_path / "ok").read_bytes()
    cases = {
        "truncated": good[:-5],
        "trailing": good + b"\x00",
        "short": good[:3],
        "magic": b"\x01" + good[1:],
        "type": good[:2] + b"\x07" + good[3:],
        "header": good[:9],
    }
    messages = {
        "truncated": "truncated",
        "trailing": "trailing",
        "short": "too short",
        "magic": "not an IDX",
        "type": "unknown IDX type",
        "header": "truncated header",
    }
    for name, blob in cases.items():
        (tmp_path / name).write_bytes(blob)
        with pytest.raises(M.IDXFormatError, match=messages[name]) as info:
            M.read_idx(tmp_path / name)
        assert name in str(info.value)  # the message names the file
    (tmp_path / "bad.gz").write_bytes(gzip.compress(good)[:-12])
    with pytest.raises(M.IDXFormatError, match="gzip"):
        M.read_idx(tmp_path / "bad.gz")


def test_load_mnist_from_idx_dir_and_npz(tmp_path):
    images, labels = tiny()
    M.write_idx(tmp_path / "train-images-idx3-ubyte.gz", images)
    M.write_idx(tmp_path / "train-labels-idx1-ubyte.gz", labels)
    M.write_idx(tmp_path / "t10k-images.idx3-ubyte", images[:10])
    M.write_idx(tmp_path / "t10k-labels.idx1-ubyte", labels[:10])
    data = M.load_mnist(tmp_path)
    assert data.images.shape == (20, 16) and data.image_shape == (4, 4)
    np.testing.assert_array_equal(data.images, images.reshape(20, 16))
    np.testing.assert_array_equal(data.labels, labels)
    test = M.load_mnist(cache_dir=tmp_path, split="test")
    np.testing.assert_array_equal(test.labels, labels[:10])

    npz = tmp_path / "sub" / "mnist.npz"
    npz.parent.mkdir()
    np.savez(npz, x_train=images, y_train=labels, x_test=images[:3], y_test=labels[:3])
    for where in (npz, npz.parent):
        back = M.load_mnist(where, split="test")
        np.testing.assert_array_equal(back.images, images[:3].reshape(3, 16))


def test_load_mnist_errors(tmp_path, monkeypatch):
    monkeypatch.setenv("BANDITS_JAX_DATA", str(tmp_path / "nowhere"))
    with pytest.raises(M.MNISTNotFoundError) as info:
        M.load_mnist()
    msg = str(info.value)
    assert "train-images-idx3-ubyte" in msg and str(tmp_path / "nowhere" / "mnist") in msg
    images, labels = tiny()
    M.write_idx(tmp_path / "train-images-idx3-ubyte", images)
    M.write_idx(tmp_path / "train-labels-idx1-ubyte", labels[:-1])
    with pytest.raises(M.IDXFormatError, match="20 images but 19 labels"):
        M.load_mnist(tmp_path)
    M.write_idx(tmp_path / "train-labels-idx1-ubyte", labels + 5)
    with pytest.raises(M.IDXFormatError, match="0..9"):
        M.load_mnist(tmp_path)
    (tmp_path / "x.npz").write_bytes(b"not a zip")
    with pytest.raises(M.IDXFormatError, match="unreadable"):
        M.load_mnist(tmp_path / "x.npz")
    with pytest.raises(ValueError, match="split"):
        M.load_mnist(tmp_path, split="validation")
