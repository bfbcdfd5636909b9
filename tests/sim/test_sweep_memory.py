"""Sweep memory: XLA's figures per compiled call, grids split into batches that give the same
table bit for bit, out-of-memory retries, and checkpoints that resume the recorded plan."""

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bandits_jax.sim import checkpoint, chunks, sweep
from bandits_jax.sim.runner import play

D, T = 16, 6


def toy_step(learner, env, key):
    """A small online least-squares learner: a (D, D) matrix in the state, so its bytes show."""
    x = jax.random.normal(key, (D,))
    y = env["theta"] @ x
    err = y - learner["w"] @ x
    A = learner["A"] * 0.9 + jnp.outer(x, x)
    w = learner["w"] + learner["lr"] * err * (A @ x) / jnp.trace(A)
    metrics = {"regret": err**2, "status": jnp.zeros((), jnp.int32)}
    return {"w": w, "A": A, "lr": learner["lr"]}, env, metrics


def toy_experiment(lrs, name="toy"):
    return sweep.Experiment(
        name,
        "gauss",
        toy_step,
        lambda hp: {"w": jnp.zeros(D), "A": jnp.eye(D), "lr": hp["lr"] + 0.0},
        {"lr": jnp.asarray(lrs, jnp.float64)},
        {"lr": np.asarray(lrs)},
        lambda k: {"theta": jax.random.normal(k, (D,))},
    )


EXP3 = toy_experiment([0.1, 0.5, 1.0])  # 3 grid points
EXP2 = toy_experiment([0.2, 0.7], name="toy2")  # another experiment in the same call
SEEDS = [5, 6]


@pytest.fixture(scope="module")
def unsplit():
    return sweep.run_sweep([EXP3, EXP2], num_rounds=T, seeds=SEEDS, chunk_size=3, max_bytes=None)


def nbytes(tree):
    """Bytes of the arrays of a tree (typed PRNG keys: their key data)."""
    return sum(
        (jax.random.key_data(x) if jnp.issubdtype(x.dtype, jax.dtypes.prng_key) else x).nbytes
        for x in jax.tree_util.tree_leaves(tree)
    )


def own_chunk(states, length):
    """The sweep's chunk written and compiled here: each experiment's runs ``vmap``-ed over
    ``play`` for ``length`` rounds, the carry donated. Returns XLA's memory analysis of it and
    its outputs (new states and every metric, run on the states)."""

    def chunk(ss):
        outs = [jax.vmap(lambda s: play(toy_step, s, length))(x) for x in ss]
        return tuple(o[0] for o in outs), tuple(o[1] for o in outs)

    analysis = jax.jit(chunk, donate_argnums=0).lower(states).compile().memory_analysis()
    return analysis, jax.jit(chunk)(states)


def test_figures_are_the_bytes_of_the_chunk_call(unsplit):
    """The sweep's figures against the real bytes of the states and outputs of a chunk, and
    XLA's analysis of the same chunk compiled here."""
    small = sweep.run_sweep([EXP3, EXP2], num_rounds=T, seeds=[5], chunk_size=3, max_bytes=None)
    for res, seeds in ((small, [5]), (unsplit, SEEDS)):
        states = tuple(sweep.build_runs(e, seeds) for e in (EXP3, EXP2))
        analysis, (new_states, metrics) = own_chunk(states, 3)
        mem = res.memory
        # The argument is the stacked run states, donated: aliased to the new states.
        assert mem["argument_bytes"] == mem["alias_bytes"] == nbytes(states) == nbytes(new_states)
        for e, s in zip(res.experiments, states, strict=True):
            assert e.memory["state_bytes"] == nbytes(s)
        # Outputs: new states and every metric of a 3-round chunk (before the sweep keeps its
        # fields), plus XLA's output tuple, one 8-byte pointer per leaf at most.
        leaves = len(jax.tree_util.tree_leaves((new_states, metrics)))
        real_out = nbytes(new_states) + nbytes(metrics)
        assert real_out <= mem["output_bytes"] <= real_out + 8 * leaves
        assert mem["output_bytes"] == analysis.output_size_in_bytes
        assert mem["temp_bytes"] == analysis.temp_size_in_bytes
        # Donated, the carry's input buffers are its outputs: a call holds its outputs and XLA's
        # temporaries.
        peak = analysis.output_size_in_bytes + analysis.temp_size_in_bytes
        assert mem["peak_bytes"] == peak
        assert mem["batches"] == 1 and mem["runs"] == mem["runs_per_batch"] == 5 * len(seeds)
        assert mem["measured_peak_bytes"] is None  # CPU devices report no memory_stats
        rows = sweep.table(res)
        assert len(rows) == 5 and all(r["peak_bytes"] == peak for r in rows)
        assert all(r["bytes_per_run"] * 5 * len(seeds) == pytest.approx(peak) for r in rows)


