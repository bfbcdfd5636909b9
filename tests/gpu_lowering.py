"""What a GPU would run: each learner's vmapped round exported for CUDA, its custom calls checked.

jaxlib's GPU solver kernels (``jaxlib/gpu/solver_kernels_ffi.cc``, jax 0.10) run some batched
calls as a ``for`` loop of single-matrix cuSOLVER calls, one after another: ``syevd`` (``eigh``)
above 32 x 32 (``SyevdImpl``; up to 32, ``syevjBatched``), ``gesvdj`` when thin or larger than
32 x 32 (``GesvdjImpl``), ``gesvd``, ``syrk``, ``sytrd`` and ``orgqr`` always, ``getrf`` and
``geqrf`` above 128 rows a matrix per batch member. A host callback stops the device every round.
:func:`loops` names every such call of an exported program; :data:`BATCHED` lists the calls that
stay one launch for the batch (anything else is reported too, so a new kind of call is looked at).

Run ``python -m tests.gpu_lowering`` for the report in ``docs/gpu.md`` (every case, its custom
calls); ``tests/test_gpu_lowering.py`` checks every case in the default suite. Exporting needs no
GPU (``jax.export`` for ``platforms=("cuda",)`` runs on a CPU-only machine).
"""

from __future__ import annotations

import argparse
import collections
import functools
import math
import re
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import export

from bandits_jax import bco, envs, mlogb
from bandits_jax.bco import domains as dom
from bandits_jax.envs import bco_losses
from bandits_jax.mlogb import recipes

TRIALS = 3  # the exported batch: every solver call must carry it as its batch

# (K, d): the regimes of ``recipes.RULES`` at their largest sizes, with the rules' sketch and
# buffer sizes: K = 1 with K d <= 32 and K d > 128 (d up to 200; 32 < K d <= 128 has the same
# rows and smaller sizes), K >= 2 with 32 < K d <= 128 (K d <= 32 has its rows, smaller) and
# K d > 128.
REGIMES = ((1, 20), (1, 200), (4, 20), (2, 200))


class Call(NamedTuple):
    """A custom call: its target, attributes (``backend_config``) and the first operand's shape."""

    target: str
    config: str
    shape: tuple[int, ...]


_CALL = re.compile(r"stablehlo\.custom_call @(\w+)\(")
_CONFIG = re.compile(r"backend_config = \{([^}]*)\}")


def custom_calls(mlir_text: str) -> list[Call]:
    """The custom calls of an exported module (one per line of its text)."""
    calls = []
    for line in mlir_text.splitlines():
        m = _CALL.search(line)
        if not m:
            continue
        config = _CONFIG.search(line)
        operands = line.rsplit(" : (", 1)[-1]
        first = re.search(r"tensor<([^>]*)>", operands)
        dims = first.group(1).split("x")[:-1] if first else []
        shape = tuple(int(x) for x in dims if x.isdigit())
        calls.append(Call(m.group(1), config.group(1) if config else "", shape))
    return calls


def _square_at_most(limit: int) -> Callable[[Call], bool]:
    return lambda c: max(c.shape[-2:], default=0) <= limit


#: Calls that run as one launch for the whole batch, with the condition under which they do.
BATCHED: dict[str, Callable[[Call], bool]] = {
    "cusolver_potrf_ffi": lambda c: True,  # potrfBatched
    "cusolver_syevd_ffi": lambda c: _square_at_most(32)(c) and "algorithm = 0" in c.config,
    "cusolver_gesvdj_ffi": lambda c: _square_at_most(32)(c) and "full_matrices = true" in c.config,
    "cusolver_getrf_ffi": _square_at_most(128),  # getrfBatched while n / batch <= 128
    "cusolver_geqrf_ffi": _square_at_most(128),
    "cu_lu_pivots_to_permutation": lambda c: True,
}


def loops(calls: list[Call], batch: int = TRIALS) -> list[str]:
    """The calls a GPU would run other than as one launch for the batch: a per-matrix loop (not
    in :data:`BATCHED` or outside its condition), a host callback, or a solver call that does not
    carry the batch (``batch`` leading entries), which a trial loop would have made."""
    bad = []
    for c in calls:
        ok = BATCHED.get(c.target)
        if ok is None or not ok(c):
            bad.append(f"{c.target} {c.shape} {{{c.config}}}")
        elif c.target.startswith("cusolver") and math.prod(c.shape[:-2]) % batch:
            bad.append(f"{c.target} {c.shape}: not batched over the {batch} trials")
    return bad


