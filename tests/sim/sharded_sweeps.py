"""The processes of ``tests/sim/test_sharding.py``: sweeps sharded over 4 forced CPU devices.

``python -m tests.sim.sharded_sweeps worker DIR`` plays :data:`EXPERIMENTS` sharded, with
checkpoints in ``DIR``, and stops dead in its second chunk: after the chunk's metrics file is
written and before its state (the commit point) is, it writes ``DIR/../paused`` and sleeps until
the test kills it (SIGKILL).

``python -m tests.sim.sharded_sweeps main DIR`` plays the same sweep sharded and uninterrupted
and unsharded, checks them against each other and, once the test has written ``DIR/../killed``,
resumes the worker's checkpoint and checks that it ends with the uninterrupted run's metrics and
final states bit for bit. It prints ``OK`` and a JSON line of what it measured.

Both compile with the suite's fast options (``tests/conftest.py``'s ``XLA_FLAGS``, inherited):
what is checked here, the runner's sharding, padding, checkpoints and resume, does not depend on
them (the sharded and the unsharded program are compared at the same options), and at XLA's own
options the test took over two minutes on two cores. They share JAX's persistent compilation
cache (a directory the test gives them, ``JAX_COMPILATION_CACHE_DIR``), so the main process
loads the sharded program the worker compiled (or compiles it, if it gets there first).
"""

from __future__ import annotations

import os

os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=4"
).strip()

import json  # noqa: E402
import pathlib  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)

import numpy as np  # noqa: E402

from bandits_jax import envs, mlogb  # noqa: E402
from bandits_jax.mlogb import recipes  # noqa: E402
from bandits_jax.mlogb.interact import MLogBMetrics  # noqa: E402
from bandits_jax.sim import checkpoint, chunks, sharding, sweep  # noqa: E402

T, CHUNK = 40, 10  # four chunks; the worker is killed in the second
SEEDS = [0, 1, 2]
S4, K4, D4 = 2.0, 4, 5
FIELDS = MLogBMetrics._fields  # every metric a round reports
DIMS = {"EOFD": (1, 4), "EOFD robust": (K4, D4), "OFUL": (K4, D4)}  # (K, d) of each learner
EPS = float(np.finfo(np.float64).eps)


def _experiments() -> list[sweep.Experiment]:
    """EOFD (K = 1, d = 4, 3 grid points: 9 runs, padded to 12 over 4 devices), robust EOFD and
    OFUL (K = 4, d = 5, 2 grid points each at the tuned point and l + 0.5: 6 runs, padded to 8)."""
    env1 = envs.synthetic_mlogb(num_outcomes=1, dim=4, S=2.0, min_actions=3, max_actions=5)
    grid1 = sweep.grid_product(l=[0.0, 0.5, 1.0])
    rec = mlogb.section4(num_outcomes=1, dim=4, S=2.0, horizon=T, l=grid1["l"], e=0.5, beta=0.3)
    eofd = mlogb.eofd(num_outcomes=1, dim=4, sketch_size=2)
    exps = [
        sweep.Experiment(
            "EOFD", "synth K=1", mlogb.interact(eofd, env1), eofd.init, rec.hparams, grid1,
            env1.init,
        )
    ]  # fmt: skip
    env4 = envs.synthetic_mlogb(num_outcomes=K4, dim=D4, S=S4, min_actions=3, max_actions=6)
    for kind, label in (("eofd-robust", "EOFD robust"), ("oful", "OFUL")):
        point, _ = recipes.tuned_point(kind, S4, num_outcomes=K4, dim=D4)
        ls = np.array([point.l, point.l + 0.5])
        hp = recipes.hparams_for(
            kind, num_outcomes=K4, dim=D4, S=S4, horizon=T, l=ls, e=point.e, beta=point.beta
        )
        m = recipes.sketch_size(K4, D4)
        learner = recipes.make_learner(kind, num_outcomes=K4, dim=D4, sketch_size=m)
        exps.append(
            sweep.Experiment(
                label, "synth K=4", mlogb.interact(learner, env4), learner.init, hp, {"l": ls},
                env4.init,
            )
        )  # fmt: skip
    return exps


