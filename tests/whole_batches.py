"""Independent chains of batched LAPACK calls at the largest batches ``bandits_jax.linalg.lapack``
keeps in one call (Cholesky and eigh of 20 x 20 matrices), twice as many chains as cores: XLA
starts them at once on its pool threads. ``python tests/whole_batches.py`` finishes at XLA's
default options (``tests/test_no_hang.py`` runs it); with ``--over`` the batches are just above
jaxlib's split work and are plain ``jax.numpy`` calls, and on jaxlib 0.10.2 the program never
returns (``docs/xla_cpu_hang.md``).
"""

from __future__ import annotations

import os
import re
import sys

import jax
import jax.numpy as jnp

from bandits_jax.linalg import lapack

N = 20
COST = {"cholesky": N**3 // 3, "eigh": 5 * N**3}  # jaxlib's estimates for one matrix


def main(over: bool) -> None:
    jax.config.update("jax_enable_x64", True)
    work = lapack.MIN_SPLIT_WORK + 2 * N**3 if over else lapack.MIN_SPLIT_WORK - 1
    chol, eigh = (jnp.linalg.cholesky, jnp.linalg.eigh) if over else (lapack.cholesky, lapack.eigh)
    fns = [jax.vmap(chol), jax.vmap(lambda a: eigh(a)[1])] * os.cpu_count()
    sizes = [work // COST[k] for k in ("cholesky", "eigh")] * os.cpu_count()

    def step(chains, x):
        chains = [a + 1e-6 * jnp.einsum("bi,bj->bij", x[: len(a)], x[: len(a)]) for a in chains]
        outs = [f(a) for f, a in zip(fns, chains, strict=True)]
        return [a + 1e-9 * o for a, o in zip(chains, outs, strict=True)], outs[0][0, 0, 0]

    chains = [jnp.broadcast_to(2.0 * jnp.eye(N), (b, N, N)) for b in sizes]
    xs = jax.random.normal(jax.random.key(0), (300, max(sizes), N))
    run = jax.jit(lambda c: jax.lax.scan(step, c, xs))
    text = run.lower(chains).as_text()
    operands = re.findall(r"custom_call @lapack_\w+\(.*?:\s*\((.*?)\)\s*->", text, re.S)
    for b in set(sizes):  # each batch is one LAPACK call
        assert any(f"tensor<{b}x{N}x{N}xf64>" in o for o in operands), (b, operands)
    print("batches", sorted(set(sizes)), flush=True)
    jax.block_until_ready(run(chains))
    print("finished")


if __name__ == "__main__":
    sys.exit(main("--over" in sys.argv[1:]))
