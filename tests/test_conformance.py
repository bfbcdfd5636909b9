"""One conformance suite for every learner of both papers (bandits_jax.protocols).

Each learner is one :class:`Case` in :data:`CASES`; a new learner joins with one line. One round
is the same code for both families (observe, ``act``, answer, ``update``). Every case is checked
for: the protocol members, jit == eager, an eager call is one compiled program,
float32 and float64 kept, donation of the state, vmap over trials and over a hyperparameter grid
== loops, one compile per chunk length, a checkpoint round trip, and a ValueError naming the
argument on bad input.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, NamedTuple

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bandits_jax import Learner, mlogb, protocols
from bandits_jax.bco import domains as dom
from bandits_jax.bco import ensembles as ens
from bandits_jax.bco import one_point as op
from bandits_jax.bco import two_point as tp
from bandits_jax.learner_base import finite_floats
from bandits_jax.mlogb.ecolog import ecolog_hyperparams
from bandits_jax.mlogb.exact import exact_hyperparams
from bandits_jax.mlogb.lin_ts import lin_ts_hyperparams
from bandits_jax.mlogb.linucb import linucb_hyperparams
from bandits_jax.mlogb.logistic_ts import logistic_ts_hyperparams
from bandits_jax.mlogb.uniform import uniform_hyperparams
from bandits_jax.sim import checkpoint
from bandits_jax.status import Status, StatusError, count_status, raise_on_failure

D, K, N_ACTIONS, ROUNDS = 3, 2, 5, 2


class Case(NamedTuple):
    """A learner under test.

    Attributes:
      name: test id.
      family: ``"bco"`` or ``"mlogb"``.
      learner: the learner (built with the static choices).
      hparams: ``(dtype, grid) -> hparams``; ``grid=True`` gives a grid of 2 points (leading axis).
      bad_input: ``(learner, state) -> (callable raising ValueError, the argument it must name)``.
    """

    name: str
    family: str
    learner: Any
    hparams: Callable[[Any, bool], Any]
    bad_input: Callable[[Any, Any], list[tuple[Callable[[], Any], str]]] | None = None


# --- BCO ---------------------------------------------------------------------------------------


def _ball(dtype):
    return dom.ball(1.0, dtype=dtype)


def _bco_hp(learner, grid_kw, **kw):
    def make(dtype, grid):
        extra = {k: (np.asarray(v) if grid else v[0]) for k, v in grid_kw.items()}
        return learner.hyperparams(_ball(dtype), horizon=50, **kw, **extra)

    return make


def _two_point(schedule, factory=tp.two_point_learner, name="alg1", **kw):
    learner = factory(dim=D, schedule=schedule)
    return Case(f"{name}-{schedule}", "bco", learner, _bco_hp(learner, {"scale": [0.5, 2.0]}, **kw))


def _sphere(schedule, **kw):
    return _two_point(schedule, tp.sphere_learner, "alg3", **kw)


def _box_hp(dtype, grid):
    eta = np.asarray([0.05, 0.2]) if grid else 0.1
    lo, hi = -np.ones(D, np.dtype(dtype)), 2 * np.ones(D, np.dtype(dtype))
    return op.box_ftrl(dim=D).hyperparams(eta, lo, hi)


_DYN = ens.dynamic_ensemble(dim=D)
_UNI = ens.universal_ensemble(dim=D)
_BOX = op.box_ftrl(dim=D)

# The schedules of Algorithms 1 and 3 differ only in the step-size formula: they get the
# per-round checks (SCHEDULE_CASES); the remaining checks run once per algorithm (CASES).
SCHEDULE_CASES = [
    _two_point("convex", offset="d2"),
    _two_point("strongly_convex", lam=1.0),
    _two_point("chiang", lam=1.0),
    _sphere("strongly_convex", lam=1.0),
]
CASES = [
    _two_point("variance"),
    _sphere("sqrt_t"),
    Case("alg4-box-ftrl", "bco", _BOX, _box_hp),
    Case("alg5-dynamic", "bco", _DYN, _bco_hp(_DYN, {"gamma": [0.1, 1.0]}, preset="practical")),
    Case(
        "alg6-universal",
        "bco",
        _UNI,
        _bco_hp(_UNI, {"delta": [1e-3, 1e-2]}, lipschitz=2.0, preset="practical"),
    ),
]


# --- MLogB -------------------------------------------------------------------------------------


def _mlogb_hp(dtype, grid):
    lam = np.asarray([0.5, 2.0]) if grid else 1.0
    return mlogb.hyperparams(lam=lam, eta=1.0, S=2.0, rewards=[0.5, 1.0], dtype=dtype)


def _linucb_hp(dtype, grid):
    lam = np.asarray([0.5, 2.0]) if grid else 1.0
    return linucb_hyperparams(lam=lam, alpha=1.0, rewards=[0.5, 1.0], dtype=dtype)


def _uniform_hp(dtype, grid):
    seed = np.asarray([1, 2]) if grid else 1
    return uniform_hyperparams(seed=seed, rewards=[0.5, 1.0], dtype=dtype)


def _exact_hp(dtype, grid):
    lam = np.asarray([0.5, 2.0]) if grid else 1.0
    return exact_hyperparams(lam=lam, beta=1.0, rewards=[0.5, 1.0], dtype=dtype)


def _ecolog_hp(dtype, grid):
    lam = np.asarray([0.5, 2.0]) if grid else 1.0
    return ecolog_hyperparams(lam=lam, S=2.0, dtype=dtype)


def _ts_hp(build):
    """Thompson sampling (lin_ts, logistic_ts): a grid of ridges, one seed."""
    return lambda dtype, grid: build(lam=np.asarray([0.5, 2.0]) if grid else 1.0, v=0.5, seed=1,
                                     rewards=[0.5, 1.0], dtype=dtype)  # fmt: skip


_LTS = _ts_hp(logistic_ts_hyperparams)
_KD = {"num_outcomes": K, "dim": D}
CASES += [
    Case("mlogb-eofd", "mlogb", mlogb.eofd(**_KD, sketch_size=2), _mlogb_hp),
    Case(
        "mlogb-eofd-robust",
        "mlogb",
        mlogb.eofd(**_KD, sketch_size=2, regularization="robust"),
        _mlogb_hp,
    ),
    Case(
        "mlogb-eofd-adaptive",
        "mlogb",
        mlogb.eofd(**_KD, sketch_size=1, max_sketch_size=3, delta_target=1.5),
        _mlogb_hp,
    ),
    Case(
        "mlogb-eofd-fast", "mlogb", mlogb.eofd(**_KD, sketch_size=1, sketch_rule="fast"), _mlogb_hp
    ),
    Case(
        "mlogb-eofd-deferred",
        "mlogb",
        mlogb.eofd(**_KD, sketch_size=2, spare_columns=2 * K),
        _mlogb_hp,
    ),
    Case(  # the FD core as a GPU runs it (the CPU's default at K >= 2 is LAPACK)
        "mlogb-eofd-batched",
        "mlogb",
        mlogb.eofd(**_KD, sketch_size=2, solver="batched"),
        _mlogb_hp,
    ),
    Case("mlogb-oful", "mlogb", mlogb.oful(**_KD), _mlogb_hp),
    Case("mlogb-oful-batched", "mlogb", mlogb.oful(**_KD, solver="batched"), _mlogb_hp),
    Case("mlogb-greedy", "mlogb", mlogb.greedy(**_KD, sketch_size=2), _mlogb_hp),
    Case("mlogb-linucb", "mlogb", mlogb.linucb(**_KD), _linucb_hp),
    Case("mlogb-linucb-nointercept", "mlogb", mlogb.linucb(**_KD, intercept=False), _linucb_hp),
    Case("mlogb-soful", "mlogb", mlogb.soful(**_KD, sketch_size=2), _linucb_hp),
    Case("mlogb-uniform", "mlogb", mlogb.uniform(**_KD), _uniform_hp),
    Case("mlogb-ecolog", "mlogb", mlogb.ecolog(dim=D), _ecolog_hp),  # K = 1
    Case(  # the ball-constrained prox as a GPU runs it (the CPU's default: one eigh)
        "mlogb-ecolog-batched", "mlogb", mlogb.ecolog(dim=D, solver="batched"), _ecolog_hp
    ),
    Case("mlogb-exact", "mlogb", mlogb.exact(**_KD, horizon=8), _exact_hp),
    Case(
        "mlogb-eofd-buffered",
        "mlogb",
        mlogb.eofd_buffered(**_KD, sketch_size=2, buffer_size=3),
        _exact_hp,
    ),
    Case("mlogb-lin-ts", "mlogb", mlogb.lin_ts(**_KD), _ts_hp(lin_ts_hyperparams)),
    Case("mlogb-logistic-ts", "mlogb", mlogb.logistic_ts(**_KD), _LTS),
    Case("mlogb-logistic-ts-full", "mlogb", mlogb.logistic_ts(**_KD, covariance="full"), _LTS),
]

# Every learner factory of both papers (those building CASES): one factory style, keyword-only
# parameters (``two_point_learner(dim=3)``, ``eofd(num_outcomes=2, dim=3, sketch_size=2)``).
FACTORIES = [
    tp.two_point_learner,
    tp.sphere_learner,
    op.box_ftrl,
    ens.dynamic_ensemble,
    ens.universal_ensemble,
    mlogb.eofd,
    mlogb.oful,
    mlogb.greedy,
    mlogb.linucb,
    mlogb.soful,
    mlogb.uniform,
    mlogb.ecolog,
    mlogb.exact,
    mlogb.eofd_buffered,
    mlogb.lin_ts,
    mlogb.logistic_ts,
]

# --- one round of each family ------------------------------------------------------------------


def _bco_loss(points):
    target = jnp.linspace(-0.5, 0.5, points.shape[-1]).astype(points.dtype)
    return 0.5 * jnp.sum((points - target) ** 2, axis=-1)


def _observation(case: Case, state, key):
    """What the learner observes before acting: nothing (BCO), a random action set (MLogB)."""
    if case.family == "bco":
        return None
    actions = jax.random.normal(key, (N_ACTIONS, D), _dtype(state)) / jnp.sqrt(D)
    return actions, jnp.ones((N_ACTIONS,), bool)


def _feedback(case: Case, action, key):
    """The environment's answer: the losses at the queried points (BCO), a random outcome."""
    if case.family == "bco":
        return _bco_loss(action.points)
    return jax.random.randint(key, (), 0, case.learner.num_outcomes + 1)