EXPERIMENTS = _experiments()


def sharded(ckdir: pathlib.Path, **kwargs) -> sweep.SweepResult:
    """The sweep the worker is killed in and the main process plays uninterrupted."""
    return sweep.run_sweep(
        EXPERIMENTS, num_rounds=T, seeds=SEEDS, mesh=sharding.run_mesh(), chunk_size=CHUNK,
        fields=FIELDS, checkpoint_dir=ckdir, **kwargs,
    )  # fmt: skip


def worker(ckdir: pathlib.Path) -> None:
    """Plays :func:`sharded` and hangs in the second chunk's commit (module docstring)."""
    save = checkpoint.save

    def save_then_hang(path, tree, meta=None):
        path = pathlib.Path(path)
        if path.name == "state.npz" and (meta or {}).get("chunks_done") == 2:
            (ckdir.parent / "paused").write_text(str(os.getpid()))
            time.sleep(600)  # killed here: chunk 2's metrics are on disk, its state is not
        return save(path, tree, meta)

    checkpoint.save = save_then_hang
    sharded(ckdir)
    print("FINISHED")  # never reached: the test kills this process first


def tolerance(exp: sweep.Experiment) -> float:
    """Relative agreement of two programs playing the same run with sums blocked differently
    (sharded: 2 or 3 runs per device; unsharded: all runs in one ``vmap``).

    Each side is within (K d) eps x cond(H) of exact arithmetic per round (the longest sum and
    solve is over the K d coordinates, the Hessian ``H_t = lam I + eta sum_s grad^2 l_s`` has
    ``cond <= 1 + eta T / lam`` since ``||grad^2 l_s|| <= ||x||^2 = 1``), errors carried through
    at most T rounds of the state, two sides: ``2 T K d eps (1 + eta T / lam)``."""
    hp, (K, d) = exp.hparams, DIMS[exp.learner]
    cond = 1.0 + float(np.max(np.asarray(hp.eta) * T / np.asarray(hp.lam)))
    return 2.0 * T * K * d * EPS * cond


def compare_sharded_unsharded(full: sweep.SweepResult, plain: sweep.SweepResult) -> dict:
    """Discrete outputs (choices, outcomes, statuses, ...) equal; floats within
    :func:`tolerance` of the field's largest magnitude."""
    worst = {}
    for exp, a, b in zip(EXPERIMENTS, plain.experiments, full.experiments, strict=True):
        assert a.metrics.keys() == b.metrics.keys() == set(FIELDS), a.metrics.keys()
        tol = tolerance(exp)
        for field in FIELDS:
            x, y = a.metrics[field], b.metrics[field]
            G = exp.grid_size
            assert x.shape[:3] == y.shape[:3] == (G, len(SEEDS), T), (field, x.shape, y.shape)
            msg = f"{exp.learner} {field}"
            if not np.issubdtype(x.dtype, np.floating):
                np.testing.assert_array_equal(x, y, err_msg=msg)
                continue
            scale = float(np.max(np.abs(x)))
            np.testing.assert_allclose(y, x, rtol=0, atol=tol * scale, err_msg=msg)
            if scale:
                worst[msg] = float(np.max(np.abs(x - y))) / scale
    return worst


def state_arrays(ckdir: pathlib.Path) -> dict[str, np.ndarray]:
    """Every array of a checkpoint's ``state.npz`` (learner, environment, key, round counter)."""
    with np.load(ckdir / "state.npz", allow_pickle=False) as z:
        return {k: z[k] for k in z.files if k.startswith("leaf_")}


def assert_same(a: sweep.SweepResult, b: sweep.SweepResult) -> None:
    for ea, eb in zip(a.experiments, b.experiments, strict=True):
        assert ea.metrics.keys() == eb.metrics.keys()
        for k in ea.metrics:
            np.testing.assert_array_equal(ea.metrics[k], eb.metrics[k], err_msg=f"{ea.learner} {k}")


