"""Chunked runs: chunks equal one scan; an interrupted and resumed run is bit-identical."""

import io

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bandits_jax.sim import checkpoint
from bandits_jax.sim.chunks import ChunkFn, Progress, run_chunked
from bandits_jax.sim.runner import init_run, play


def toy_step(learner, env, key):
    """A small nonlinear learner on a drifting environment: state carries floats and keys."""
    k1, k2 = jax.random.split(key)
    x = jax.random.normal(k1, (3,)) + env["drift"]
    w = learner["w"] + learner["lr"] * jnp.tanh(x - learner["w"])
    env = {"drift": env["drift"] * 0.99 + 0.01 * jax.random.normal(k2, (3,)), "n": env["n"] + 1}
    metrics = {"loss": jnp.sum((x - w) ** 2), "n": env["n"]}
    return {"w": w, "lr": learner["lr"]}, env, metrics


def init_state(seed, lr=0.1):
    learner = {"w": jnp.zeros(3), "lr": jnp.asarray(lr)}
    env = {"drift": jnp.ones(3), "n": jnp.zeros((), jnp.int32)}
    return init_run(learner, env, jax.random.key(seed))


def batch_state(seeds, lrs):
    return jax.tree_util.tree_map(
        lambda *xs: jnp.stack(xs), *[init_state(s, lr) for s, lr in zip(seeds, lrs, strict=True)]
    )


SINGLE = ChunkFn(toy_step)
BATCHED = ChunkFn(toy_step, batched=True)


def assert_trees_equal(a, b):
    la, lb = jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)
    assert len(la) == len(lb)
    for x, y in zip(la, lb, strict=True):
        if jnp.issubdtype(x.dtype, jax.dtypes.prng_key):
            x, y = jax.random.key_data(x), jax.random.key_data(y)
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def test_chunks_equal_one_scan():
    state = init_state(0)
    final, metrics = jax.jit(lambda s: play(toy_step, s, 23))(state)
    res = run_chunked(SINGLE, state, 23, chunk_size=5)
    assert res.stats.finished and res.stats.rounds_done == 23
    assert len(res.stats.chunk_seconds) == 5
    np.testing.assert_allclose(res.metrics["loss"], np.asarray(metrics["loss"]), rtol=1e-12)
    np.testing.assert_array_equal(res.metrics["n"], np.arange(1, 24))
    assert int(res.state.t) == 23
    assert_trees_equal(res.state.key, final.key)  # keys are integer maths: exact


@pytest.mark.parametrize("stop_after", [1, 3])
def test_resume_is_bit_identical(tmp_path, stop_after):
    state = batch_state([0, 1, 2], [0.1, 0.2, 0.3])
    full = run_chunked(BATCHED, state, 17, chunk_size=4, checkpoint_dir=tmp_path / "full")
    part = run_chunked(
        BATCHED,
        state,
        17,
        chunk_size=4,
        checkpoint_dir=tmp_path / "ck",
        stop_after_chunks=stop_after,
    )
    assert not part.stats.finished and part.stats.rounds_done == 4 * stop_after
    assert part.metrics["loss"].shape == (3, 4 * stop_after)
    # A fresh process would only have the initial state as template: resume from disk.
    out = io.StringIO()
    with Progress(17 * 3, "toy", stream=out) as bar:  # trial-rounds: 3 runs x 17 rounds
        rest = run_chunked(
            BATCHED,
            state,
            17,
            chunk_size=4,
            checkpoint_dir=tmp_path / "ck",
            resume=True,
            progress=bar,
        )
    assert rest.stats.finished and rest.stats.resumed_from == 4 * stop_after
    assert rest.metrics["loss"].shape == (3, 17)
    assert_trees_equal(rest.metrics, full.metrics)
    assert_trees_equal(rest.state, full.state)
    assert bar.done == bar.total == 51
    assert "51/51 trial-rounds" in out.getvalue() and "trial-rounds/s" in out.getvalue()