def _round(case: Case):
    """One round of the one protocol: observe, ``act``, the answer, ``update``."""
    learner = case.learner

    def play(state, key):
        k_obs, k_act, k_answer = jax.random.split(key, 3)
        action = learner.act(state, _observation(case, state, k_obs), k_act)
        return learner.update(state, action, _feedback(case, action, k_answer))

    return play


def _rounds(case: Case, num: int):
    play = _round(case)

    def run(state, key):
        return jax.lax.scan(lambda s, k: (play(s, k), None), state, jax.random.split(key, num))[0]

    return run


@functools.cache
def _jit_round(name: str):
    """One compiled round per case (per dtype), shared by the tests."""
    return jax.jit(_round(BY_NAME[name]))


@functools.cache
def _jit_run(name: str):
    """One compiled ``ROUNDS``-round run per case, shared by the tests (compiles dominate)."""
    return jax.jit(_rounds(BY_NAME[name], ROUNDS))


_PROBE = jax.random.normal(jax.random.key(7), (N_ACTIONS, D)) / np.sqrt(D)


def _dtype(state):
    """The state's float dtype (its hyperparameters')."""
    return next(
        x.dtype for x in jax.tree.leaves(state.hparams) if jnp.issubdtype(x.dtype, jnp.floating)
    )


