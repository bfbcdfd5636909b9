"""Adversarial inputs and faults (issue 8): each case failed silently before and is now an error
naming the argument, a flagged and rejected step, or a refused checkpoint."""

import functools
import importlib
import shutil
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bandits_jax import mlogb
from bandits_jax.envs.synthetic_mlogb import synthetic_mlogb
from bandits_jax.linalg import projection, roots
from bandits_jax.mlogb import bonus
from bandits_jax.sim import checkpoint
from bandits_jax.sim.chunks import ChunkFn, run_chunked
from bandits_jax.sim.runner import init_run
from bandits_jax.status import Status
from tests.rejected import assert_rejected

# the MNIST file reader (``bandits_jax.envs.mnist`` on the face is the environment factory)
mnist_mod = importlib.import_module("bandits_jax.envs.mnist")

NAN, INF = float("nan"), float("inf")


def small_learner(name="eofd", K=2, d=3, dtype=jnp.float64, **kw):
    hp = mlogb.hyperparams(lam=1.0, eta=1.0, S=1.0, rewards=np.linspace(0.5, 1.0, K), dtype=dtype)
    if name == "eofd":
        learner = mlogb.eofd(num_outcomes=K, dim=d, sketch_size=2, **kw)
    else:
        learner = mlogb.oful(num_outcomes=K, dim=d, **kw)
    return learner, learner.init(hp)


# ------------------------------------------------------------------------------ 1. selection


def test_select_inf_wins():
    v = jnp.array([0.0, 1.0, INF, 2.0, INF])
    assert int(bonus.argmax_tie(v)) == 2
    mask = jnp.array([True, True, False, True, True])
    assert int(bonus.argmax_tie(v, mask)) == 4


def test_select_nan_never_chosen_and_flagged():
    v = jnp.array([NAN, 0.5, 0.7, NAN])
    assert int(bonus.argmax_tie(v)) == 2
    idx, status = jax.jit(bonus.select_index)(v, jnp.ones(4, bool))
    assert int(idx) == 2 and int(status) == Status.NAN_SCORES
    idx, status = bonus.select_index(jnp.array([0.1, 0.3]))
    assert int(idx) == 1 and int(status) == Status.CONVERGED


def test_select_masked_out_index_zero_never_chosen():
    v = jnp.array([5.0, NAN, NAN])
    assert int(bonus.argmax_tie(v, jnp.array([False, True, True]))) == 1
    idx, status = bonus.select_index(v, jnp.array([False, True, True]))
    assert int(idx) == 1 and int(status) == Status.NAN_SCORES


def test_select_empty_mask_error_eagerly_flag_under_jit():
    v = jnp.array([1.0, 2.0])
    with pytest.raises(ValueError, match="mask"):
        bonus.argmax_tie(v, jnp.zeros(2, bool))
    _, status = jax.jit(bonus.select_index)(v, jnp.zeros(2, bool))
    assert int(status) == Status.EMPTY_MASK
    learner, state = small_learner()
    with pytest.raises(ValueError, match="mask"):
        learner.select(state, jnp.eye(3), jnp.zeros(3, bool))


def test_select_takes_array_like_masks():
    """A list of bools is a mask like the array it stands for; a list of ints is not boolean."""
    learner, state = small_learner()
    actions = jnp.eye(3)
    for mask in ([False, True, False], [False, False, True]):
        assert int(learner.select(state, actions, mask)) == mask.index(True)
    with pytest.raises(ValueError, match="mask must be boolean"):
        learner.select(state, actions, [0, 1, 0])
    with pytest.raises(ValueError, match="mask is all False"):
        learner.select(state, actions, [False] * 3)


def test_interact_reports_select_status():
    env = synthetic_mlogb(num_outcomes=2, dim=3, min_actions=2, max_actions=4)
    observe = env.observe

    def empty_observe(es, key):  # an environment that offers no valid action
        es, actions, mask = observe(es, key)
        return es, actions, jnp.zeros_like(mask)

    learner, state = small_learner()
    step = jax.jit(mlogb.interact(learner, env._replace(observe=empty_observe)))
    es = env.init(jax.random.key(0))
    _, _, m = step(state, es, jax.random.key(1))
    assert int(m.select_status) == Status.EMPTY_MASK


# ------------------------------------------------------------------------------- 2. outcomes


@pytest.mark.parametrize("y", [1.7, True, NAN, jnp.float64(NAN)])
def test_outcome_eager_error_names_y(y):
    learner, state = small_learner()
    with pytest.raises(ValueError, match="y must"):
        learner.update(state, jnp.ones(3) / 3, y)


