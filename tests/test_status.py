"""The one status space (:mod:`bandits_jax.status`) against tables written out here, the
secular solver's step cap reaching the status of the sketch and EOFD updates, and failure counts
that mean failure: none on ordinary runs of every registry kind, ``INEXACT`` only beyond
Lemma 2's rounding (:func:`bandits_jax.linalg.projection.ball_margin`)."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bandits_jax import envs, mlogb, sim
from bandits_jax.linalg import projection, roots, secular, sketch
from bandits_jax.mlogb import bonus, recipes
from bandits_jax.mlogb.learner import into_ball
from bandits_jax.mlogb.uniform import uniform_hyperparams
from bandits_jax.status import (
    MESSAGES,
    SEVERITY,
    Status,
    count_status,
    is_failure,
    is_rejected,
    worst,
    worst_of,
)

# Written out independently of the module: mildest first, the failures, the rejections.
ORDER = [
    "CONVERGED",
    "INACTIVE",
    "INEXACT",
    "MAX_STEPS",
    "NAN_SCORES",
    "NONFINITE",
    "BAD_OUTCOME",
    "EMPTY_MASK",
]
FAILURES = {"MAX_STEPS", "NONFINITE", "BAD_OUTCOME", "INEXACT", "NAN_SCORES", "EMPTY_MASK"}
REJECTED = {"NONFINITE", "BAD_OUTCOME"}
CODES = [int(Status[n]) for n in ORDER]


def _expected_worst(a: int, b: int) -> int:
    return max(a, b, key=lambda c: ORDER.index(Status(c).name))


def _emitted() -> set[int]:
    """Codes that the library's solvers, selection and updates actually produce."""
    out = set()

    def lin(x):  # increasing, root at 0.3
        return x - 0.3, jnp.ones_like(x)

    for fn, steps in ((lin, 50), (lambda x: (jnp.tanh(x) - 0.3, jnp.zeros_like(x)), 1)):
        res = roots.bracketed_newton(fn, -1.0, 1.0, 0.9, max_steps=steps, ftol=1e-14, xtol=0.0)
        out.add(int(res.status))  # CONVERGED, then MAX_STEPS (one bisection step)
    nan = roots.bracketed_newton(
        lambda x: (x * jnp.nan, x), -1.0, 1.0, 0.0, max_steps=5, ftol=1e-9, xtol=1e-9
    )
    out.add(int(nan.status))  # NONFINITE
    inside = projection.dual_root(jnp.asarray(0.25), jnp.zeros(2), jnp.ones(2), 1.0, 1.0)
    out.add(int(inside.status))  # INACTIVE: already in the ball
    select = jax.jit(bonus.select_index)
    for v, m in (([0.1, jnp.nan], [True, True]), ([0.1, 0.2], [False, False])):
        out.add(int(select(jnp.asarray(v), jnp.asarray(m))[1]))  # NAN_SCORES, EMPTY_MASK
    lrn = mlogb.uniform(num_outcomes=1, dim=2)
    state = lrn.init(uniform_hyperparams(seed=0))
    update = jax.jit(lrn.update)
    out.add(int(update(state, jnp.ones(2), jnp.asarray(5)).status))  # BAD_OUTCOME
    return out


def test_every_code_has_a_name_a_message_and_its_own_value():
    assert sorted(Status.__members__) == sorted(ORDER)  # no alias: each name its own value
    assert len({int(s) for s in Status}) == len(ORDER)
    for s in Status:
        assert isinstance(MESSAGES[s], str) and MESSAGES[s].strip(), s
    emitted = _emitted()
    names = {Status(c).name for c in emitted}
    assert {"CONVERGED", "MAX_STEPS", "NONFINITE", "INACTIVE", "BAD_OUTCOME"} <= names
    assert {"NAN_SCORES", "EMPTY_MASK"} <= names


def test_selection_codes_do_not_collide_with_update_codes():
    update = {int(Status[n]) for n in ORDER if n not in ("NAN_SCORES", "EMPTY_MASK")}
    assert not update & {int(Status.NAN_SCORES), int(Status.EMPTY_MASK)}
    # linalg re-exports the solver codes only.
    for n in ("CONVERGED", "MAX_STEPS", "NONFINITE", "INACTIVE", "INEXACT"):
        assert getattr(roots, n) is Status[n]
    for n in ("BAD_OUTCOME", "NAN_SCORES", "EMPTY_MASK"):
        assert not hasattr(roots, n)


