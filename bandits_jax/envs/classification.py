"""Classification data as a contextual bandit (EOFD-MLogB paper, section 4, "Setup").

The protocol of Cesa-Bianchi et al. (2013) that section 4 uses for MNIST: every round the learner
sees ``num_candidates`` examples with distinct labels, one drawn uniformly from each of the
classes shown, in a random order; choosing the example of the target class pays 1, any other
pays 0 (K = 1, rewards ``[1]``). With fewer candidates than classes, the target class is always
shown and the others are a uniformly random subset.

Normalisation (the paper only says "normalized features" plus a bias)::

    a = [x / ||x||_2, 1] / sqrt(2),      so that ||a||_2 = 1 and a[-1] = 1/sqrt(2)

(an all-zero ``x`` gives ``a = [0, ..., 0, 1/sqrt(2)]``): actions in the unit ball the analysis
assumes; the division rescales W* by a constant and changes nothing else. ``d`` is the number of
raw features plus one: 65 for scikit-learn's 8x8 digits, 785 for MNIST.

Multinomial variant (K >= 2, of this library's design): the classes are grouped into K + 1
outcome levels by ``outcome_of_class`` (default for digits with K = 4: digit ``c`` has level
``c // 2``). Choosing an example of class ``c`` yields ``y = outcome_of_class[c]`` with
probability ``1 - label_noise`` and a uniformly random outcome in {0..K} otherwise, paying
``rewards[y-1]`` (0 for y = 0); the expected reward, used for regret, is
``(1 - label_noise) * r[outcome_of_class[c]] + label_noise * mean(r_0..r_K)`` with ``r_0 = 0``.
The binary protocol is ``outcome_of_class = 1[c == target]``, ``rewards = [1]``, no noise.

The environment follows the MLogB environment protocol of ``bandits_jax.envs``; the data set is
closed over as a constant (uint8 pixels where possible) and the state holds, as data, each
class's outcome level and the always-shown classes: ``init_target(key, c)`` starts the binary
protocol with target ``c`` (a traced int32 is fine), so one compiled program serves every target
class. Besides digits and MNIST, scikit-learn's bundled :func:`wine`, :func:`iris` and
:func:`breast_cancer` (no download) are available with the binary protocol.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from bandits_jax.mlogb.hparams import state_dtype

__all__ = [
    "ClassificationEnv",
    "ClassificationState",
    "classification_bandit",
    "normalise_features",
    "load_digits",
    "load_sklearn",
    "digits",
    "digits_multinomial",
    "mnist",
    "wine",
    "iris",
    "breast_cancer",
]


class ClassificationState(NamedTuple):
    """The current round's candidates and the per-class outcome law.

    Attributes:
      labels: int32 ``(N,)`` class of each candidate.
      actions: ``(N, d)`` their normalised features.
      level: int32 ``(C,)`` outcome level in ``{0..K}`` of each class (binary protocol:
        ``1[c == target]``).
      shown: int32 ``(F,)`` classes shown every round (binary protocol: ``[target]``, F = 1;
        multinomial variant: none, F = 0).
    """

    labels: jax.Array
    actions: jax.Array
    level: jax.Array
    shown: jax.Array


class ClassificationEnv(NamedTuple):
    """An MLogB environment built from a labelled data set (pure functions of PRNG keys).

    Attributes:
      init: ``init(key) -> state`` (with the target class the env was built with).
      observe: ``observe(state, key) -> (state, actions (N, d), mask (N,) bool)``.
      outcome: ``outcome(state, x, key) -> y`` in ``{0..K}`` (int32) for a shown candidate ``x``.
      expected_rewards: ``expected_rewards(state, actions) -> (N,)`` for the shown candidates.
      num_outcomes: ``K``.
      dim: ``d`` (raw features + 1).
      max_actions: ``N``, the candidates per round (all shown: the mask is all True).
      num_classes: number of classes in the data.
      rewards: ``(K,)`` numpy rewards of outcomes 1..K.
      init_target: ``init_target(key, target) -> state``: the binary protocol with rewarded class
        ``target`` (an int or a traced int32 scalar; a concrete one outside ``0..C-1`` raises
        ``ValueError``, a traced one is not checked); ``None`` for the multinomial variant.
    """

    init: Callable[[jax.Array], ClassificationState]
    observe: Callable[..., Any]
    outcome: Callable[..., jax.Array]
    expected_rewards: Callable[..., jax.Array]
    num_outcomes: int
    dim: int
    max_actions: int
    num_classes: int
    rewards: np.ndarray
    init_target: Callable[..., ClassificationState] | None = None


def normalise_features(raw: np.ndarray) -> np.ndarray:
    """The documented normalisation in numpy: ``[x / ||x||, 1] / sqrt(2)`` per row (float64)."""
    raw = np.asarray(raw, dtype=np.float64)
    norms = np.linalg.norm(raw, axis=1, keepdims=True)
    unit = np.divide(raw, norms, out=np.zeros_like(raw), where=norms > 0)
    return np.concatenate([unit, np.ones((raw.shape[0], 1))], axis=1) / math.sqrt(2.0)


def _compact(raw: np.ndarray) -> np.ndarray:
    """Keeps integer pixels in [0, 255] as uint8 (MNIST: 47 MB instead of 377 MB in float64)."""
    raw = np.asarray(raw)
    if raw.dtype == np.uint8:
        return raw
    if raw.size and np.all(raw == np.round(raw)) and raw.min() >= 0 and raw.max() <= 255:
        return raw.astype(np.uint8)
    return raw.astype(np.float64)


def classification_bandit(
    features: np.ndarray,
    labels: np.ndarray,
    *,
    target: int = 1,
    num_candidates: int | None = None,
    rewards: Any = None,
    outcome_of_class: Any = None,
    label_noise: float = 0.0,
    dtype: Any = None,
) -> ClassificationEnv:
    """Builds the classification-to-bandit environment.

    Args:
      features: raw ``(n, p)`` features (e.g. pixels); normalised as the module docstring says.
      labels: ``(n,)`` integer classes ``0..C-1``; every class needs at least one example.
      target: the rewarded class of the binary protocol (ignored if ``outcome_of_class`` given).
      num_candidates: candidates per round, distinct classes, ``<= C``; default ``C``.
      rewards: ``(K,)`` rewards of outcomes 1..K; default ``[1.0]``.
      outcome_of_class: ``(C,)`` outcome level in ``{0..K}`` of each class; default
        ``1[c == target]`` (then ``rewards`` must have length 1).
      label_noise: probability in ``[0, 1]`` that the outcome is uniform on ``{0..K}``.
      dtype: float dtype of the actions; default JAX's default float.

    Returns:
      A :class:`ClassificationEnv`.
    """
    raw, labels, counts = _checked_data(features, labels)
    num_classes = counts.size
    n_cand = _checked_candidates(num_candidates, num_classes)
    r, level = _outcome_law(target, rewards, outcome_of_class, label_noise, num_classes)
    binary = outcome_of_class is None
    dtype = state_dtype(dtype)
    featurise, dim = _featuriser(raw, dtype)
    n_fixed = 1 if binary else 0  # always-shown classes: the target in the binary protocol
    shown = [int(target)] if binary else []
    init, init_target = _starts(level, shown, num_classes, n_cand, n_fixed, dim, dtype)
    observe = _observer(labels, counts, n_cand, n_fixed, featurise)
    outcome, expected_rewards = _outcome_fns(r, label_noise, dtype)
    return ClassificationEnv(
        init,
        observe,
        outcome,
        expected_rewards,
        r.shape[0],
        dim,
        n_cand,
        num_classes,
        r,
        init_target if binary else None,
    )


def _checked_data(features: Any, labels: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(raw, labels, counts)``: the features kept compact (:func:`_compact`), the labels and
    the examples per class, checked (a 2-D array, one label per row, every class present)."""
    labels = np.asarray(labels)
    raw = _compact(features)
    if raw.ndim != 2:
        raise ValueError(f"features: expected a 2-D (n, p) array, got shape {raw.shape}")
    if labels.shape != (raw.shape[0],):
        raise ValueError(f"labels: expected shape ({raw.shape[0]},), got {labels.shape}")
    if labels.size == 0 or labels.min() < 0 or labels.dtype.kind not in "iu":
        raise ValueError("labels: expected non-negative integer classes")
    num_classes = int(labels.max()) + 1
    counts = np.bincount(labels, minlength=num_classes)
    if np.any(counts == 0):
        raise ValueError(f"labels: classes {np.flatnonzero(counts == 0).tolist()} have no example")
    return raw, labels, counts