def _observable(case, state):
    """What must agree: the whole BCO state; for MLogB the estimate ``W`` (where it has one), the
    scores and the counters (the sketch basis ``V`` is only defined up to signs, so it is
    compared through the scores)."""
    if case.family == "bco":
        return state
    scores = case.learner.scores(state, _PROBE.astype(_dtype(state)))
    return getattr(state, "W", None), scores, state.t


def _status(case, state):
    return state.status  # both families (protocols.LearnerState)


BY_NAME = {c.name: c for c in CASES + SCHEDULE_CASES}
KEY = jax.random.key(0)


@pytest.fixture(params=CASES, ids=[c.name for c in CASES])
def case(request):
    return request.param


@pytest.fixture(params=CASES + SCHEDULE_CASES, ids=[c.name for c in CASES + SCHEDULE_CASES])
def any_case(request):
    return request.param


def test_protocol_members(any_case):
    case = any_case
    learner = case.learner
    assert type(learner) is Learner  # one learner type for both families
    assert learner.dim == D
    # init takes the hyperparameters only: randomness enters through act's key (both families).
    assert len(inspect.signature(learner.init).parameters) == 1
    family = (learner.num_outcomes, learner.scores, learner.score_parts, learner.select)
    if case.family == "bco":
        assert family == (None,) * 4
    else:
        assert learner.num_outcomes >= 1 and all(callable(f) for f in family[1:])


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64])
def test_a_fed_back_state_has_the_types_of_a_fresh_one(any_case, dtype):
    """A jitted function is traced again when an argument's type changes, weak typing included:
    every leaf of a fresh state has the type (shape, dtype, weak type) of the same leaf after a
    round, so a state fed back (a loop, a resume) reuses the program. float32 runs with x64 off,
    as a user's program does (weak types differ there)."""
    with jax.enable_x64(dtype == jnp.float64):
        state = any_case.learner.init(any_case.hparams(dtype, False))
        after = jax.eval_shape(_round(any_case), state, KEY)  # traced, not compiled
    assert jax.tree.structure(after) == jax.tree.structure(state)

    def kind(x):
        return x.shape, x.dtype, x.weak_type

    changed = [
        f"{jax.tree_util.keystr(path)}: {kind(jax.typeof(a))} -> {kind(b)}"
        for (path, a), b in zip(
            jax.tree_util.tree_leaves_with_path(state), jax.tree.leaves(after), strict=True
        )
        if kind(jax.typeof(a)) != kind(b)
    ]
    assert not changed, changed