def test_batch_plan_covers_every_run_once():
    plan = sweep.BatchPlan.of((6, 4), 4)
    assert plan.slots == (2, 1) and plan.batches == 4
    plan = sweep.BatchPlan.of((7, 3), 3, multiple=2)  # widths rounded up to the mesh size
    assert plan.slots == (4, 2) and plan.batches == 2
    for runs in [(6, 4), (7, 3), (1, 5)]:
        for b_req in range(1, 8):
            plan = sweep.BatchPlan.of(runs, b_req)
            for i, r in enumerate(runs):
                real = np.concatenate(
                    [plan.indices(b)[i][: plan.valid(b)[i]] for b in range(plan.batches)]
                )
                np.testing.assert_array_equal(real, np.arange(r))
    state = sweep.build_runs(EXP3, SEEDS)
    part = sweep.build_runs(EXP3, SEEDS, [4, 1, 1])
    for x, y in zip(jax.tree_util.tree_leaves(state), jax.tree_util.tree_leaves(part), strict=True):
        if jnp.issubdtype(x.dtype, jax.dtypes.prng_key):
            x, y = jax.random.key_data(x), jax.random.key_data(y)
        np.testing.assert_array_equal(np.asarray(x)[[4, 1, 1]], np.asarray(y))
    with pytest.raises(ValueError, match="indices"):
        sweep.build_runs(EXP3, SEEDS, [6])


def assert_same_results(a, b):
    for ea, eb in zip(a.experiments, b.experiments, strict=True):
        assert ea.metrics.keys() == eb.metrics.keys()
        for k in ea.metrics:
            np.testing.assert_array_equal(ea.metrics[k], eb.metrics[k], err_msg=k)
    ta, tb = sweep.table(a), sweep.table(b)
    drop = sweep.MEMORY_COLUMNS
    assert [{k: v for k, v in r.items() if k not in drop} for r in ta] == [
        {k: v for k, v in r.items() if k not in drop} for r in tb
    ]


def test_split_sweep_is_bit_identical(unsplit, capsys):
    full = unsplit.memory["peak_bytes"]
    # A budget of 45% of the one-call figure: split (6 and 4 runs in batches of 2 and 2, the
    # second experiment's last batch padded).
    split = sweep.run_sweep(
        [EXP3, EXP2], num_rounds=T, seeds=SEEDS, chunk_size=3, max_bytes=int(0.45 * full)
    )
    mem = split.memory
    assert mem["batches"] > 1 and mem["peak_bytes"] <= int(0.45 * full)
    assert mem["runs"] == 10 and mem["runs_per_batch"] < 10
    second = split.experiments[1].memory
    assert second["runs_per_batch"] * mem["batches"] > second["runs"]  # padding was played
    assert split.experiments[0].memory["batches"] == mem["batches"]
    assert_same_results(unsplit, split)
    with pytest.raises(ValueError, match="max_bytes"):
        sweep.run_sweep([EXP3], num_rounds=T, seeds=SEEDS, max_bytes=1000)
    with pytest.raises(ValueError, match="max_bytes"):
        sweep.run_sweep([EXP3], num_rounds=T, seeds=SEEDS, max_bytes="lots")