def test_severity_table_is_the_written_order():
    assert [s.name for s in SEVERITY] == ORDER


def test_worst_is_commutative_and_follows_the_table():
    for a, b in itertools.product(CODES, CODES):
        want = _expected_worst(a, b)
        assert int(worst(a, b)) == int(worst(b, a)) == want, (Status(a), Status(b))
    # Not the numeric order: INACTIVE (3) is milder than MAX_STEPS (1).
    assert int(worst(Status.INACTIVE, Status.MAX_STEPS)) == Status.MAX_STEPS


def test_worst_under_jit_and_vmap_matches_eager():
    a, b = (np.asarray(x, np.int32) for x in zip(*itertools.product(CODES, CODES), strict=True))
    got = jax.jit(jax.vmap(worst))(jnp.asarray(a), jnp.asarray(b))
    want = [_expected_worst(int(x), int(y)) for x, y in zip(a, b, strict=True)]
    np.testing.assert_array_equal(np.asarray(got), want)
    assert got.dtype == jnp.int32
    np.testing.assert_array_equal(worst(a, b), want)  # numpy arrays


def test_worst_of_is_order_independent():
    rng = np.random.default_rng(0)
    for size in (1, 2, 3, 5, 8):
        for _ in range(10):
            codes = rng.choice(CODES, size=size)
            want = max(codes.tolist(), key=lambda c: ORDER.index(Status(c).name))
            for perm in (codes, codes[::-1], rng.permutation(codes)):
                assert int(worst_of(perm)) == want
                assert int(jax.jit(worst_of)(jnp.asarray(perm, jnp.int32))) == want
            folded = codes[0]
            for c in codes[1:]:
                folded = worst(folded, c)
            assert int(folded) == want


@pytest.mark.parametrize("pred,names", [(is_failure, FAILURES), (is_rejected, REJECTED)])
def test_predicates_agree_with_the_table(pred, names):
    want = np.array([Status(c).name in names for c in CODES])
    got_int = np.array([bool(pred(c)) for c in CODES])
    got_np = np.asarray(pred(np.asarray(CODES)))
    got_jit = np.asarray(jax.jit(pred)(jnp.asarray(CODES, jnp.int32)))
    got_eager = np.asarray(pred(jnp.asarray(CODES, jnp.int32)))
    for got in (got_int, got_np, got_jit, got_eager):
        np.testing.assert_array_equal(got, want)
    assert bool(is_failure(99)) and not bool(is_rejected(99))  # unknown: a failure, not rejected


def test_count_status_counts_every_name():
    codes = np.array([[Status.EMPTY_MASK, Status.CONVERGED], [Status.CONVERGED, 42]])
    got = count_status(codes)
    assert list(got)[: len(ORDER)] == [s.name.lower() for s in Status]
    assert got["converged"] == 2 and got["empty_mask"] == 1 and got["other"] == 1
    assert sum(got.values()) == codes.size


# --- the secular solver's step cap ---------------------------------------------------------


def _capped(monkeypatch):
    """One root step in all (the midpoint), instead of 1 + UNROLLED + MAX_EXTRA_STEPS."""
    monkeypatch.setattr(secular, "UNROLLED", 0)
    monkeypatch.setattr(secular, "MAX_EXTRA_STEPS", 0)


def test_capped_secular_solve_reports_max_steps_through_the_sketch_update(monkeypatch):
    D, m = 8, 3
    rng = np.random.default_rng(1)
    state = sketch.init(D, m, jnp.float64)
    for _ in range(4):  # a sketch with distinct weights (several active roots)
        state, _, status = sketch.update(state, jnp.asarray(rng.normal(size=(D, 1))))
        assert int(status) == Status.CONVERGED
    B = jnp.asarray(rng.normal(size=(D, 1)))
    _capped(monkeypatch)
    capped, _, status = sketch.update(state, B)
    assert int(status) == Status.MAX_STEPS
    assert np.all(np.isfinite(np.asarray(capped.mu)))  # the last iterates are still usable


