"""On a GPU a batch of trials stays one batch: every learner's vmapped round, exported for CUDA
(no GPU needed), makes no call that jaxlib runs as a loop over the batch
(:mod:`tests.gpu_lowering`): every registry kind in every regime of the recipes and the BCO
learners, in float32 in the default run and in float64 with the ``long`` tests (the same calls
with other element types; the default run's 8 minutes)."""

import pathlib

import jax
import jax.numpy as jnp
import pytest
from jax import export

from tests import gpu_lowering as gl

CASES = gl.cases()


@pytest.mark.parametrize(
    "case",
    [pytest.param(c, marks=[pytest.mark.long] if "float64" in c.name else []) for c in CASES],
    ids=[c.name for c in CASES],
)
def test_vmapped_round_makes_no_per_matrix_loop_on_cuda(case):
    assert gl.loops(gl.cuda_calls(case)) == []


def _loops_of(fn, *shapes):
    args = [jnp.ones((gl.TRIALS, *s)) for s in shapes]
    text = export.export(jax.jit(jax.vmap(fn)), platforms=("cuda",))(*args).mlir_module()
    return gl.loops(gl.custom_calls(text))


def test_the_check_flags_what_jaxlib_loops_over_and_passes_what_it_batches():
    # Loops (jaxlib's solver_kernels_ffi.cc): eigh above 32 x 32, a thin SVD, QR's orgqr, a
    # trial loop (an unbatched call inside lax.map).
    assert any("syevd" in c for c in _loops_of(lambda a: jnp.linalg.eigh(a)[0], (33, 33)))
    assert any("gesvdj" in c for c in _loops_of(lambda a: jnp.linalg.svd(a)[1], (40, 40)))
    assert any("orgqr" in c for c in _loops_of(lambda a: jnp.linalg.qr(a)[0], (40, 4)))
    mapped = jax.jit(lambda a: jax.lax.map(jnp.linalg.cholesky, a))
    text = export.export(mapped, platforms=("cuda",))(jnp.ones((gl.TRIALS, 5, 5))).mlir_module()
    assert any("not batched" in c for c in gl.loops(gl.custom_calls(text)))
    # One launch for the batch: eigh up to 32 x 32 (syevjBatched), Cholesky, a small LU.
    assert _loops_of(lambda a: jnp.linalg.eigh(a)[0], (32, 32)) == []
    assert _loops_of(jnp.linalg.cholesky, (200, 200)) == []
    assert _loops_of(lambda a: jnp.linalg.solve(a, a[0]), (8, 8)) == []


def test_docs_gpu_md_shows_the_current_report():
    # Regenerate with ``python -m tests.gpu_lowering --dtypes float32`` (the same exports as above).
    doc = (pathlib.Path(__file__).parents[1] / "docs" / "gpu.md").read_text()
    assert gl.report([c for c in CASES if c.name.endswith("float32")]) in doc