class Recorded(chunks.Progress):
    """A silent bar that records the trial-rounds restored from checkpoints."""

    def __init__(self):
        super().__init__(0, enabled=False)
        self.skipped = 0

    def skip(self, trial_rounds):
        self.skipped += int(trial_rounds)
        super().skip(trial_rounds)


def split_under_budget(report: dict) -> None:
    """EOFD K = 1 (12 runs, 3 per device) split under a memory budget into batches of fewer runs
    per device, the last one padded: the same regret, actions and statuses bit for bit; float
    diagnostics within :func:`tolerance`. (With 2 runs per device the budget cannot force a
    split: XLA compiles a batch of one run per device with a few more bytes than a batch of
    two.)"""
    exp, tn, seeds4 = EXPERIMENTS[0], 8, [0, 1, 2, 3]
    mesh = sharding.run_mesh()
    whole = sweep.run_sweep([exp], num_rounds=tn, seeds=seeds4, mesh=mesh, chunk_size=4)
    budget = whole.memory["peak_bytes"] - 1
    split = sweep.run_sweep(
        [exp], num_rounds=tn, seeds=seeds4, mesh=mesh, chunk_size=4, max_bytes=budget
    )
    assert split.memory["batches"] >= 2, split.memory
    tol = tolerance(exp)
    for field, a in whole.experiments[0].metrics.items():
        b = split.experiments[0].metrics[field]
        if field in ("regret", "explored", "status"):
            np.testing.assert_array_equal(a, b, err_msg=field)
        else:
            np.testing.assert_allclose(b, a, rtol=0, atol=tol * np.max(np.abs(a)), err_msg=field)
    report["split_batches"] = split.memory["batches"]


def main(ckdir: pathlib.Path) -> None:
    """Sharded = unsharded, a complete checkpoint reads back, a budget split, then the resume of
    the killed worker's checkpoint (module docstring)."""
    assert len(jax.devices()) == 4, jax.devices()
    report: dict = {}
    full_dir = ckdir.parent / "full"
    # Unsharded first: meanwhile the worker compiles the sharded program (the shared cache).
    t0 = time.perf_counter()
    plain = sweep.run_sweep(EXPERIMENTS, num_rounds=T, seeds=SEEDS, fields=FIELDS)
    t1 = time.perf_counter()
    full = sharded(full_dir)
    assert full.devices == 4
    report["seconds"] = {
        "unsharded": t1 - t0,
        "sharded": time.perf_counter() - t1,
        "compile_sharded": full.compile_seconds,
    }
    report["worst_relative_diff"] = compare_sharded_unsharded(full, plain)
    # Resuming from a complete checkpoint plays nothing and reads back the same arrays.
    again = sharded(full_dir, resume=True)
    assert again.run_seconds == 0.0
    assert_same(full, again)
    t0 = time.perf_counter()
    split_under_budget(report)
    report["seconds"]["split"] = time.perf_counter() - t0

    deadline = time.monotonic() + 300
    while not (ckdir.parent / "killed").exists():
        assert time.monotonic() < deadline, "the test never killed the worker"
        time.sleep(0.05)
    bar = Recorded()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        resumed = sharded(ckdir, resume=True, progress=bar)
    # The killed run's lock was taken over, and its first chunk restored, not replayed.
    assert any("stale lock" in str(w.message) for w in caught), [str(w.message) for w in caught]
    runs = resumed.memory["runs_per_batch"]  # 12 + 8 + 8, padding included
    assert bar.skipped == CHUNK * runs, (bar.skipped, runs)
    report["restored_trial_rounds"] = bar.skipped
    assert_same(full, resumed)
    want, got = state_arrays(full_dir), state_arrays(ckdir)
    assert want.keys() == got.keys() and len(want) > 0
    for k in want:
        np.testing.assert_array_equal(got[k], want[k], err_msg=k)
    report["state_arrays"] = len(want)
    report["cpu_seconds"] = sum(os.times()[:2])
    print("OK")
    print(json.dumps(report))


if __name__ == "__main__":
    role, directory = sys.argv[1], pathlib.Path(sys.argv[2])
    {"worker": worker, "main": main}[role](directory)