@pytest.mark.parametrize("rule", ["per_round", "fast"])
def test_capped_secular_solve_reaches_the_eofd_status(monkeypatch, rule):
    d = 6
    rng = np.random.default_rng(2)
    xs = rng.normal(size=(5, d)) / np.sqrt(d)
    hp = mlogb.hyperparams(lam=1.0, eta=1.0, S=5.0)

    def last_status():
        lrn = mlogb.eofd(num_outcomes=1, dim=d, sketch_size=3, sketch_rule=rule)
        state = lrn.init(hp)
        for i, x in enumerate(xs):
            state = lrn.update(state, jnp.asarray(x), jnp.asarray(i % 2))
        return int(state.status)

    # Uncapped the same rounds converge (no projection in the ball of radius 5).
    assert last_status() in (Status.CONVERGED, Status.INACTIVE)
    _capped(monkeypatch)
    assert last_status() == Status.MAX_STEPS


# --- failure counts that mean failure ------------------------------------------------------


@pytest.mark.parametrize("kind", recipes.KINDS)
def test_ordinary_runs_count_no_failure(kind):
    """Every registry kind at its recipe on Section 4's stream (unit-norm actions), float64, 8
    vmapped trials as a user plays them: no update or selection status is a failure. At
    ``S = 1`` the projecting kinds project on many rounds (with the former ``4 eps`` margin,
    ``eofd`` counted 17 ``INEXACT`` of its 377 here)."""
    K, d, S, T, trials = (1 if kind in recipes.K1_ONLY else 2), 6, 1.0, 300, 8
    rec = mlogb.tuned(kind, num_outcomes=K, dim=d, S=S, horizon=T)
    env = envs.synthetic_mlogb(num_outcomes=K, dim=d, S=S)
    run = sim.make_rollout(mlogb.interact(rec.learner, env), T, trials=True)
    keys = jax.random.split(jax.random.key(7), trials)
    m = run(rec.learner.init(rec.hparams), jax.vmap(env.init)(keys), keys)
    failed = {
        f"{what} {name}": n
        for what, codes in (("update", m.status), ("select", m.select_status))
        for name, n in count_status(codes).items()
        if n and bool(is_failure(int(Status[name.upper()])))
    }
    assert not failed, f"{kind}: {failed}"
    if kind in ("eofd", "eofd-robust", "oful", "greedy"):  # the margin is exercised
        assert int(np.sum(m.projected)) >= 20, kind


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64])
def test_into_ball_flags_only_what_rounding_does_not_explain(dtype):
    """Within :func:`~bandits_jax.linalg.projection.ball_margin` of the sphere ``W`` is kept and
    its status too; beyond it ``W`` is put back on the sphere and ``INEXACT`` (a failure)."""
    K, d, S = 2, 8, 1.5
    margin = projection.ball_margin(K * d, dtype)
    eps = float(jnp.finfo(dtype).eps)
    assert margin == pytest.approx((8.0 + 4.0 * np.sqrt(K * d)) * eps, rel=1e-12)  # 24 eps
    hp = mlogb.hyperparams(lam=1.0, eta=1.0, S=S, rewards=[0.5, 1.0], dtype=dtype)
    state = mlogb.eofd(num_outcomes=K, dim=d, sketch_size=2).init(hp)
    direction = np.random.default_rng(0).normal(size=(K, d))
    direction /= np.linalg.norm(direction)
    for excess, flagged in ((0.0, False), (0.5, False), (0.75, False), (1.5, True), (1e3, True)):
        W = jnp.asarray(S * (1.0 + excess * margin) * direction, dtype)
        out = into_ball(state._replace(W=W))
        norm = np.linalg.norm(np.asarray(out.W, np.longdouble))
        assert int(out.status) == (Status.INEXACT if flagged else Status.CONVERGED), excess
        assert bool(is_failure(out.status)) == flagged
        if flagged:
            assert abs(norm / S - 1.0) <= 4 * eps, excess
        else:
            np.testing.assert_array_equal(np.asarray(out.W), np.asarray(W))