@pytest.mark.parametrize("name", ["eofd", "oful"])
def test_outcome_under_jit_rejected_and_flagged(name):
    learner, state = small_learner(name)
    update = jax.jit(learner.update)
    state = update(state, jnp.array([0.3, -0.2, 0.5]), jnp.asarray(1.0))
    x = jnp.array([0.1, 0.4, -0.2])
    for y in (3.0, -1.0, 1.5, NAN):  # out of range, not integer-valued, NaN
        new = update(state, x, jnp.asarray(y))
        assert_rejected(new, state)  # the whole state kept
        assert int(new.status) == Status.BAD_OUTCOME, y
    ok = update(state, x, jnp.asarray(2.0))
    assert int(ok.t) == int(state.t) + 1 and int(ok.status) != Status.BAD_OUTCOME


# ------------------------------------------------------------------------- 3. hyperparameters


@pytest.mark.parametrize(
    "kw, name",
    [
        (dict(delta=NAN), "delta"),
        (dict(lipschitz=NAN), "lipschitz"),
        (dict(lam=1e-300, dtype=jnp.float32), "lam"),
        (dict(lam=1e300, dtype=jnp.float32), "lam"),
        (dict(eta=1e300, dtype=jnp.float32), "eta"),
        (dict(beta=1e300, dtype=jnp.float32), "beta"),
        (dict(dtype=jnp.int32), "dtype"),
        (dict(dtype=jnp.float16), "dtype"),
        (dict(dtype=jnp.complex64), "dtype"),
    ],
)
def test_hyperparams_rejected(kw, name):
    args = dict(lam=1.0, eta=1.0, S=1.0)
    args.update(kw)
    with pytest.raises(ValueError, match=name):
        mlogb.hyperparams(**args)


@pytest.mark.parametrize("steps", [0, -3, 2.5, True])
def test_max_newton_steps_rejected(steps):
    with pytest.raises(ValueError, match="max_newton_steps"):
        mlogb.eofd(num_outcomes=1, dim=2, sketch_size=1, max_newton_steps=steps)
    with pytest.raises(ValueError, match="max_newton_steps"):
        mlogb.oful(num_outcomes=1, dim=2, max_newton_steps=steps)


@pytest.mark.parametrize(
    "kw, name",
    [
        (dict(dim=2.7), "dim"),
        (dict(num_outcomes=2.5), "num_outcomes"),
        (dict(horizon=100.5), "horizon"),
    ],
)
def test_section4_non_int_rejected(kw, name):
    args = dict(num_outcomes=2, dim=3, S=1.0, horizon=100)
    args.update(kw)
    with pytest.raises(ValueError, match=name):
        mlogb.section4(**args)


@pytest.mark.parametrize(
    "kw, name",
    [
        (dict(dim=2.7), "dim"),
        (dict(S=INF), "S"),
        (dict(rewards=[NAN, 1.0]), "rewards"),
        (dict(rewards=[-0.5, 1.0]), "rewards"),
    ],
)
def test_synthetic_env_rejected(kw, name):
    args = dict(num_outcomes=2, dim=3)
    args.update(kw)
    with pytest.raises(ValueError, match=name):
        synthetic_mlogb(**args)


# ------------------------------------------------------------------------------ 4. projection


def _ball_tol(dtype):
    return 32 * float(jnp.finfo(dtype).eps)


def test_solve_dual_max_steps_stays_feasible():
    rng = np.random.default_rng(3)
    solve = jax.jit(functools.partial(projection.dual_root, max_steps=1))
    for dtype in (jnp.float32, jnp.float64):
        for _ in range(20):
            m = 4
            w = rng.normal(size=8) * rng.uniform(2, 200)
            V = np.linalg.qr(rng.normal(size=(8, m)))[0]
            mu = rng.uniform(0, 50, size=m)
            lam, S = 0.5, 1.0
            a = V.T @ w
            cast = lambda z, dt=dtype: jnp.asarray(z, dt)  # noqa: E731
            sol = solve(cast(w @ w), cast(a), cast(mu), cast(lam), cast(S))
            alpha, c = projection.project_coeffs(cast(a), cast(mu), cast(lam), sol.nu)
            w_new = np.float64(alpha) * w + V @ np.asarray(c, np.float64)
            assert np.linalg.norm(w_new) <= S * (1 + _ball_tol(dtype)), int(sol.status)
            if int(sol.status) == roots.CONVERGED:  # the status is true: the root is accurate
                assert np.linalg.norm(w_new) >= S * (1 - _ball_tol(dtype))