def test_init_of_a_batch_of_hyperparameters_says_to_vmap_it(any_case):
    """``init`` takes one hyperparameter point; a grid (what the builders return for array
    arguments) is refused with a message naming ``jax.vmap(learner.init)``, not a field the user
    never passed."""
    grid = any_case.hparams(jnp.float64, True)
    with pytest.raises(ValueError, match=r"init: .*batch.*\(2,\).*jax\.vmap\(learner\.init\)"):
        any_case.learner.init(grid)
    jax.vmap(any_case.learner.init)(grid)  # the way it says


def test_a_fed_back_state_is_traced_once():
    """A user's jitted round, fed its own output (float32 with x64 off, JAX's default), traces
    once."""
    for name in ("mlogb-eofd-robust", "alg1-variance"):
        case = BY_NAME[name]
        step = jax.jit(chex.assert_max_traces(_round(case), n=1))
        with jax.enable_x64(False):
            state = case.learner.init(case.hparams(jnp.float32, False))
            for _ in range(3):
                state = step(state, KEY)
        chex.clear_trace_counter()


def test_state_status_in_one_place(any_case):
    """Every state of both families, at init and after a round, has the fields ``status`` (an
    int32 scalar, ``protocols.LearnerState``) and ``num_failures``, and no second status."""
    case = any_case
    state0 = case.learner.init(case.hparams(jnp.float64, False))
    for state in (state0, _jit_round(case.name)(state0, KEY)):
        assert isinstance(state, protocols.LearnerState)
        status = state.status
        assert status.dtype == jnp.int32 and status.shape == (), (status.dtype, status.shape)
        assert {"status", "num_failures"} <= set(state._fields)
        info = state._asdict().get("info")
        assert info is None or "status" not in info._fields


@pytest.mark.parametrize("factory", FACTORIES, ids=lambda f: f.__name__)
def test_factories_are_keyword_only(factory):
    """Every factory parameter is keyword-only (``**kwargs`` allowed), in both families."""
    allowed = {inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.VAR_KEYWORD}
    params = inspect.signature(factory).parameters.values()
    positional = [p.name for p in params if p.kind not in allowed]
    assert not positional, f"{factory.__name__}: not keyword-only: {positional}"
    assert "dim" in inspect.signature(factory).parameters


def test_jit_equals_eager(any_case):
    case = any_case
    state0 = case.learner.init(case.hparams(jnp.float64, False))
    eager = _round(case)(state0, KEY)
    jitted = _jit_round(case.name)(state0, KEY)
    chex.assert_trees_all_close(
        _observable(case, jitted), _observable(case, eager), rtol=1e-12, atol=1e-12
    )


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64])
def test_dtype_kept(any_case, dtype):
    """A round keeps every leaf's dtype and the floats in ``dtype`` (float32's values against
    float64: ``tests/test_float32.py``); float64 also plays it (finite, no failure)."""
    case = any_case
    state0 = case.learner.init(case.hparams(dtype, False))
    state = jax.eval_shape(_round(case), state0, KEY)  # dtypes are fixed when traced
    for before, after in zip(jax.tree.leaves(state0), jax.tree.leaves(state), strict=True):
        assert before.dtype == after.dtype
    floats = [x for x in jax.tree.leaves(state) if jnp.issubdtype(x.dtype, jnp.floating)]
    assert floats and all(x.dtype == dtype for x in floats)
    if dtype == jnp.float64:
        state = _jit_round(case.name)(state0, KEY)
        assert finite_floats(state)
        raise_on_failure(_status(case, state))


