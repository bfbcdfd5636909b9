"""Tuned recipes (mlogb.recipes): closed-form hyperparameters, grids, learner kinds, learning."""

import math
import re

import jax
import numpy as np
import pytest

from bandits_jax import envs, mlogb
from bandits_jax.mlogb import recipes
from bandits_jax.sim import make_rollout


def closed_form(K, d, S, l, e):  # noqa: E741
    """Section 4's scaling written out independently of mlogb.section4."""
    alpha = 2.0 * (1.0 + S) + math.log(K + 1)
    lam = (math.sqrt(K) * d) ** l * math.sqrt(K) * alpha * S
    eta = (math.sqrt(K) * d) ** e * (S / 2.0 + math.log(K + 1) / 4.0)
    return lam, eta


@pytest.mark.parametrize("kind", ["eofd", "eofd-robust", "eofd-adaptive", "oful", "greedy"])
@pytest.mark.parametrize("K,d", [(1, 20), (3, 7)])
def test_online_newton_kinds_follow_the_scaling(kind, K, d):
    S = 2.0
    ex = recipes.rule(kind, num_outcomes=K, dim=d, S=S).point
    rec = mlogb.tuned(kind, num_outcomes=K, dim=d, S=S, horizon=500)
    lam, eta = closed_form(K, d, S, ex.l, ex.e)
    np.testing.assert_allclose(float(rec.hparams.lam), lam, rtol=1e-12)
    np.testing.assert_allclose(float(rec.hparams.eta), eta, rtol=1e-12)
    np.testing.assert_allclose(float(rec.hparams.delta), 1.0 / 500, rtol=1e-12)
    assert float(rec.hparams.beta) == (0.0 if kind == "greedy" else ex.beta)
    assert rec.sketch_size == max(1, K * d // 10)
    assert rec.kind == kind and rec.learner.num_outcomes == K and rec.learner.dim == d


def test_linucb_kind_and_grid():
    K, d, S = 2, 10, 1.0
    ls, es, bs = np.array([-1.0, 0.0, 0.5]), np.array([0.0, 0.0, 0.0]), np.array([0.01, 0.1, 1])
    hp = recipes.hparams_for("linucb", num_outcomes=K, dim=d, S=S, horizon=100, l=ls, e=es, beta=bs)
    want = [closed_form(K, d, S, l_, 0.0)[0] for l_ in ls]
    np.testing.assert_allclose(np.asarray(hp.lam), want, rtol=1e-12)
    np.testing.assert_allclose(np.asarray(hp.alpha), np.sqrt(bs), rtol=1e-12)
    assert hp.rewards.shape == (3, K)
    grid = recipes.hparams_for("eofd-robust", num_outcomes=K, dim=d, S=S, horizon=100,
                               l=ls, e=es, beta=bs)  # fmt: skip
    np.testing.assert_allclose(np.asarray(grid.beta), bs)
    assert grid.lam.shape == (3,)


def test_bad_kind_and_beta():
    with pytest.raises(ValueError, match="kind"):
        mlogb.tuned("eofd-fast", num_outcomes=1, dim=3, S=1.0, horizon=10)
    with pytest.raises(ValueError, match="beta"):
        recipes.hparams_for("eofd", num_outcomes=1, dim=3, S=1.0, horizon=10, l=0, e=0,
                            beta=float("nan"))  # fmt: skip
    with pytest.raises(ValueError, match="beta"):
        recipes.hparams_for("linucb", num_outcomes=1, dim=3, S=1.0, horizon=10, l=0, e=0,
                            beta="theory")  # fmt: skip


@pytest.mark.parametrize("d,kind", [(20, "linucb"), (40, "eofd-robust")])
def test_practical_learns(d, kind):
    """The practical recipe on a Section 4 stream with ||W*|| = 4 (with S = 1 the reward gaps are
    too small for the regret per round to fall visibly in 600 rounds), at its known-bound point
    (LinUCB at d = 20, robust EOFD at d = 40): far below a random choice, and its average regret
    falls over time (float64, 4 trials in one call)."""
    K, T, trials = 1, 600, 4
    env = envs.synthetic_mlogb(num_outcomes=K, dim=d, S=4.0)
    keys = jax.random.split(jax.random.PRNGKey(3), trials)
    env_states = jax.vmap(env.init)(keys)
    rec = mlogb.practical(num_outcomes=K, dim=d, S=4.0, horizon=T)
    assert rec.kind == kind
    rnd = mlogb.tuned("uniform", num_outcomes=K, dim=d, S=4.0, horizon=T)
    out = {}
    for r in (rec, rnd):
        run = make_rollout(mlogb.interact(r.learner, env), T, trials=True)
        out[r.kind] = np.asarray(run(r.learner.init(r.hparams), env_states, keys).regret)
    practical, random = out[rec.kind].sum(1), out["uniform"].sum(1)
    assert practical.mean() < 0.8 * random.mean(), (practical, random)
    reg = out[rec.kind].mean(0)
    assert reg[-T // 3 :].mean() < 0.8 * reg[: T // 3].mean()


@pytest.mark.parametrize("kind", ["eofd", "eofd-robust", "oful", "greedy"])
def test_no_known_bound_uses_the_free_recipe_and_its_S(kind):
    """``S=None`` (classification data): the no-bound rule's point, with its own S in the
    scaling."""
    K, d, T = 1, 12, 300
    ex = recipes.rule(kind, num_outcomes=K, dim=d, S=None).point
    rec = mlogb.tuned(kind, num_outcomes=K, dim=d, S=None, horizon=T)
    lam, eta = closed_form(K, d, ex.S, ex.l, ex.e)
    np.testing.assert_allclose(float(rec.hparams.lam), lam, rtol=1e-12)
    np.testing.assert_allclose(float(rec.hparams.eta), eta, rtol=1e-12)
    np.testing.assert_allclose(float(rec.hparams.S), ex.S, rtol=1e-12)
    assert float(rec.hparams.beta) == (0.0 if kind == "greedy" else ex.beta)
    # A known bound keeps its rule's point at the caller's S.
    known = mlogb.tuned(kind, num_outcomes=K, dim=d, S=3.0, horizon=T)
    ex3 = recipes.rule(kind, num_outcomes=K, dim=d, S=3.0).point
    lam3, _ = closed_form(K, d, 3.0, ex3.l, ex3.e)
    np.testing.assert_allclose(float(known.hparams.lam), lam3, rtol=1e-12)
    np.testing.assert_allclose(float(known.hparams.S), 3.0, rtol=1e-12)


@pytest.mark.parametrize("K", [1, 3])
def test_practical_without_a_known_bound_is_linucb_at_its_free_point(K):
    """``S=None`` (the default): LinUCB (level with buffered EOFD and the exact refit on two
    disjoint evaluation draws, at a fraction of the time: docs/evidence.md), lam from the
    scaling at its no-bound point and its S, alpha = sqrt(beta) at that point; with a known bound
    LinUCB too (level with OFUL, robust and buffered EOFD), at its known-bound point and the
    caller's S, except where K d > 32: robust EOFD at K = 1, buffered EOFD where K >= 2 and
    K d <= 128 (they win there: docs/evidence.md)."""
    d = 8
    rec = mlogb.practical(num_outcomes=K, dim=d, horizon=100)
    assert rec.kind == "linucb"
    ex = recipes.Exponents(-1.5, 0.0, 0.01, 2.0)
    assert recipes.rule("linucb", num_outcomes=K, dim=d, S=None).point == ex
    lam, _ = closed_form(K, d, ex.S, ex.l, ex.e)
    np.testing.assert_allclose(float(rec.hparams.lam), lam, rtol=1e-12)  # S enters through lam
    np.testing.assert_allclose(float(rec.hparams.alpha), np.sqrt(ex.beta), rtol=1e-6)  # sqrt(beta)
    for dim in (8, 10, 11, 40, 43, 129):
        known = mlogb.practical(num_outcomes=K, dim=dim, S=2.0, horizon=100)
        if K == 1 and dim > 32:
            assert known.kind == "eofd-robust", (K, dim)
            r = recipes.rule("eofd-robust", num_outcomes=K, dim=dim, S=2.0)
            assert r.point == ((-1.0 if dim <= 128 else -0.5), 0.0, 1.0, None), r
            lam, _ = closed_form(K, dim, 2.0, r.point.l, 0.0)
            np.testing.assert_allclose(float(known.hparams.lam), lam, rtol=1e-12)
            continue
        if K >= 2 and 32 < K * dim <= 128:
            assert known.kind == "eofd-buffered", (K, dim)
            r = recipes.rule("eofd-buffered", num_outcomes=K, dim=dim, S=2.0)
            assert (r.point, r.sketch, r.buffer, r.summary) == ((-1.5, 0.0, 0.0, None), 64, 64,
                                                                "anchor")  # fmt: skip
            lam, _ = closed_form(K, dim, 2.0, -1.5, 0.0)
            np.testing.assert_allclose(float(known.hparams.lam), lam, rtol=1e-12)
            continue
        assert known.kind == "linucb", (K, dim)
        ex = recipes.rule("linucb", num_outcomes=K, dim=dim, S=2.0).point
        assert ex == recipes.Exponents(-1.0, 0.0, 0.1)
        lam, _ = closed_form(K, dim, 2.0, ex.l, ex.e)  # the caller's S, through lam
        np.testing.assert_allclose(float(known.hparams.lam), lam, rtol=1e-12)
        np.testing.assert_allclose(float(known.hparams.alpha), np.sqrt(ex.beta), rtol=1e-6)


def test_no_known_bound_with_several_outcomes_uses_the_multi_point():
    """``S=None``: buffered EOFD's point at K >= 2 is not its K = 1 point; the command's recipe
    agrees with the library's."""
    from bandits_jax.cli import reproduce

    kind, d, T = "eofd-buffered", 6, 300
    points = []
    for K in (1, 3):
        ex = recipes.rule(kind, num_outcomes=K, dim=d, S=None).point
        rec = mlogb.tuned(kind, num_outcomes=K, dim=d, S=None, horizon=T)
        lam, _ = closed_form(K, d, ex.S, ex.l, ex.e)
        np.testing.assert_allclose(float(rec.hparams.lam), lam, rtol=1e-12)
        assert float(rec.hparams.beta) == ex.beta
        point = reproduce.tuned_point(kind, reproduce.Recipe(K, d, None, T, 0, 0, 0, None, None))
        assert (point.l, point.e, point.beta) == (ex.l, ex.e, ex.beta)
        points.append(ex)
    assert points[0] != points[1]


@pytest.mark.parametrize("kind", recipes.KINDS)
def test_a_known_bound_above_the_large_size_uses_the_large_point(kind):
    """With a known bound, ``K d > 128``: robust EOFD, greedy and buffered EOFD change point,
    the other kinds keep theirs; the command's recipe agrees (the paper's kinds run at
    ``--l/--e/--beta``)."""
    from bandits_jax.cli import reproduce

    T, S = 300, 2.0
    small = recipes.rule(kind, num_outcomes=1, dim=128, S=S).point
    changes = kind in ("eofd-robust", "greedy", "eofd-buffered")
    for K, d in ((1, 128), (1, 129), (2, 65)):
        if K > 1 and kind in recipes.K1_ONLY:
            continue
        ex = recipes.rule(kind, num_outcomes=K, dim=d, S=S).point
        assert (ex == small) == (K * d <= 128 or not changes), (K, d)
        rec = mlogb.tuned(kind, num_outcomes=K, dim=d, S=S, horizon=T)
        if hasattr(rec.hparams, "lam"):
            lam, _ = closed_form(K, d, S, ex.l, ex.e)
            np.testing.assert_allclose(float(rec.hparams.lam), lam, rtol=1e-12)
        point = reproduce.tuned_point(kind, reproduce.Recipe(K, d, S, T, 0, 0, 0, None, None))
        want = (0, 0, 0) if recipes.REGISTRY[kind].paper else (ex.l, ex.e, ex.beta)
        assert (point.l, point.e, point.beta) == want, (K, d)


@pytest.mark.parametrize("K", [1, 2, 4])
@pytest.mark.parametrize("d", [1, 5, 32, 33, 65, 128, 129, 300])
def test_every_kind_has_a_rule_in_every_regime(K, d):
    """Every kind has a known-bound rule (the caller's S) and a no-bound rule (its own S > 0);
    buffered EOFD's sketch, buffer and summary do not depend on the bound; :func:`practical`
    has a kind in every regime."""
    for kind in recipes.KINDS:
        known = recipes.rule(kind, num_outcomes=K, dim=d, S=1.0)
        free = recipes.rule(kind, num_outcomes=K, dim=d, S=None)
        assert known.point.S is None and free.point.S > 0
        assert (known.sketch, known.buffer, known.summary) == (
            free.sketch,
            free.buffer,
            free.summary,
        )
    for S in (1.0, None):
        regime = [
            r for r in recipes.RULES if r.practical and recipes._matches(r, S is not None, K, d)
        ]
        assert regime, (K, d, S)  # the first is practical's (a narrower row before a wider one)
        assert regime[0].kind == recipes.practical_kind(num_outcomes=K, dim=d, S=S)


def test_recipes_doc_shows_the_rules_table():
    """docs/recipes.md holds exactly the table :func:`recipes.rules_markdown` renders, between
    its markers, and every row's section is a heading of that page."""
    import pathlib

    text = (pathlib.Path(__file__).parents[2] / "docs" / "recipes.md").read_text()
    begin, end = "<!-- rules: begin -->\n", "<!-- rules: end -->"
    assert text.count(begin) == 1 and text.count(end) == 1
    assert text[text.index(begin) + len(begin) : text.index(end)] == recipes.rules_markdown()
    headings = {line.lstrip("#").strip() for line in text.splitlines() if line.startswith("#")}
    assert {r.section for r in recipes.RULES} <= headings


@pytest.mark.parametrize(
    "kw, name",
    [({"dim": "x"}, "dim"), ({"num_outcomes": 1.5}, "num_outcomes"), ({"S": float("nan")}, "S")],
)
def test_practical_rejects_bad_input_by_name(kw, name):
    args = {"num_outcomes": 1, "dim": 5, "S": 1.0, "horizon": 10, **kw}
    with pytest.raises(ValueError, match=name):
        mlogb.practical(**args)


def test_practical_names_itself_for_a_misspelt_keyword():
    with pytest.raises(
        TypeError, match=r"practical\(\) got an unexpected keyword argument 'horizn'"
    ):
        mlogb.practical(num_outcomes=1, dim=4, S=2.0, horizn=100)


@pytest.mark.parametrize("kind", recipes.KINDS)
def test_a_grid_in_any_argument_gives_every_field_its_axis(kind):
    """``hparams_for`` with only ``beta`` an array: every field gets the grid axis, point ``i``
    equals the hyperparameters built with ``beta[i]`` alone, and the grid is a batch of states."""
    K = 1
    betas = np.array([0.1, 1.0, 2.0])
    kw = dict(num_outcomes=K, dim=4, S=2.0, horizon=100, l=-1.0, e=0.0)
    grid = recipes.hparams_for(kind, beta=betas, **kw)
    for i, b in enumerate(betas):
        point = recipes.hparams_for(kind, beta=float(b), **kw)
        for g, p in zip(jax.tree.leaves(grid), jax.tree.leaves(point), strict=True):
            np.testing.assert_array_equal(np.asarray(g)[i], np.asarray(p))
    learner = recipes.make_learner(kind, num_outcomes=K, dim=4, sketch_size=2, horizon=10)
    states = jax.vmap(learner.init)(grid)
    assert all(np.shape(x)[0] == 3 for x in jax.tree.leaves(states))


def test_a_kind_with_a_buffer_needs_the_horizon():
    with pytest.raises(ValueError, match="make_learner: kind 'exact' needs horizon="):
        recipes.make_learner("exact", num_outcomes=1, dim=3, sketch_size=1)
    learner = recipes.make_learner("exact", num_outcomes=1, dim=3, sketch_size=1, horizon=7)
    hp = recipes.hparams_for("exact", num_outcomes=1, dim=3, S=1.0, horizon=7, l=-1.0, e=0.0,
                             beta=0.5)  # fmt: skip
    assert learner.init(hp).X.shape[0] == 7  # the buffer holds the horizon's rows


@pytest.mark.parametrize("kind", recipes.KINDS)
def test_tuned_builds_every_kind(kind):
    """``mlogb.tuned`` passes the horizon to the factory (the exact fit's buffer holds T rows),
    and its learner's state comes from its hyperparameters."""
    rec = mlogb.tuned(kind, num_outcomes=1, dim=3, S=1.0, horizon=7)
    state = rec.learner.init(rec.hparams)
    if kind == "exact":
        assert state.X.shape[0] == 7
    assert np.shape(state.status) == ()


def test_sketch_size_is_the_kinds_own_rule():
    """Section 4's ``floor(K d / 10)`` for every sketched kind but buffered EOFD, whose sketch is
    as wide as its buffer (``min(K d, B)``) where ``K d <= 128``; ``tuned`` and the
    command use the same rule, and ``--sketch`` overrides it."""
    from bandits_jax.cli import reproduce
    from bandits_jax.mlogb.eofd_buffer import DEFAULT_BUFFER

    for K, d in ((1, 20), (1, 65), (4, 65), (3, 5), (4, 20), (1, 200)):
        assert recipes.sketch_size(K, d) == max(1, K * d // 10)
        assert recipes.sketch_size(K, d, "eofd-robust") == max(1, K * d // 10)
        full = K * d <= 128
        m = min(K * d, DEFAULT_BUFFER) if full else max(1, K * d // 10)
        assert recipes.sketch_size(K, d, "eofd-buffered") == m
        rec = mlogb.tuned("eofd-buffered", num_outcomes=K, dim=d, horizon=10)
        assert rec.sketch_size == m
        assert rec.learner.init(rec.hparams).X.shape[0] == recipes.buffer_size(K, d)
        assert reproduce.learner_sketch(None, K, d, "eofd-buffered") == m
        assert reproduce.learner_sketch(3, K, d, "eofd-buffered") == 3
        assert reproduce.learner_sketch(None, K, d, "eofd") == max(1, K * d // 10)


@pytest.mark.parametrize("K", [1, 2])
def test_buffered_kind_summarises_and_buffers_by_the_number_of_outcomes(K):
    """The registry's buffered EOFD: eq. (2)'s summary at K = 1, eq. (3)'s at K >= 2
    (its :data:`recipes.RULES` rows), told apart on a stream that evicts into a rank-1 sketch, with
    the buffer ``recipes.buffer_size`` (another buffer evicts other rounds)."""
    from bandits_jax.mlogb.eofd_buffer import eofd_buffered

    d = 3
    B = recipes.buffer_size(K, d)
    T = B + 12
    for bad in ({"num_outcomes": 0, "dim": 3}, {"num_outcomes": 1, "dim": 2.5}):
        with pytest.raises(ValueError, match=r"recipes\.buffer_size: .*(num_outcomes|dim)"):
            recipes.buffer_size(**bad)
    rng = np.random.default_rng(K)
    xs = jax.numpy.asarray(rng.normal(size=(T, d)))
    ys = jax.numpy.asarray(rng.integers(0, K + 1, size=T), dtype=jax.numpy.int32)
    hp = recipes.hparams_for("eofd-buffered", num_outcomes=K, dim=d, S=2.0, horizon=T, l=-1.0,
                             e=0.0, beta=0.0)  # fmt: skip

    def final_W(learner):
        def body(s, r):
            return learner.update(s, *r), None

        return np.asarray(jax.lax.scan(body, learner.init(hp), (xs, ys))[0].W)

    registry = final_W(recipes.make_learner("eofd-buffered", num_outcomes=K, dim=d, sketch_size=1))
    by_form = {
        form: final_W(
            eofd_buffered(num_outcomes=K, dim=d, sketch_size=1, buffer_size=B, summary=form)
        )
        for form in ("gradient", "anchor")
    }
    chosen = "gradient" if K == 1 else "anchor"
    np.testing.assert_array_equal(registry, by_form[chosen])
    assert np.abs(by_form["gradient"] - by_form["anchor"]).max() > 1e-6


def test_solver_reaches_every_kind_that_has_one_and_only_those():
    # K = 2 on the CPU: "auto" decomposes an (m + K) x (m + K) FD core, OFUL's K d x K d H~ or
    # ECOLog's V by LAPACK (a syevd call larger than the K x K ones of the basis extension in the
    # lowered update), "batched" by secular updates or Cholesky solves (only K x K eigh calls
    # left); other kinds refuse the option.
    K, d = 2, 6
    actions = jax.numpy.ones((3, d))
    for kind, row in recipes.REGISTRY.items():
        k = 1 if row.k1_only else K
        if not row.solver:
            with pytest.raises(ValueError, match=r"make_learner: solver.*" + kind):
                recipes.tuned(kind, num_outcomes=k, dim=d, S=2.0, horizon=20, solver="batched")
            continue
        calls = {}
        for solver in ("auto", "batched"):
            rec = recipes.tuned(kind, num_outcomes=k, dim=d, S=2.0, horizon=20, solver=solver)
            state = rec.learner.init(rec.hparams)
            text = jax.jit(rec.learner.update).lower(state, actions[0], 1).as_text()
            sizes = re.findall(r"@lapack_[sd]syevd_ffi\([^\n]*\} : \(tensor<(\d+)x", text)
            calls[solver] = any(int(n) > k for n in sizes)
        assert calls == {"auto": True, "batched": False}, kind
