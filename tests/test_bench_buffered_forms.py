"""benchmarks.buffered_forms: each row plays the buffer and Hessian form its name says."""

import jax.numpy as jnp

from bandits_jax.mlogb import exact_hyperparams
from benchmarks import buffered_forms as bf


def test_rows_build_the_variants_they_name():
    rows = bf.variants(("gradient", "anchor"), ("section4",), (64, 8), ("auto", "woodbury"))
    assert sorted(rows) == sorted(
        f"buffered-{s}-section4{b}{h}"
        for s in ("gradient", "anchor")
        for b in ("", "-B8")
        for h in ("", "-woodbury")
    )
    # D = 40, m = 4: auto forms H (D x D) where D <= r = m + B K (B = 64), else the core (B = 8)
    K, d = 2, 20
    hp = exact_hyperparams(lam=1.0, beta=0.0, rewards=[0.5, 1.0], dtype=jnp.float64)
    for name, (spec, rule) in rows.items():
        assert spec.label == name and rule(K, d) == 4
        state = spec.factory(K, d, None).init(hp)
        B = 8 if "-B8" in name else 64
        r = rule(K, d) + B * K
        assert state.X.shape[0] == B
        n = r if "woodbury" in name else min(K * d, r)
        assert state.chol.shape == (n, n), name
