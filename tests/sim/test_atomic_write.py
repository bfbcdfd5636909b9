"""The one atomic writer (``sim.checkpoint.atomic_file``, ``write_json``): a reader sees the old
file or the whole new one, a failed write leaves the old file and no temporary file, and JSON
values come from numpy as plain numbers (NaN and infinities as null)."""

import json
import os

import numpy as np
import pytest

from bandits_jax.sim import checkpoint


def test_write_json_converts_numpy_and_non_finite(tmp_path):
    path = tmp_path / "sub" / "r.json"  # the directory is created
    obj = {"a": np.float32(0.5), "b": np.arange(3), 3: [np.nan, np.inf, 1.0], "c": (np.int64(2),)}
    checkpoint.write_json(path, obj)
    assert json.loads(path.read_text()) == {"a": 0.5, "b": [0, 1, 2], "3": [None, None, 1.0],
                                            "c": [2]}  # fmt: skip
    assert os.listdir(path.parent) == ["r.json"]


def test_a_failed_write_keeps_the_old_file(tmp_path):
    path = tmp_path / "r.json"
    checkpoint.write_json(path, {"old": 1})
    with pytest.raises(TypeError):
        checkpoint.write_json(path, {"new": object()})  # not JSON: fails half-way
    assert json.loads(path.read_text()) == {"old": 1}
    assert os.listdir(tmp_path) == ["r.json"]
    with pytest.raises(RuntimeError), checkpoint.atomic_file(path, "wb") as f:
        f.write(b"partial")
        raise RuntimeError("interrupted")
    assert json.loads(path.read_text()) == {"old": 1} and os.listdir(tmp_path) == ["r.json"]


def test_atomic_file_follows_the_umask(tmp_path):
    """The new file gets the permissions an ordinary ``open`` would (not a private 0600)."""
    with open(tmp_path / "plain", "w") as f:
        f.write("x")
    with checkpoint.atomic_file(tmp_path / "atomic") as f:
        f.write("x")
    mode = os.stat(tmp_path / "plain").st_mode
    assert os.stat(tmp_path / "atomic").st_mode == mode