def test_out_of_memory_is_retried_with_half_the_batch(unsplit, monkeypatch):
    real = chunks.ChunkFn.compiled

    class Flaky:
        """An executable whose calls with more than 4 runs per experiment run out of memory."""

        def __init__(self, exe, runs):
            self.exe, self.runs = exe, runs

        def memory_analysis(self):
            return self.exe.memory_analysis()

        def __call__(self, state):
            if self.runs > 4:
                raise jax.errors.JaxRuntimeError("RESOURCE_EXHAUSTED: Out of memory (test)")
            return self.exe(state)

    def compiled(self, state, length, progress=None):
        exe = real(self, state, length, progress)
        return Flaky(exe, jax.tree_util.tree_leaves(state[0])[0].shape[0])

    monkeypatch.setattr(chunks.ChunkFn, "compiled", compiled)
    res = sweep.run_sweep([EXP3, EXP2], num_rounds=T, seeds=SEEDS, chunk_size=3, max_bytes=None)
    mem = res.memory
    assert mem["retries"] == 1 and mem["batches"] == 2 and "out of memory" in mem["notes"][0]
    assert_same_results(unsplit, res)
    with pytest.raises(jax.errors.JaxRuntimeError, match="RESOURCE_EXHAUSTED"):
        sweep.run_sweep([EXP3, EXP2], num_rounds=T, seeds=SEEDS, max_bytes=None, max_retries=0)


def test_split_checkpoints_resume_their_plan(unsplit, tmp_path):
    ck = tmp_path / "ck"
    kw = dict(num_rounds=T, seeds=SEEDS, chunk_size=3, checkpoint_dir=ck)
    budget = int(0.6 * unsplit.memory["peak_bytes"])
    first = sweep.run_sweep([EXP3, EXP2], max_bytes=budget, **kw)
    plan = json.loads((ck / "plan.json").read_text())
    assert plan["batches"] == first.memory["batches"] > 1
    assert (ck / "batch_0001" / "state.npz").is_file() and not (ck / "state.npz").exists()
    # Resumed without a budget (which alone would play one batch): the recorded plan is played,
    # read back from the batches' checkpoints.
    again = sweep.run_sweep([EXP3, EXP2], max_bytes=None, resume=True, **kw)
    assert again.memory["batches"] == plan["batches"] and again.run_seconds == 0.0
    assert_same_results(unsplit, again)
    # A budget the recorded plan does not fit is refused, not silently replanned.
    with pytest.raises(checkpoint.CheckpointError, match="budget"):
        sweep.run_sweep([EXP3, EXP2], max_bytes=budget // 3, resume=True, **kw)
    # Another sweep's checkpoint (other runs) is refused too.
    with pytest.raises(checkpoint.CheckpointError, match="runs per experiment"):
        sweep.run_sweep([EXP3], max_bytes=None, resume=True, **kw)


def test_microbatch_plays_the_same_runs_in_slices(unsplit):
    # lax.map over 2-run vmapped slices: the same numbers as one vmap (to rounding), and a split
    # into batches (widths multiples of 2, the second experiment padded) equal bit for bit.
    kw = dict(num_rounds=T, seeds=SEEDS, chunk_size=3, microbatch=2)
    one = sweep.run_sweep([EXP3, EXP2], max_bytes=None, **kw)
    assert one.memory["microbatch"] == 2 and one.memory["runs_per_batch"] == 10
    for a, b in zip(unsplit.experiments, one.experiments, strict=True):
        np.testing.assert_allclose(a.metrics["regret"], b.metrics["regret"], rtol=1e-12)
    split = sweep.run_sweep([EXP3, EXP2], max_bytes=one.memory["peak_bytes"] - 1, **kw)
    assert split.memory["batches"] > 1 and all(
        e.memory["runs_per_batch"] % 2 == 0 for e in split.experiments
    )
    assert_same_results(one, split)
    with pytest.raises(ValueError, match="microbatch"):
        chunks.ChunkFn(toy_step, batched=True, microbatch=0)
    with pytest.raises(ValueError, match="microbatch"):
        chunks.ChunkFn(toy_step, microbatch=2)