def test_init_gives_distinct_buffers_and_a_donated_round_the_same_state(case):
    """init's leaves are distinct buffers (the runner donates its carry), a round with the state
    donated equals the undonated one, and the caller's hyperparameters survive the donation."""
    hp = case.hparams(jnp.float64, False)
    state = case.learner.init(hp)
    ids = [x.unsafe_buffer_pointer() for x in jax.tree.leaves(state) if x.size]
    assert len(ids) == len(set(ids)), "init reuses a buffer in two fields"
    reference = _jit_round(case.name)(case.learner.init(hp), KEY)
    donated = jax.jit(_round(case), donate_argnums=0)(state, KEY)
    chex.assert_trees_all_close(
        _observable(case, donated), _observable(case, reference), rtol=1e-12, atol=1e-12
    )
    jax.tree.map(np.asarray, hp)


@pytest.mark.parametrize("name", ["mlogb-eofd-robust", "alg1-variance"])
def test_chunks_compile_once_per_length(name):
    """One compiled chunk per length (the runner's shape, the same for every learner: one per
    family here), whose donated input state gives the same run as the undonated program."""
    case = BY_NAME[name]
    hp = case.hparams(jnp.float64, False)
    reference = _jit_run(case.name)(case.learner.init(hp), KEY)
    play = _round(case)

    @functools.partial(jax.jit, static_argnums=2, donate_argnums=0)
    @chex.assert_max_traces(n=2)
    def chunk(state, key, num):
        return jax.lax.scan(lambda s, k: (play(s, k), None), state, jax.random.split(key, num))[0]

    donated = chunk(case.learner.init(hp), KEY, ROUNDS)  # the same keys as _jit_run's
    chex.assert_trees_all_close(
        _observable(case, donated), _observable(case, reference), rtol=1e-12, atol=1e-12
    )
    s = donated
    for k in jax.random.split(KEY, 2):
        s = chunk(s, k, ROUNDS)  # no new trace for the same length
    chunk.lower(s, KEY, ROUNDS + 1)  # and one trace for another length (traced, not compiled)
    chex.clear_trace_counter()


def test_vmap_over_grid_and_trials_equals_loops(case):
    """A (grid point, trial) batch in one compiled call equals each run alone."""
    grid_hp = case.hparams(jnp.float64, True)
    sizes = {x.shape[0] for x in jax.tree.leaves(grid_hp)}
    assert sizes == {2}, "every hyperparameter leaf carries the grid axis"
    keys = jax.random.split(KEY, 2)
    run = _rounds(case, ROUNDS)
    over_trials = jax.vmap(run, in_axes=(None, 0))
    batched = jax.jit(jax.vmap(lambda hp: over_trials(case.learner.init(hp), keys)))(grid_hp)
    finals = []
    for g in range(2):
        hp = jax.tree.map(lambda a, g=g: a[g], grid_hp)
        for i in range(2):
            one = _jit_run(case.name)(case.learner.init(hp), keys[i])
            chex.assert_trees_all_close(
                _observable(case, jax.tree.map(lambda a, g=g, i=i: a[g, i], batched)),
                _observable(case, one),
                rtol=1e-10,
                atol=1e-12,
            )
        finals.append(one)
    # The two grid points really differ (uniform's W is always 0: its scores differ).
    obs0, obs1 = (jax.tree.leaves(_observable(case, f)) for f in finals)
    assert not all(np.allclose(a, b) for a, b in zip(obs0, obs1, strict=True))


def test_checkpoint_round_trip(case, tmp_path):
    state = _jit_run(case.name)(case.learner.init(case.hparams(jnp.float64, False)), KEY)
    path = tmp_path / "state.npz"
    checkpoint.save(path, state)
    like = case.learner.init(case.hparams(jnp.float64, False))
    restored, _ = checkpoint.restore(path, like)
    chex.assert_trees_all_equal(restored, state)
    chex.assert_trees_all_equal_structs(restored, state)


