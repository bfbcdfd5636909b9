"""Every MLogB learner rejects and flags the same bad inputs.

Eagerly each is a ``ValueError`` naming the argument; under ``jax.jit`` an update with a non-finite
``x`` or an outcome outside ``0..K`` is rejected (the state before the call is kept) and flagged
(``NONFINITE`` / ``BAD_OUTCOME``), and NaN scores of valid actions are flagged by the selection
(``NAN_SCORES``) and never chosen. A new learner joins with one line in :data:`KINDS`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bandits_jax import mlogb
from bandits_jax.mlogb import bonus
from bandits_jax.mlogb.ecolog import ecolog_hyperparams
from bandits_jax.mlogb.exact import exact_hyperparams
from bandits_jax.mlogb.lin_ts import lin_ts_hyperparams
from bandits_jax.mlogb.linucb import linucb_hyperparams
from bandits_jax.mlogb.logistic_ts import logistic_ts_hyperparams
from bandits_jax.mlogb.uniform import uniform_hyperparams
from bandits_jax.status import REJECTED_CODES, Status
from tests.rejected import assert_rejected, learned

K, D, N = 2, 3, 4
REWARDS = [0.5, 1.0]
NAN, INF = float("nan"), float("inf")


def _newton_hp():
    return mlogb.hyperparams(lam=1.0, eta=1.0, S=1.0, rewards=REWARDS)


class Kind(NamedTuple):
    name: str
    learner: Callable[[], Any]  # () -> MLogBLearner with num_outcomes outcomes, dim D
    hparams: Callable[[], Any]  # () -> the hyperparameters its init takes
    num_outcomes: int = K


KD = {"num_outcomes": K, "dim": D}
KINDS = [
    Kind("eofd", lambda: mlogb.eofd(**KD, sketch_size=2), _newton_hp),
    Kind(
        "eofd-robust", lambda: mlogb.eofd(**KD, sketch_size=2, regularization="robust"), _newton_hp
    ),  # fmt: skip
    Kind(
        "eofd-adaptive",
        lambda: mlogb.eofd(**KD, sketch_size=1, max_sketch_size=3, delta_target=1.5),
        _newton_hp,
    ),  # fmt: skip
    Kind("oful", lambda: mlogb.oful(**KD), _newton_hp),
    Kind("greedy", lambda: mlogb.greedy(**KD), _newton_hp),
    Kind(
        "linucb",
        lambda: mlogb.linucb(**KD),
        lambda: linucb_hyperparams(lam=1.0, alpha=0.5, rewards=REWARDS),
    ),  # fmt: skip
    Kind(
        "linucb-nointercept",
        lambda: mlogb.linucb(**KD, intercept=False),
        lambda: linucb_hyperparams(lam=1.0, alpha=0.5, rewards=REWARDS),
    ),  # fmt: skip
    Kind(
        "uniform",
        lambda: mlogb.uniform(**KD),
        lambda: uniform_hyperparams(seed=1, rewards=REWARDS),
    ),  # fmt: skip
    Kind("ecolog", lambda: mlogb.ecolog(dim=D), lambda: ecolog_hyperparams(lam=1.0, S=1.0), 1),
    Kind(
        "exact",
        lambda: mlogb.exact(**KD, horizon=8),
        lambda: exact_hyperparams(lam=1.0, rewards=REWARDS),
    ),  # fmt: skip
    Kind(
        "eofd-buffered",
        lambda: mlogb.eofd_buffered(**KD, sketch_size=2, buffer_size=3),
        lambda: exact_hyperparams(lam=1.0, rewards=REWARDS),
    ),  # fmt: skip
    Kind(
        "lin-ts",
        lambda: mlogb.lin_ts(**KD),
        lambda: lin_ts_hyperparams(lam=1.0, rewards=REWARDS),
    ),
    Kind(
        "logistic-ts",
        lambda: mlogb.logistic_ts(**KD),
        lambda: logistic_ts_hyperparams(lam=1.0, rewards=REWARDS),
    ),
    Kind(
        "logistic-ts-full",
        lambda: mlogb.logistic_ts(**KD, covariance="full"),
        lambda: logistic_ts_hyperparams(lam=1.0, rewards=REWARDS),
    ),
]
BY_NAME = {k.name: k for k in KINDS}
NAMES = [k.name for k in KINDS]

ACTIONS = jnp.asarray(np.random.default_rng(0).normal(size=(N, D)) / np.sqrt(D))
X_GOOD = jnp.array([0.3, -0.5, 0.4])


@functools.cache
def _setup(name):
    kind = BY_NAME[name]
    learner = kind.learner()
    return learner, learner.init(kind.hparams())


def _with(a, row, value):
    return jnp.asarray(a).at[row].set(value)


# --- eagerly: a ValueError naming the argument ------------------------------------------------

EAGER = {
    "select-actions-nan": (lambda l, s: l.select(s, _with(ACTIONS, (1, 2), NAN)), "actions"),
    "select-actions-inf": (lambda l, s: l.select(s, _with(ACTIONS, (0, 0), -INF)), "actions"),
    "scores-actions-nan": (lambda l, s: l.scores(s, _with(ACTIONS, (3, 1), NAN)), "actions"),
    "scores-actions-inf": (lambda l, s: l.scores(s, _with(ACTIONS, (2, 0), INF)), "actions"),
    "score_parts-actions-nan": (
        lambda l, s: l.score_parts(s, _with(ACTIONS, (0, 2), NAN)),
        "actions",
    ),
    "update-x-nan": (lambda l, s: l.update(s, _with(X_GOOD, 1, NAN), 1), r"\bx\b"),
    "update-x-inf": (lambda l, s: l.update(s, _with(X_GOOD, 0, INF), 1), r"\bx\b"),
    "update-y-negative": (lambda l, s: l.update(s, X_GOOD, -1), r"\by\b.*0\.\.{K}"),
    "update-y-above-K": (
        lambda l, s: l.update(s, X_GOOD, l.num_outcomes + 1),
        r"\by\b.*0\.\.{K}",
    ),
    "update-y-non-integer": (lambda l, s: l.update(s, X_GOOD, 0.5), r"\by\b.*0\.\.{K}"),
    "update-y-nan": (lambda l, s: l.update(s, X_GOOD, NAN), r"\by\b.*0\.\.{K}"),
    "update-y-bool": (lambda l, s: l.update(s, X_GOOD, True), r"\by\b.*boolean"),
    "update-y-bool-array": (lambda l, s: l.update(s, X_GOOD, jnp.array(True)), r"\by\b.*boolean"),
    "select-mask-int": (lambda l, s: l.select(s, ACTIONS, jnp.array([1, 0, 1, 1])), "mask.*bool"),
    "select-mask-float": (lambda l, s: l.select(s, ACTIONS, np.ones(N)), "mask.*bool"),
    "select-mask-all-false": (lambda l, s: l.select(s, ACTIONS, jnp.zeros(N, bool)), "mask"),
}


@pytest.mark.parametrize("case", list(EAGER))
@pytest.mark.parametrize("name", NAMES)
def test_eager_bad_input_is_a_value_error_naming_the_argument(name, case):
    learner, state = _setup(name)
    call, pattern = EAGER[case]
    if case.startswith("update-y-bool") and learner.num_outcomes == 1:
        pytest.skip("a boolean is the K = 1 bandit's outcome (test_boolean_outcome_is_k1s)")
    with pytest.raises(ValueError, match=pattern.replace("{K}", str(learner.num_outcomes))):
        call(learner, state)


K1 = {
    "eofd": lambda: mlogb.eofd(num_outcomes=1, dim=D, sketch_size=2),
    "oful": lambda: mlogb.oful(num_outcomes=1, dim=D),
    "linucb": lambda: mlogb.linucb(num_outcomes=1, dim=D),
    "ecolog": lambda: mlogb.ecolog(dim=D),
}


@pytest.mark.parametrize("name", list(K1))
def test_boolean_outcome_is_k1s(name):
    """For K = 1 a boolean outcome (what ``jax.random.bernoulli`` returns) is the integer one,
    eagerly and under a user's ``jit``: the same state, bit for bit."""
    learner = K1[name]()
    hp = (
        ecolog_hyperparams(lam=1.0, S=1.0)
        if name == "ecolog"
        else linucb_hyperparams(lam=1.0, alpha=0.5)
        if name == "linucb"
        else mlogb.hyperparams(lam=1.0, eta=1.0, S=1.0)
    )
    state = learner.init(hp)
    jitted = jax.jit(learner.update)
    for flag in (True, False):
        want = learner.update(state, X_GOOD, int(flag))
        drawn = jax.random.bernoulli(jax.random.key(int(flag)), 1.0 if flag else 0.0)
        for got in (learner.update(state, X_GOOD, flag), jitted(state, X_GOOD, drawn)):
            for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
                np.testing.assert_array_equal(a, b)