def _checked_candidates(num_candidates: Any, num_classes: int) -> int:
    """The candidates per round: ``num_candidates`` (an int in ``1..C``) or ``C``."""
    if num_candidates is not None and (
        not isinstance(num_candidates, int | np.integer) or isinstance(num_candidates, bool)
    ):
        raise ValueError(f"num_candidates: expected an int, got {num_candidates!r}")
    n_cand = num_classes if num_candidates is None else int(num_candidates)
    if not 1 <= n_cand <= num_classes:
        raise ValueError(
            f"num_candidates: expected 1..{num_classes} (distinct classes), got {n_cand}"
        )
    return n_cand


def _outcome_law(
    target: int, rewards: Any, outcome_of_class: Any, label_noise: float, num_classes: int
) -> tuple[np.ndarray, np.ndarray]:
    """``(rewards, level)``: the ``(K,)`` rewards of outcomes 1..K and the int32 ``(C,)``
    outcome level of each class (binary protocol: ``1[c == target]``), checked."""
    r = np.asarray([1.0] if rewards is None else rewards, dtype=np.float64).reshape(-1)
    K = r.shape[0]
    if K < 1 or not np.all(np.isfinite(r) & (r >= 0)):
        raise ValueError(f"rewards: expected K >= 1 finite values >= 0, got {rewards!r}")
    if outcome_of_class is None:
        if not 0 <= int(target) < num_classes:
            raise ValueError(f"target: expected a class in 0..{num_classes - 1}, got {target}")
        if K != 1:
            raise ValueError(f"rewards: the binary protocol has K = 1, got length {K}")
        level = (np.arange(num_classes) == int(target)).astype(np.int32)
    else:
        level = np.asarray(outcome_of_class)
        if level.shape != (num_classes,):
            raise ValueError(
                f"outcome_of_class: expected shape ({num_classes},), got {level.shape}"
            )
        if level.min() < 0 or level.max() > K:
            raise ValueError(
                f"outcome_of_class: expected levels in 0..{K}, got [{level.min()}, {level.max()}]"
            )
        level = level.astype(np.int32)
    if not 0.0 <= float(label_noise) <= 1.0:
        raise ValueError(f"label_noise: expected a probability in [0, 1], got {label_noise}")
    return r, level


