"""mlogb.cost and practical's budget: a state's bytes against an allocated state and closed
forms, the pick against the rules' order, bad budgets refused."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from bandits_jax import mlogb
from bandits_jax.mlogb import cost, recipes


@pytest.mark.parametrize("kind, K, d", [("linucb", 1, 30), ("eofd-robust", 3, 20),
                                        ("soful", 1, 50), ("eofd-buffered", 2, 20)])  # fmt: skip
def test_state_bytes_is_the_allocated_state(kind, K, d):
    rec = mlogb.tuned(kind, num_outcomes=K, dim=d, horizon=100)
    state = rec.learner.init(rec.hparams)
    allocated = sum(np.asarray(x).nbytes for x in jax.tree.leaves(state))
    assert cost.state_bytes(rec.learner, rec.hparams) == allocated


def test_linucb_state_is_its_inverse_and_a_few_vectors():
    """LinUCB's state holds the (d + 1) x (d + 1) inverse: 8 (d + 1)^2 bytes in float64."""
    d = 64
    rec = mlogb.tuned("linucb", num_outcomes=1, dim=d, horizon=100)
    nbytes = cost.state_bytes(rec.learner, rec.hparams)
    assert 8 * (d + 1) ** 2 <= nbytes <= 8 * (d + 1) ** 2 + 8 * 8 * (d + 1)


def test_budget_moves_practical_to_the_next_row_that_fits():
    """At d = 1,000 (no known bound) LinUCB comes first; its inverse alone, 8 * 1001^2 bytes,
    exceeds a 4 MiB budget, so the next practical row (robust EOFD) comes back, within it."""
    d, small = 1000, cost.Budget(ms_per_round=None, bytes_per_trial=4 * 2**20)
    assert recipes.practical_kind(num_outcomes=1, dim=d, S=None) == "linucb"
    assert 8 * (d + 1) ** 2 > small.bytes_per_trial
    rec = mlogb.practical(num_outcomes=1, dim=d, horizon=100, budget=small)
    assert rec.kind == "eofd-robust"
    assert cost.state_bytes(rec.learner, rec.hparams) <= small.bytes_per_trial
    # A time budget nothing meets: LinUCB's and robust EOFD's estimates both exceed it.
    tight = cost.Budget(ms_per_round=0.01, bytes_per_trial=None)
    assert cost.round_ms("linucb", num_outcomes=1, dim=d, sketch_size=1) > 0.01
    with pytest.raises(ValueError, match=r"practical: budget: no recommended kind fits"):
        mlogb.practical(num_outcomes=1, dim=d, horizon=100, budget=tight)


def test_high_dimension_gets_the_sketch():
    """K d > 1024 with no known bound: robust EOFD at K = 1, SOFUL at K >= 2, each with m = 64
    (docs/recipes.md); at d = 4,096 robust EOFD's state is a small fraction of LinUCB's
    8 (d + 1)^2 bytes, which the default budget could not hold anyway."""
    for K, d, kind in ((1, 4096, "eofd-robust"), (9, 785, "soful")):
        rec = mlogb.practical(num_outcomes=K, dim=d, horizon=100, budget=None)
        assert (rec.kind, rec.sketch_size) == (kind, 64)
    rec = mlogb.practical(num_outcomes=1, dim=4096, horizon=100)
    assert cost.state_bytes(rec.learner, rec.hparams) < 0.05 * 8 * 4097**2
    assert 8 * 4097**2 > cost.DEFAULT_BUDGET.bytes_per_trial


def test_round_ms_follows_the_documented_work():
    """(n + 3) D^2 multiply-adds for LinUCB and (n + 8) (m + K) K d for EOFD, at RATE."""
    n, d = cost.ACTIONS, 1000
    lin = cost.round_ms("linucb", num_outcomes=1, dim=d, sketch_size=1)
    assert lin == pytest.approx(1e3 * (n + 3) * (d + 1) ** 2 / cost.RATE)
    eofd = cost.round_ms("eofd-robust", num_outcomes=4, dim=d, sketch_size=64)
    assert eofd == pytest.approx(1e3 * (n + 8) * 68 * 4 * d / cost.RATE)
    with pytest.raises(ValueError, match="round_ms: kind"):
        cost.round_ms("exact", num_outcomes=1, dim=d, sketch_size=1)


def test_every_practical_kind_has_a_cost():
    assert {r.kind for r in recipes.RULES if r.practical} <= set(cost.KINDS)


@pytest.mark.parametrize("budget", [(50.0, 1e8), "big", 3])
def test_practical_refuses_a_budget_of_another_type(budget):
    with pytest.raises(ValueError, match=r"practical: budget: expected a cost.Budget"):
        mlogb.practical(num_outcomes=1, dim=10, horizon=100, budget=budget)