# --- under jit: a flagged, rejected update; a flagged selection -------------------------------


# Under jit, each (x, y) of a batch is an update of the same state (``lax.map`` traces the update
# once): first a non-finite x, then outcomes outside 0..K, last a good update (which must move).
def _bad_outcomes(K: int) -> tuple[list[int], list[float]]:
    """Outcomes outside 0..K: integers, and floats (non-integer, NaN, inf)."""
    return [-1, K + 1, 7], [0.5, NAN, -1.0, K + 1.0, INF]


NAN_ROWS = (0, 2)  # valid actions with a NaN entry
MASK = jnp.array([True, True, True, False])


@functools.cache
def _probe(name):
    """One compiled program per learner: a good update, then every bad call from its result."""
    learner, _ = _setup(name)

    def probe(s0, xs, ys_int, ys_float, actions):
        s1 = learner.update(s0, X_GOOD, jnp.int32(1))  # the state before each call below
        after_int = jax.lax.map(lambda xy: learner.update(s1, *xy), (xs, ys_int))
        after_float = jax.lax.map(lambda y: learner.update(s1, X_GOOD, y), ys_float)
        est, bon = learner.score_parts(s1, actions)
        idx, sel_status = bonus.select_index(est + bon, MASK)
        select = learner.select(s1, actions, MASK)
        return s1, after_int, after_float, est + bon, idx, sel_status, select

    return jax.jit(probe)