def _featuriser(raw: np.ndarray, dtype: Any) -> tuple[Callable, int]:
    """``(featurise, d)``: ``featurise(idx) -> (n, d)`` normalised features of the examples
    ``idx`` (the module docstring's ``[x / ||x||, 1] / sqrt(2)``, from the compact data)."""
    inv_norm = np.linalg.norm(raw.astype(np.float64), axis=1)
    inv_norm = np.divide(1.0, inv_norm, out=np.zeros_like(inv_norm), where=inv_norm > 0)
    raw_j = jnp.asarray(raw)
    scale_j = jnp.asarray(inv_norm / math.sqrt(2.0), dtype)
    bias = jnp.asarray(1.0 / math.sqrt(2.0), dtype)

    def featurise(idx):
        x = raw_j[idx].astype(dtype) * scale_j[idx][:, None]
        return jnp.concatenate([x, jnp.broadcast_to(bias, (idx.shape[0], 1))], axis=1)

    return featurise, raw.shape[1] + 1


def _starts(
    level: np.ndarray,
    shown: list[int],
    num_classes: int,
    n_cand: int,
    n_fixed: int,
    dim: int,
    dtype: Any,
) -> tuple[Callable, Callable]:
    """``(init, init_target)``: the state before the first round with the given outcome
    ``level`` and always-``shown`` classes, and the binary protocol's state for a target class
    given as data (checked when concrete)."""
    all_classes = jnp.arange(num_classes, dtype=jnp.int32)

    def start(levels, shown_classes):
        return ClassificationState(
            jnp.zeros((n_cand,), jnp.int32),
            jnp.zeros((n_cand, dim), dtype),
            jnp.asarray(levels, jnp.int32),
            jnp.asarray(shown_classes, jnp.int32).reshape(n_fixed),
        )

    def init(key):
        del key
        return start(level, shown)

    def init_target(key, target_class):
        del key
        if not isinstance(target_class, jax.core.Tracer):
            t = np.asarray(target_class)
            if t.shape != () or t.dtype.kind not in "iu" or not 0 <= int(t) < num_classes:
                raise ValueError(
                    f"target: expected a class in 0..{num_classes - 1}, got {target_class!r}"
                )
        t = jnp.asarray(target_class, jnp.int32)
        return start((all_classes == t).astype(jnp.int32), t[None])

    return init, init_target


