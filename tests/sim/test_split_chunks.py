"""Split chunks: the environment's half of a round compiled once (``DrawFn``) and shared by the
learners' chunks. That the command's split programs (and its robust EOFD played by the paper's
program, ``recipes.program_kind``) give the library's numbers is
``tests/cli/test_library_parity.py``'s check."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bandits_jax import envs, mlogb
from bandits_jax.sim.chunks import ChunkFn, DrawFn, run_chunked
from bandits_jax.sim.runner import SplitStep, init_run

T, K, D = 9, 2, 4
ENV = envs.synthetic_mlogb(num_outcomes=K, dim=D, S=3.0, max_actions=6, min_actions=3)


def learner_states():
    """Two learners of different kinds and their initial states."""
    eofd = mlogb.eofd(num_outcomes=K, dim=D, sketch_size=2)
    oful = mlogb.oful(num_outcomes=K, dim=D)
    hp = mlogb.hyperparams(lam=1.0, eta=0.5, S=3.0, rewards=[0.5, 1.0], beta=0.3)
    return (eofd, eofd.init(hp)), (oful, oful.init(hp))


def run_state(learner_state, seed):
    return init_run(learner_state, ENV.init(jax.random.key(100 + seed)), jax.random.key(seed))


def assert_close(got, want):
    """Equal integers and keys; floats to rounding (two programs may round differently)."""
    for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
        if jnp.issubdtype(a.dtype, jax.dtypes.prng_key):
            a, b = jax.random.key_data(a), jax.random.key_data(b)
        a, b = np.asarray(a), np.asarray(b)
        if np.issubdtype(a.dtype, np.floating):
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)
        else:
            np.testing.assert_array_equal(a, b)


def test_interact_is_a_split_step_whose_halves_compose_to_the_step():
    (learner, ls), _ = learner_states()
    step = mlogb.interact(learner, ENV)
    assert isinstance(step, SplitStep)
    es, key = ENV.init(jax.random.key(1)), jax.random.key(2)
    es2, rnd = step.draw(es, key)
    ls2, metrics = step.respond(ls, rnd)
    got = step(ls, es, key)
    assert_close(got, (ls2, es2, metrics))
    # the round's regret part is the environment's: eq. (2) from its expected rewards
    exp_r = ENV.expected_rewards(es2, rnd.actions)
    np.testing.assert_allclose(rnd.best, jnp.max(jnp.where(rnd.mask, exp_r, -jnp.inf)))
    np.testing.assert_allclose(metrics.regret, rnd.best - exp_r[metrics.choice])


def test_a_second_learner_does_not_compile_the_environment_again():
    draws = DrawFn(mlogb.draw_round(ENV))
    (a, sa), (b, sb) = learner_states()
    first = ChunkFn(mlogb.respond_round(a, ENV), draws=draws)
    first(run_state(sa, 0), 3)
    spent = draws.compile_seconds
    assert spent > 0 and first.compile_seconds >= spent  # counted by the chunk that compiled it
    second = ChunkFn(mlogb.respond_round(b, ENV), draws=draws)
    second(run_state(sb, 0), 3)
    assert draws.compile_seconds == spent and len(draws._compiled) == 1
    assert second.compile_seconds > 0  # its own program only


def test_a_split_run_resumes_bit_identically(tmp_path):
    (learner, ls), _ = learner_states()
    draws = DrawFn(mlogb.draw_round(ENV))
    chunk = ChunkFn(mlogb.respond_round(learner, ENV), draws=draws)
    full = run_chunked(chunk, run_state(ls, 3), T, chunk_size=4, checkpoint_dir=tmp_path / "a")
    kw = dict(chunk_size=4, checkpoint_dir=tmp_path / "b")
    part = run_chunked(chunk, run_state(ls, 3), T, stop_after_chunks=1, **kw)
    assert not part.stats.finished
    rest = run_chunked(chunk, run_state(ls, 3), T, resume=True, **kw)
    assert rest.stats.resumed_from == 4
    for got, want in ((rest.state, full.state), (rest.metrics, full.metrics)):
        for x, y in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
            if jnp.issubdtype(x.dtype, jax.dtypes.prng_key):
                x, y = jax.random.key_data(x), jax.random.key_data(y)
            np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def test_the_chunk_donates_and_has_no_memory_figures():
    (learner, ls), _ = learner_states()
    chunk = ChunkFn(mlogb.respond_round(learner, ENV), draws=DrawFn(mlogb.draw_round(ENV)))
    given = jax.tree.map(jnp.copy, run_state(ls, 0))
    chunk(given, 2)
    assert all(x.is_deleted() for x in jax.tree.leaves(given))
    assert chunk.memory(run_state(ls, 0), 2) is None


def test_bad_draws_are_named():
    (learner, _), _ = learner_states()
    respond = mlogb.respond_round(learner, ENV)
    draws = DrawFn(mlogb.draw_round(ENV))
    with pytest.raises(ValueError, match="draws: expected a DrawFn"):
        ChunkFn(respond, draws=mlogb.draw_round(ENV))
    with pytest.raises(ValueError, match="draws: .*one respond step"):
        ChunkFn((respond, respond), batched=True, draws=draws)
    with pytest.raises(ValueError, match="draws: .*microbatch"):
        ChunkFn(respond, batched=True, microbatch=1, draws=draws)