def _compiles(caplog, fn, *args) -> tuple[Any, int]:
    """``fn(*args)`` and the number of programs JAX compiled for it."""
    caplog.clear()
    with jax.log_compiles(True), caplog.at_level("WARNING"):
        out = fn(*args)
    return out, sum("Compiling" in r.getMessage() for r in caplog.records)


def test_eager_step_is_compiled(any_case, caplog):
    """Outside jit, each protocol call is one compiled program (op by op, the first eager
    round compiled 87 + 169 small programs for EOFD's select and update, 12 + 33 for
    Algorithm 1's query and update)."""
    case = any_case
    learner = case.learner
    state = learner.init(case.hparams(jnp.float64, False))
    counts = []
    for key in jax.random.split(KEY, 2):
        observation = _observation(case, state, key)
        action, n_act = _compiles(caplog, learner.act, state, observation, key)
        answer = _feedback(case, action, key)
        state, n_update = _compiles(caplog, learner.update, state, action, answer)
        counts.append((n_act, n_update))
    # First round: the program and at most a few argument conversions; then nothing.
    assert all(n <= 3 for n in counts[0]) and counts[1] == (0, 0), counts


def _bad_inputs(case, state):
    learner = case.learner
    if case.family == "bco":
        points, aux = query = learner.act(state, None, KEY)
        wrong = jnp.zeros((points.shape[0] + 1,))
        return [
            (lambda: learner.update(state, query, wrong), "values"),
            (lambda: learner.init("not hparams"), "hparams"),
        ]
    x = jnp.ones((D,)) / D
    return [
        (lambda: learner.update(state, x, 1.7), "y"),
        (lambda: learner.update(state, x, K + 1), "y"),
        (lambda: learner.update(state, x, -1), "y"),
        (lambda: learner.update(state, jnp.ones((D + 1,)), 1), "x"),
        (lambda: learner.select(state, jnp.ones((N_ACTIONS, D + 1)), None), "actions"),
        (lambda: learner.act(state, jnp.ones((N_ACTIONS, D + 1)), KEY), "actions"),
        (lambda: learner.act(state, (jnp.ones((N_ACTIONS, D)), [True]), KEY), "mask"),
    ]


def test_bad_input_names_the_argument(any_case):
    case = any_case
    state = case.learner.init(case.hparams(jnp.float64, False))
    for call, name in _bad_inputs(case, state):
        with pytest.raises(ValueError, match=name):
            call()


def test_no_compatibility_aliases():
    """Version 0.2.0 dropped the aliases of the renames (CHANGELOG): the old names are gone and
    the concrete learner tuples do not take the protocols' names."""
    from bandits_jax import bco
    from bandits_jax.bco import rounds as bint

    for mod, name in [
        (tp, "TwoPointHParams"),
        (bco, "TwoPointHParams"),
        (tp, "make_learner"),
        (ens, "DynamicHParams"),
        (ens, "UniversalHParams"),
        (op, "BoxFTRLHParams"),
        (mlogb, "MLogBLearner"),
        (mlogb.learner, "MLogBFunctions"),
        (protocols, "MLogBLearner"),
        (protocols, "BCOLearner"),
    ]:
        assert not hasattr(mod, name), f"{mod.__name__}.{name}"
    assert not hasattr(bint.BCOMetrics, "__getitem__") or bint.BCOMetrics.__getitem__ is (
        tuple.__getitem__
    )


# --- the status helpers ------------------------------------------------------------------------


def test_status_names_wrap_roots_codes():
    from bandits_jax.linalg import roots

    for name in ("CONVERGED", "MAX_STEPS", "NONFINITE", "INACTIVE", "INEXACT"):
        assert int(Status[name]) == getattr(roots, name)
    assert not hasattr(roots, "BAD_OUTCOME")  # no bandit words in linalg


def test_count_status_and_raise_on_failure():
    S = Status
    codes = np.array([[S.CONVERGED, S.INACTIVE, S.NONFINITE], [S.CONVERGED, S.MAX_STEPS, 99]])
    counts = count_status(codes)
    expected = {s.name.lower(): int(np.sum(codes == int(s))) for s in S}
    expected["other"] = 1
    assert counts == expected
    raise_on_failure(np.array([S.CONVERGED, S.INACTIVE]))
    # MAX_STEPS, NONFINITE and the unknown 99 are failures: 3 of the 6 codes.
    with pytest.raises(StatusError, match="3 of 6 updates failed: .*NONFINITE=1"):
        raise_on_failure(codes)