def _observer(
    labels: np.ndarray, counts: np.ndarray, n_cand: int, n_fixed: int, featurise: Callable
) -> Callable:
    """``observe(state, key)``: a round's ``n_cand`` candidates of distinct classes (the
    always-shown ones and a random subset of the others, in random order), one random example
    of each."""
    num_classes = counts.size
    # Per-class index table, padded: example j of class c is by_class[c, j], j < counts[c].
    width = int(counts.max())
    by_class = np.zeros((num_classes, width), np.int32)
    for c in range(num_classes):
        idx = np.flatnonzero(labels == c)
        by_class[c, : idx.size] = idx
    by_class_j, counts_j = jnp.asarray(by_class), jnp.asarray(counts, jnp.int32)
    all_classes = jnp.arange(num_classes, dtype=jnp.int32)
    n_extra = n_cand - n_fixed

    def observe(state, key):
        k_classes, k_order, k_examples = jax.random.split(key, 3)
        # The other classes in ascending order (a stable sort puts the always-shown ones last).
        is_shown = jnp.any(all_classes[:, None] == state.shown[None, :], axis=1)
        pool = jnp.argsort(is_shown, stable=True)[: num_classes - n_fixed].astype(jnp.int32)
        extra = jax.random.permutation(k_classes, pool)[:n_extra]
        classes = jax.random.permutation(k_order, jnp.concatenate([state.shown, extra]))
        pick = jax.random.randint(k_examples, (n_cand,), 0, counts_j[classes])
        actions = featurise(by_class_j[classes, pick])
        new = ClassificationState(classes, actions, state.level, state.shown)
        return new, actions, jnp.ones((n_cand,), bool)

    return observe


def _outcome_fns(r: np.ndarray, label_noise: float, dtype: Any) -> tuple[Callable, Callable]:
    """``(outcome, expected_rewards)`` of the shown candidates: a class's level, or a uniform
    outcome with probability ``label_noise``; expected reward ``(1 - p) r_y + p mean(r)``."""
    K = r.shape[0]
    r_full = np.concatenate([[0.0], r])
    mean_r = float(r_full.mean())
    p_noise = float(label_noise)
    # Expected reward of outcome level y: (1 - p) r_y + p mean(r_0..r_K).
    reward_of_level = jnp.asarray((1.0 - p_noise) * r_full + p_noise * mean_r, dtype)

    def _labels_of(state, actions):
        # Which shown candidate each row is: exact rows, so the nearest is at distance 0.
        d2 = jnp.sum((actions[:, None, :] - state.actions[None, :, :]) ** 2, axis=-1)
        return state.labels[jnp.argmin(d2, axis=1)]

    def outcome(state, x, key):
        label = _labels_of(state, x[None, :])[0]
        k_flip, k_uniform = jax.random.split(key)
        noisy = jax.random.bernoulli(k_flip, p_noise)
        y_rand = jax.random.randint(k_uniform, (), 0, K + 1)
        return jnp.where(noisy, y_rand, state.level[label]).astype(jnp.int32)

    def expected_rewards(state, actions):
        return reward_of_level[state.level[_labels_of(state, actions)]]

    return outcome, expected_rewards


_SKLEARN_SETS = {
    "digits": "load_digits",
    "wine": "load_wine",
    "iris": "load_iris",
    "breast_cancer": "load_breast_cancer",
}


def load_sklearn(name: str) -> tuple[np.ndarray, np.ndarray]:
    """A classification data set bundled with scikit-learn (no download): ``(features, labels)``.

    Args:
      name: ``"digits"`` (1797 x 64, 10 classes), ``"wine"`` (178 x 13, 3), ``"iris"``
        (150 x 4, 3) or ``"breast_cancer"`` (569 x 30, 2).
    """
    if name not in _SKLEARN_SETS:
        raise ValueError(f"name: expected one of {list(_SKLEARN_SETS)}, got {name!r}")
    try:
        from sklearn import datasets
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError(
            f"The {name} data set comes with scikit-learn, an optional dependency: "
            "pip install 'bandits_jax[data]' (or pip install scikit-learn)."
        ) from e
    data = getattr(datasets, _SKLEARN_SETS[name])()
    return np.asarray(data.data), np.asarray(data.target, np.int32)