def test_resume_refuses_other_config(tmp_path):
    state = init_state(0)
    run_chunked(
        SINGLE,
        state,
        8,
        chunk_size=4,
        checkpoint_dir=tmp_path,
        config={"a": 1},
        stop_after_chunks=1,
    )
    with pytest.raises(checkpoint.CheckpointError, match="config"):
        run_chunked(
            SINGLE, state, 8, chunk_size=4, checkpoint_dir=tmp_path, config={"a": 2}, resume=True
        )
    with pytest.raises(checkpoint.CheckpointError, match="chunk_size"):
        run_chunked(
            SINGLE, state, 8, chunk_size=2, checkpoint_dir=tmp_path, config={"a": 1}, resume=True
        )


def test_checkpoint_roundtrip_and_mismatch(tmp_path):
    state = init_state(3)
    checkpoint.save(tmp_path / "s.npz", state, {"x": 1})
    back, meta = checkpoint.restore(tmp_path / "s.npz", state)
    assert meta == {"x": 1}
    assert_trees_equal(back, state)
    with np.load(tmp_path / "s.npz", allow_pickle=False) as z:  # plain arrays, no pickle
        assert "leaf_00000" in z.files
    other = init_run({"w": jnp.zeros(4), "lr": jnp.asarray(0.1)}, state.env, state.key)
    with pytest.raises(checkpoint.CheckpointError, match="expects"):
        checkpoint.restore(tmp_path / "s.npz", other)
    with pytest.raises(checkpoint.CheckpointError, match="no checkpoint"):
        checkpoint.restore(tmp_path / "missing.npz", state)


def test_progress_counts_trial_rounds_and_skips_restored_ones_in_the_rate():
    out = io.StringIO()
    bar = Progress(100, "x", stream=out, min_interval=0)
    bar.skip(40)  # restored: counted, not timed
    assert bar._bar.initial == 40
    bar.advance(25)
    bar.close()
    last = out.getvalue().split("\r")[-1]
    assert bar.done == 65 and "65/100 trial-rounds" in last and "trial-rounds/s" in last
    quiet = Progress(10, stream=out, enabled=False)
    quiet.advance(4)
    quiet.skip(6)
    quiet.close()
    assert quiet.done == quiet.total == 10  # counted when nothing is drawn


def test_a_compile_shows_on_the_bar_in_use_and_a_log_is_not_spammed():
    out = io.StringIO()
    fn = ChunkFn(toy_step, batched=True)  # a fresh one: it has not compiled yet
    with Progress(3 * 40, "toy", stream=out) as bar:
        run_chunked(fn, batch_state([0, 1, 2], [0.1, 0.2, 0.3]), 40, chunk_size=4, progress=bar)
    text = out.getvalue()
    assert bar.done == bar.total == 120 and "120/120 trial-rounds" in text
    assert text.count("compiling a 4-round chunk of 3 run(s)") == 1  # ten chunks, one compile
    # Not a terminal: drawn at the start, for the compile, at the end (5 s between others).
    assert text.count("\r") <= 4, text


def test_chunk_donates_its_input_state_and_run_chunked_keeps_the_callers():
    state = batch_state([0, 1], [0.1, 0.3])
    reference = jax.jit(jax.vmap(lambda s: play(toy_step, s, 4)))(state)  # no donation
    given = jax.tree.map(jnp.copy, state)
    final, metrics = BATCHED(given, 4)
    assert all(x.is_deleted() for x in jax.tree.leaves(given)), "chunk input not donated"
    assert_trees_equal(final, reference[0])
    assert_trees_equal(metrics, reference[1])
    # run_chunked copies the caller's initial state once, then donates chunk to chunk.
    res = run_chunked(BATCHED, state, 4, chunk_size=2)
    assert not any(x.is_deleted() for x in jax.tree.leaves(state))
    assert_trees_equal(res.state, reference[0])
    assert_trees_equal(res.metrics, jax.device_get(reference[1]))