class Case(NamedTuple):
    """One learner in one regime: ``program()`` returns ``(f, args)`` of its vmapped round."""

    name: str
    program: Callable[[], tuple[Callable, tuple]]


def _vmapped_round(learner, hparams, step, env_init) -> tuple[Callable, tuple]:
    keys = jax.random.split(jax.random.key(0), TRIALS)
    states = jax.vmap(lambda _: learner.init(hparams))(jnp.arange(TRIALS))
    return jax.jit(jax.vmap(step)), (states, jax.vmap(env_init)(keys), keys)


def _mlogb_case(kind: str, K: int, d: int, dtype) -> Case:
    def program():
        rec = mlogb.tuned(kind, num_outcomes=K, dim=d, S=4.0, horizon=100, dtype=dtype)
        env = envs.synthetic_mlogb(num_outcomes=K, dim=d, S=4.0)
        return _vmapped_round(rec.learner, rec.hparams, mlogb.interact(rec.learner, env), env.init)

    return Case(f"{kind} K={K} d={d} {np.dtype(dtype).name}", program)


def _bco_case(name: str, factory: Callable, dtype, d: int = 200, **kw) -> Case:
    def program():
        learner = factory(dim=d)
        env = bco_losses.quadratic(d, lam=1.0, base_norm=0.5, amplitude=0.2, omega=5e-4)
        hp = learner.hyperparams(dom.ball(1.0, dtype=dtype), horizon=100, **kw)
        return _vmapped_round(learner, hp, bco.interact(learner, env), env.init)

    return Case(f"{name} d={d} {np.dtype(dtype).name}", program)


def cases(dtypes=(jnp.float32, jnp.float64)) -> list[Case]:
    """Every registry kind in every regime of :data:`REGIMES`, and the BCO learners on the ball
    (Algorithms 1 and 3, the dynamic and universal ensembles; plain vector work at any d), in each
    dtype."""
    out = []
    for dtype in dtypes:
        for K, d in REGIMES:
            out += [_mlogb_case(k, K, d, dtype) for k in recipes.KINDS
                    if K == 1 or k not in recipes.K1_ONLY]  # fmt: skip
        out += [
            _bco_case("alg1", functools.partial(bco.two_point_learner, schedule="variance"), dtype),
            _bco_case("alg3", functools.partial(bco.sphere_learner, schedule="sqrt_t"), dtype),
            _bco_case("alg5", bco.dynamic_ensemble, dtype, preset="practical"),
            _bco_case("alg6", bco.universal_ensemble, dtype, preset="practical", lipschitz=2.0),
        ]
    return out


_EXPORTED: dict[str, list[Call]] = {}


def cuda_calls(case: Case) -> list[Call]:
    """The custom calls of ``case``'s vmapped round exported for CUDA (once per case name)."""
    if case.name not in _EXPORTED:
        f, args = case.program()
        text = export.export(f, platforms=("cuda",))(*args).mlir_module()
        _EXPORTED[case.name] = custom_calls(text)
    return _EXPORTED[case.name]


def report(all_cases: list[Case]) -> str:
    """A markdown table: each case, its custom calls (target and matrix shape, counted once per
    distinct call in the module) and the per-matrix loops (none expected)."""
    lines = ["| learner, regime, dtype | custom calls (CUDA) | loops over the batch |",
             "|---|---|---|"]  # fmt: skip
    for case in all_cases:
        calls = cuda_calls(case)
        seen = collections.Counter(f"`{c.target}` {'x'.join(map(str, c.shape))}" for c in calls)
        listed = ", ".join(sorted(seen)) or "none"
        lines.append(f"| {case.name} | {listed} | {', '.join(loops(calls)) or 'none'} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dtypes", default="float32,float64")
    args = parser.parse_args()
    jax.config.update("jax_enable_x64", True)
    print(report(cases(tuple(jnp.dtype(x) for x in args.dtypes.split(",")))), end="")
