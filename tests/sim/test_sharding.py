"""Sharded sweeps (4 forced CPU devices, in subprocesses: ``tests/sim/sharded_sweeps.py``) give
the numbers of unsharded ones, and a sharded sweep killed mid-chunk resumes to the numbers and
final states of an uninterrupted one, bit for bit."""

import json
import os
import pathlib
import signal
import subprocess
import sys
import time

import jax
import numpy as np
import pytest

from bandits_jax.sim import checkpoint
from bandits_jax.sim import sharding as sh

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _start(role, ckdir, log):
    cache = {  # shared by both processes (sharded_sweeps.py); the suite's XLA_FLAGS inherited
        "JAX_COMPILATION_CACHE_DIR": str(ckdir.parent / "xla_cache"),
        "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "1",  # the chunk programs only
        "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "0",
    }
    return subprocess.Popen(
        [sys.executable, "-m", "tests.sim.sharded_sweeps", role, str(ckdir)],
        cwd=ROOT, env={**os.environ, **cache}, stdout=log, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip


@pytest.mark.long  # minutes of CPU: CI runs it after the default suite
@pytest.mark.slow
def test_sharded_sweeps_match_unsharded_and_a_killed_one_resumes_bit_for_bit(tmp_path):
    """EOFD (K = 1), robust EOFD and OFUL (K = 4) sharded against the same sweep unsharded (the
    independent computation: one device, one vmap); a worker process SIGKILLed between the
    metrics and the state of its second chunk, resumed, against the uninterrupted sweep."""
    ck = tmp_path / "killed_run"
    with open(tmp_path / "worker.log", "w") as wlog, open(tmp_path / "main.log", "w") as mlog:
        worker = _start("worker", ck, wlog)
        main = _start("main", ck, mlog)  # plays the uninterrupted sweeps meanwhile
        try:
            deadline = time.monotonic() + 300
            while not (tmp_path / "paused").exists():
                assert worker.poll() is None, (tmp_path / "worker.log").read_text()[-3000:]
                assert time.monotonic() < deadline, "the worker never reached its second chunk"
                time.sleep(0.05)
            worker.send_signal(signal.SIGKILL)
            assert worker.wait(timeout=60) == -signal.SIGKILL
            # Killed mid-chunk: chunk 2's metrics are written, the committed state is chunk 1's,
            # and the dead process's lock file is left behind.
            meta = checkpoint.read_meta(ck / "state.npz")
            assert meta["chunks_done"] == 1 and meta["rounds_done"] == 10, meta
            assert (ck / "metrics_00001.npz").is_file() and (ck / ".lock").is_file()
            (tmp_path / "killed").touch()
            main.wait(timeout=400)
        finally:
            for proc in (worker, main):
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
    out = (tmp_path / "main.log").read_text()
    assert main.returncode == 0, out[-4000:]
    lines = out.splitlines()
    assert "OK" in lines, out[-4000:]
    report = json.loads(lines[lines.index("OK") + 1])
    assert report["restored_trial_rounds"] == 10 * (12 + 8 + 8)
    assert report["split_batches"] >= 2 and report["state_arrays"] > 0
    assert not (ck / ".lock").exists()  # released by the resumed run


def test_pad_runs():
    tree = {"a": np.arange(6.0), "b": np.arange(12).reshape(6, 2)}
    padded, n = sh.pad_runs(tree, 4)
    assert n == 6 and padded["a"].shape == (8,) and padded["b"].shape == (8, 2)
    np.testing.assert_array_equal(np.asarray(padded["a"]), [0, 1, 2, 3, 4, 5, 5, 5])
    np.testing.assert_array_equal(np.asarray(padded["b"])[:n], tree["b"])
    with pytest.raises(ValueError, match="leading run axis"):
        sh.num_runs({"a": np.zeros(3), "b": np.zeros(4)})
    mesh = sh.run_mesh(jax.devices()[:1])
    assert mesh.axis_names == ("runs",) and mesh.size == 1


def test_multi_host_placement_takes_typed_keys(monkeypatch):
    """The per-process placement (used when ``jax.process_count() > 1``) accepts typed PRNG keys:
    same key data and impl as the single-process ``device_put``."""
    mesh = sh.run_mesh(jax.devices()[:1])
    tree = {"k": jax.random.split(jax.random.key(3), 4), "x": np.arange(4.0)}
    single = sh.shard_runs(tree, mesh)
    monkeypatch.setattr(jax, "process_count", lambda: 2)
    multi = sh.shard_runs(tree, mesh)
    assert jax.random.key_impl(multi["k"]) == jax.random.key_impl(single["k"])
    np.testing.assert_array_equal(jax.random.key_data(multi["k"]), jax.random.key_data(single["k"]))
    np.testing.assert_array_equal(multi["x"], single["x"])