def load_digits(half: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn's bundled 8x8 digits (1797 examples, pixels 0..16, no download).

    Args:
      half: ``None`` for every example; ``0`` the even-indexed examples (899), ``1`` the
        odd-indexed ones (898): two disjoint halves with every class, so that recipes can be
        tuned on one and reported on the other.
    """
    x, y = load_sklearn("digits")
    if half is None:
        return x, y
    if isinstance(half, bool) or half not in (0, 1):
        raise ValueError(f"half: expected None, 0 or 1, got {half!r}")
    return x[half::2], y[half::2]


def _sklearn_bandit(
    name: str, target: int, num_candidates: int | None, dtype: Any
) -> ClassificationEnv:
    """The binary protocol on a bundled data set (the loader is shared with :func:`digits`)."""
    x, y = load_sklearn(name)
    return classification_bandit(x, y, target=target, num_candidates=num_candidates, dtype=dtype)


def wine(
    *, target: int = 0, num_candidates: int | None = None, dtype: Any = None
) -> ClassificationEnv:
    """The binary protocol on scikit-learn's wine data (d = 13 + 1, 3 classes, K = 1)."""
    return _sklearn_bandit("wine", target, num_candidates, dtype)


def iris(
    *, target: int = 0, num_candidates: int | None = None, dtype: Any = None
) -> ClassificationEnv:
    """The binary protocol on scikit-learn's iris data (d = 4 + 1, 3 classes, K = 1)."""
    return _sklearn_bandit("iris", target, num_candidates, dtype)


def breast_cancer(
    *, target: int = 0, num_candidates: int | None = None, dtype: Any = None
) -> ClassificationEnv:
    """The binary protocol on scikit-learn's breast cancer data (d = 30 + 1, 2 classes, K = 1)."""
    return _sklearn_bandit("breast_cancer", target, num_candidates, dtype)


def digits(
    *, target: int = 1, num_candidates: int = 10, half: int | None = None, dtype: Any = None
) -> ClassificationEnv:
    """Section 4's binary protocol on scikit-learn's digits (d = 64 + 1, K = 1); ``half``: every
    example (``None``) or one of two disjoint halves (:func:`load_digits`)."""
    x, y = load_digits(half)
    return classification_bandit(x, y, target=target, num_candidates=num_candidates, dtype=dtype)


def digits_multinomial(
    *,
    num_outcomes: int = 4,
    rewards: Any = None,
    label_noise: float = 0.1,
    num_candidates: int = 10,
    half: int | None = None,
    dtype: Any = None,
) -> ClassificationEnv:
    """The multinomial (K >= 2) digits variant: digit ``c`` has outcome level
    ``floor(c (K + 1) / 10)`` (K = 4: pairs {0,1}..{8,9}), rewards default ``[1..K] / K``;
    ``half`` as in :func:`digits`."""
    if not isinstance(num_outcomes, int | np.integer) or isinstance(num_outcomes, bool):
        raise ValueError(f"num_outcomes: expected an int >= 2, got {num_outcomes!r}")
    if num_outcomes < 2:
        raise ValueError(
            f"num_outcomes: expected >= 2 (use digits() for K = 1), got {num_outcomes}"
        )
    x, y = load_digits(half)
    K = int(num_outcomes)
    r = np.arange(1, K + 1) / K if rewards is None else rewards
    level = (np.arange(10) * (K + 1)) // 10
    return classification_bandit(
        x,
        y,
        rewards=r,
        outcome_of_class=level,
        label_noise=label_noise,
        num_candidates=num_candidates,
        dtype=dtype,
    )


def mnist(
    path: Any = None,
    *,
    target: int = 1,
    num_candidates: int = 10,
    split: str = "train",
    cache_dir: Any = None,
    dtype: Any = None,
) -> ClassificationEnv:
    """Section 4's MNIST protocol (d = 784 + 1, K = 1); files: :mod:`bandits_jax.envs.mnist`."""
    from bandits_jax.envs.mnist import load_mnist

    data = load_mnist(path, split=split, cache_dir=cache_dir)
    return classification_bandit(
        data.images,
        data.labels.astype(np.int32),
        target=target,
        num_candidates=num_candidates,
        dtype=dtype,
    )
