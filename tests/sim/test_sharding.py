"""Sharded sweeps (4 forced CPU devices, in a subprocess) give the numbers of unsharded ones."""

import os
import subprocess
import sys
import textwrap

import jax
import numpy as np
import pytest

from bandits_jax.sim import sharding as sh

SCRIPT = textwrap.dedent(
    """
    import os
    os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=4"
    import jax
    jax.config.update("jax_enable_x64", True)
    import numpy as np
    from bandits_jax import envs, mlogb
    from bandits_jax.sim import sharding, sweep

    assert len(jax.devices()) == 4, jax.devices()
    K, D, T = 1, 4, 8
    grid = sweep.grid_product(l=[0.0, 0.5, 1.0])
    env = envs.synthetic_mlogb(num_outcomes=K, dim=D, S=2.0, min_actions=3, max_actions=5)
    rec = mlogb.section4(num_outcomes=K, dim=D, S=2.0, horizon=T, l=grid["l"], e=0.5, beta=0.3)
    learner = mlogb.eofd(num_outcomes=K, dim=D, sketch_size=2)
    exp = sweep.Experiment("EOFD", "synthetic", mlogb.interact(learner, env), learner.init,
                           rec.hparams, grid, env.init)
    seeds = [0, 1]  # 3 x 2 = 6 runs: padded to 8 over 4 devices
    plain = sweep.run_sweep([exp], num_rounds=T, seeds=seeds)
    mesh = sharding.run_mesh()
    sharded = sweep.run_sweep([exp], num_rounds=T, seeds=seeds, mesh=mesh, chunk_size=4,
                              checkpoint_dir=os.environ["CKPT"])
    assert sharded.devices == 4
    worst = 0.0
    for field, a in plain.experiments[0].metrics.items():
        b = sharded.experiments[0].metrics[field]
        assert a.shape == b.shape == (3, 2, T), (field, a.shape, b.shape)
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-13, err_msg=field)
        diff = np.abs(a.astype(np.float64) - b.astype(np.float64))
        worst = max(worst, float(np.max(diff)))
    # Resuming the sharded sweep from its (complete) checkpoint reads back the same arrays.
    again = sweep.run_sweep([exp], num_rounds=T, seeds=seeds, mesh=mesh, chunk_size=4,
                            checkpoint_dir=os.environ["CKPT"], resume=True)
    for field, a in sharded.experiments[0].metrics.items():
        np.testing.assert_array_equal(a, again.experiments[0].metrics[field], err_msg=field)
    # Split under a memory budget (12 runs, 3 per device, into batches of fewer runs per device,
    # the last one padded): the same regret, actions and statuses bit for bit; float diagnostics
    # to the last bits. (With 2 runs per device the budget cannot force a split: XLA compiles a
    # batch of one run per device with a few more bytes than a batch of two.)
    seeds4 = [0, 1, 2, 3]
    whole = sweep.run_sweep([exp], num_rounds=T, seeds=seeds4, mesh=mesh, chunk_size=4)
    budget = whole.memory["peak_bytes"] - 1
    split = sweep.run_sweep([exp], num_rounds=T, seeds=seeds4, mesh=mesh, chunk_size=4,
                            max_bytes=budget)
    assert split.memory["batches"] >= 2, split.memory
    for field, a in whole.experiments[0].metrics.items():
        b = split.experiments[0].metrics[field]
        if field in ("regret", "explored", "status"):
            np.testing.assert_array_equal(a, b, err_msg=field)
        else:
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-15, err_msg=field)
    print("OK max_abs_diff", worst)
    """
)


def test_sharded_sweep_matches_unsharded(tmp_path):
    env = dict(os.environ, CKPT=str(tmp_path / "ck"))
    env.pop("XLA_FLAGS", None)
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "OK" in proc.stdout
    assert (tmp_path / "ck" / "state.npz").is_file()


def test_pad_and_unpad():
    tree = {"a": np.arange(6.0), "b": np.arange(12).reshape(6, 2)}
    padded, n = sh.pad_runs(tree, 4)
    assert n == 6 and padded["a"].shape == (8,) and padded["b"].shape == (8, 2)
    np.testing.assert_array_equal(np.asarray(padded["a"]), [0, 1, 2, 3, 4, 5, 5, 5])
    back = sh.unpad_runs(padded, n)
    np.testing.assert_array_equal(np.asarray(back["b"]), tree["b"])
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