@pytest.mark.parametrize("name, steps", [("eofd", 50), ("eofd", 1), ("oful", 1)])
def test_float32_large_x_stays_in_ball(name, steps):
    K, d, S = 2, 4, 0.3
    hp = mlogb.hyperparams(lam=1.0, eta=2.0, S=S, rewards=[0.5, 1.0], dtype=jnp.float32)
    if name == "eofd":
        learner = mlogb.eofd(num_outcomes=K, dim=d, sketch_size=2, max_newton_steps=steps)
    else:
        learner = mlogb.oful(num_outcomes=K, dim=d, max_newton_steps=steps)
    state, update = learner.init(hp), jax.jit(learner.update)
    rng = np.random.default_rng(0)
    for _ in range(25):
        x = (rng.normal(size=d) * 1e3).astype(np.float32)  # ||x|| >> action_bound = 1
        state = update(state, x, int(rng.integers(0, K + 1)))
        norm = np.linalg.norm(np.asarray(state.W, np.float64))
        assert norm <= S * (1 + _ball_tol(jnp.float32)), (norm / S, int(state.status))


# ----------------------------------------------------------------------------- 6. checkpoints


def toy_step(learner, env, key):
    x = jax.random.normal(key, (2,))
    w = learner["w"] + 0.1 * jnp.tanh(x - learner["w"])
    return {"w": w}, env, {"loss": jnp.sum((x - w) ** 2)}


def toy_state(seed):
    return init_run({"w": jnp.zeros(2)}, {"n": jnp.zeros((), jnp.int32)}, jax.random.key(seed))


CHUNK = ChunkFn(toy_step)


def _run(path, seed, **kw):
    return run_chunked(
        CHUNK, toy_state(seed), 12, chunk_size=4, checkpoint_dir=path, config={"seed": seed}, **kw
    )


def test_metrics_of_another_trial_refused(tmp_path):
    _run(tmp_path / "a", 0)
    _run(tmp_path / "b", 1, stop_after_chunks=2)
    shutil.copy(tmp_path / "a" / "metrics_00000.npz", tmp_path / "b" / "metrics_00000.npz")
    with pytest.raises(checkpoint.CheckpointError, match="metrics_00000"):
        _run(tmp_path / "b", 1, resume=True)


def test_state_with_nan_refused(tmp_path):
    _run(tmp_path, 0, stop_after_chunks=1)
    path = tmp_path / "state.npz"
    meta = checkpoint.read_meta(path)
    state, _ = checkpoint.restore(path, toy_state(0))
    state = state._replace(learner={"w": jnp.array([NAN, 0.0])})
    checkpoint.save(path, state, meta)
    with pytest.raises(checkpoint.CheckpointError, match="NaN"):
        _run(tmp_path, 0, resume=True)


@pytest.mark.parametrize("victim", ["state.npz", "metrics_00000.npz"])
def test_truncated_checkpoint_names_path(tmp_path, victim):
    _run(tmp_path, 0, stop_after_chunks=2)
    p = tmp_path / victim
    p.write_bytes(p.read_bytes()[: p.stat().st_size // 2])
    with pytest.raises(checkpoint.CheckpointError, match=victim):
        _run(tmp_path, 0, resume=True)


def test_truncated_mnist_npz_names_path(tmp_path):
    p = tmp_path / "mnist.npz"
    np.savez(p, x_train=np.zeros((4, 28, 28), np.uint8), y_train=np.zeros(4, np.uint8))
    p.write_bytes(p.read_bytes()[:300])
    with pytest.raises(mnist_mod.IDXFormatError, match="mnist.npz"):
        mnist_mod.load_mnist(p)


def test_chunks_done_past_end_refused(tmp_path):
    _run(tmp_path, 0)  # all 3 chunks (and their metrics) written
    path = tmp_path / "state.npz"
    meta = checkpoint.read_meta(path)
    state, _ = checkpoint.restore(path, toy_state(0))
    checkpoint.save(path, state, {**meta, "chunks_done": 5, "rounds_done": 20})
    with pytest.raises(checkpoint.CheckpointError, match="3 chunks of 4 rounds"):
        _run(tmp_path, 0, resume=True)


def test_lock_held_by_live_process_refused_stale_taken_over(tmp_path):
    tmp_path.mkdir(exist_ok=True)
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        (tmp_path / ".lock").write_text(f"{other.pid}\n")
        with pytest.raises(checkpoint.CheckpointLockError, match=str(other.pid)):
            _run(tmp_path, 0)
    finally:
        other.kill()
        other.wait()
    with pytest.warns(UserWarning, match="stale lock"):
        res = _run(tmp_path, 0)
    assert res.stats.finished
    assert not (tmp_path / ".lock").exists()  # released