@pytest.mark.parametrize("name", NAMES)
def test_under_jit_bad_updates_are_rejected_and_flagged(name):
    learner, s0 = _setup(name)
    actions = ACTIONS
    for r in NAN_ROWS:
        actions = _with(actions, (r, 1), NAN)
    Y_BAD_INT, Y_BAD_FLOAT = _bad_outcomes(learner.num_outcomes)
    xs = jnp.stack([_with(X_GOOD, 2, NAN)] + [X_GOOD] * (len(Y_BAD_INT) + 1))
    ys_int = jnp.array([1, *Y_BAD_INT, learner.num_outcomes], jnp.int32)
    s1, after_int, after_float, values, idx, sel_status, idx_select = _probe(name)(
        s0, xs, ys_int, jnp.array(Y_BAD_FLOAT), actions
    )
    row = lambda tree, i: jax.tree_util.tree_map(lambda a: a[i], tree)  # noqa: E731
    # The first update was accepted (the probe starts from a state that has moved).
    assert int(s1.t) == int(s0.t) + 1 == 1
    assert int(s1.status) not in REJECTED_CODES
    # Non-finite x: the state before the call is kept, NONFINITE.
    nan_x = row(after_int, 0)
    assert_rejected(nan_x, s1)
    assert int(nan_x.t) == int(s1.t)
    assert int(nan_x.status) == Status.NONFINITE
    # y outside 0..K (int and float, non-integer, NaN, inf): kept, BAD_OUTCOME.
    bad = [(y, row(after_int, 1 + i)) for i, y in enumerate(Y_BAD_INT)]
    bad += [(y, row(after_float, i)) for i, y in enumerate(Y_BAD_FLOAT)]
    for y, new in bad:
        assert_rejected(new, s1)
        assert int(new.t) == int(s1.t)
        assert int(new.status) == Status.BAD_OUTCOME, (y, int(new.status))
    # The same program accepts a good update (the comparisons above can fail).
    good = row(after_int, len(Y_BAD_INT) + 1)
    assert int(good.t) == int(s1.t) + 1 and int(good.status) not in REJECTED_CODES
    assert any(
        not np.array_equal(np.asarray(a), np.asarray(b))
        for a, b in zip(learned(good), learned(s1), strict=True)
        if np.asarray(a).dtype != np.int32  # t aside, something else moved
    )
    # NaN scores of valid actions: flagged, never chosen; select picks the same finite one.
    values = np.asarray(values)
    assert np.all(np.isnan(values[list(NAN_ROWS)]))
    assert np.all(np.isfinite(np.delete(values, NAN_ROWS)))
    assert int(sel_status) == Status.NAN_SCORES
    mask = np.asarray(MASK)
    ok = mask & ~np.isnan(values)
    want = int(np.flatnonzero(ok & (values >= values[ok].max() - 1e-9 * abs(values[ok].max())))[0])
    assert int(idx) == int(idx_select) == want
