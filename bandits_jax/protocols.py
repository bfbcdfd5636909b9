"""The state and environment protocols of both papers and the outcome coding.

Every learner of both papers is one :class:`bandits_jax.learner_base.Learner` (``init``, ``act``,
``update``, ``hyperparams``, ``dim``; MLogB learners also ``scores``, ``score_parts``,
``select``, ``num_outcomes``). Shared conventions:

* A learner factory takes keyword-only arguments (``two_point_learner(dim=3)``,
  ``eofd(num_outcomes=2, dim=3, sketch_size=2)``) and closes over static choices (dimensions,
  sketch sizes, iteration caps). Numeric hyperparameters live in the state's ``hparams`` field,
  built by ``learner.hyperparams(...)``, whose array arguments broadcast into leading grid axes:
  a grid of hyperparameters is a batch of states.
* ``init(hparams) -> state`` takes no key in either family. A BCO learner's randomness enters
  through the key that ``act`` receives each round (split by the runner from the run's key); an
  MLogB sampler (uniform choice, Thompson sampling) draws from a key in its state, seeded by
  ``hparams.seed``, since ``score_parts`` and ``select`` take none.
* Every state has ``status`` (:class:`LearnerState`): the int32 scalar
  :class:`bandits_jax.status.Status` of its last update (codes, ``count_status`` and
  ``raise_on_failure`` in :mod:`bandits_jax.status`). A rejected update keeps the previous state.
  An MLogB state may also carry the diagnostics ``mlogb.interact`` reports where it has them:
  :class:`WithUpdateInfo`, :class:`WithSketchError`, :class:`WithSketchRank`.
* Every family's ``interact(learner, env)`` (``mlogb.interact``, ``bco.interact``) returns the
  runner's step function ``step(learner_state, env_state, key) -> (learner_state, env_state,
  metrics)``, which ``bandits_jax.sim.make_rollout`` plays.
* Outcome coding (MLogB): ``y`` is an integer in ``{0, ..., K}``; ``y = 0`` is the no-reward outcome
  (reward ``r_0 = 0``), ``y = k >= 1`` has reward ``hparams.rewards[k - 1]``. Eagerly, anything
  else (``1.7``, ``-1``, ``K + 1``) is a ``ValueError``; under ``jit`` it is a rejected update.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import jax

Array = jax.Array
PyTree = Any


@runtime_checkable
class LearnerState(Protocol):
    """What every learner state of both families has (module docstring): ``status``, the int32
    scalar :class:`~bandits_jax.status.Status` of the last update, and its ``hparams``."""

    @property
    def status(self) -> Array: ...

    @property
    def hparams(self) -> PyTree: ...


@runtime_checkable
class WithUpdateInfo(Protocol):
    """An MLogB state with ``info``, its last update's ``mlogb.learner.UpdateInfo``."""

    info: PyTree


@runtime_checkable
class WithSketchError(Protocol):
    """An MLogB state with ``rho``, the mass its sketch discarded so far."""

    rho: Array


@runtime_checkable
class WithSketchRank(Protocol):
    """An MLogB state with ``rank``, its sketch's active rank (int32)."""

    rank: Array


# ---------------------------------------------------------------------------------------------
# Environments
# ---------------------------------------------------------------------------------------------


@runtime_checkable
class MLogBEnv(Protocol):
    """An MLogB environment (``envs.synthetic_mlogb``, ``envs.classification``, ...).

    ``init(key) -> env_state``; ``observe(env_state, key) -> (env_state, actions (N, d), mask
    (N,))``; ``outcome(env_state, x, key) -> y`` in ``{0..K}``;
    ``expected_rewards(env_state, actions) -> (N,)`` (for the regret of eq. 2).
    """

    num_outcomes: int
    dim: int

    def init(self, key: Array) -> PyTree: ...

    def observe(self, state: PyTree, key: Array) -> tuple[PyTree, Array, Array]: ...

    def outcome(self, state: PyTree, x: Array, key: Array) -> Array: ...

    def expected_rewards(self, state: PyTree, actions: Array) -> Array: ...


@runtime_checkable
class BCOEnv(Protocol):
    """A BCO loss sequence: what a round of ``bandits_jax.bco.interact`` needs of it.

    * ``init(key) -> env_state`` (round ``t = 0``; the state has ``t``, the round index);
    * ``step(env_state) -> env_state`` (next round);
    * ``loss(env_state, t, x (..., d)) -> f_t(x)`` (batched over the leading axes of ``x``);
    * ``domain``: the feasible set (:func:`bandits_jax.bco.ball` or :func:`bandits_jax.bco.box`).

    The families of :mod:`bandits_jax.envs.bco_losses` also have the optional
    :class:`BCOAnalysis` part, which only the regret bookkeeping reads.
    """

    domain: Any

    def init(self, key: Array) -> PyTree: ...

    def step(self, state: PyTree) -> PyTree: ...

    def loss(self, state: PyTree, t: Array, x: Array) -> Array: ...


@runtime_checkable
class BCOAnalysis(Protocol):
    """The optional analysis part of a BCO loss sequence (``bandits_jax.bco.summarize``), for
    oblivious sequences whose ``f_t`` is a function of ``(initial state, t)``:

    * ``comparator(env_state, t) -> v_t`` (dynamic comparator, eq. 5.1);
    * ``grad_variation(env_state, t)``: ``sup_x ||grad f_t(x) - grad f_{t-1}(x)||^2`` (eq. 1.1);
    * ``min_loss_plus(env_state, t)``: ``min_{X+} f_t`` (for ``F_T``, eq. 3.5);
    * ``best_fixed_point(env_state, T) -> (x*, status)``: ``argmin_X sum_{t<T} f_t``;
    * ``grad_variance(env_state, T) -> W_T`` (eq. 3.4; NaN where not available).

    Without it a run still plays; the quantities that need it are NaN. The families of
    :mod:`bandits_jax.envs.bco_losses` also carry ``grad`` and constants (``d``, ``lam``,
    ``smoothness``, ``lipschitz``, ``variation_exact``, ``name``) for their theorems' settings.
    """

    def comparator(self, state: PyTree, t: Array) -> Array: ...

    def grad_variation(self, state: PyTree, t: Array) -> Array: ...

    def min_loss_plus(self, state: PyTree, t: Array) -> Array: ...

    def best_fixed_point(self, state: PyTree, num_rounds: int) -> tuple[Array, Array]: ...

    def grad_variance(self, state: PyTree, num_rounds: int) -> Array: ...


__all__ = [
    "BCOAnalysis",
    "BCOEnv",
    "LearnerState",
    "MLogBEnv",
    "WithSketchError",
    "WithSketchRank",
    "WithUpdateInfo",
]
