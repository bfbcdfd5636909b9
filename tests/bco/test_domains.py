"""Domains (Assumption 1): projection onto (1 - xi) X, radii, eager validation."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bandits_jax.bco import domains as dom

_project = jax.jit(dom.project)


def _domains():
    return [
        dom.ball(1.5),
        dom.box(jnp.array([-1.0, -0.5, -2.0]), jnp.array([0.7, 1.0, 0.3])),
    ]


@pytest.mark.parametrize("k", [0, 1])
def test_projection_variational_inequality(k):
    """Pi(x) lies in (1-xi)X and <x - Pi(x), y - Pi(x)> <= 0 for every y in (1-xi)X."""
    domain = _domains()[k]
    rng = np.random.default_rng(0)
    xi = 0.1
    xs = jnp.asarray(rng.normal(size=(64, 3)) * 2.0)
    p = _project(domain, xs, xi)
    assert bool(jnp.all(dom.contains(domain, p, xi, atol=1e-12)))
    # points inside are left alone (idempotence)
    np.testing.assert_allclose(_project(domain, p, xi), p, atol=1e-14)
    ys = _project(domain, jnp.asarray(rng.normal(size=(256, 3)) * 3.0), xi)
    vi = jnp.einsum("nd,nmd->nm", xs - p, ys[None, :, :] - p[:, None, :])
    assert float(vi.max()) <= 1e-12


def test_radii_against_brute_force():
    lo = np.array([-1.0, -0.5, -2.0])
    hi = np.array([0.7, 1.0, 0.3])
    b = dom.box(lo, hi)
    corners = np.array(list(itertools.product(*zip(lo, hi, strict=True))))
    assert np.isclose(float(dom.outer_radius(b)), np.linalg.norm(corners, axis=1).max())
    # inner radius: distance from the origin to the nearest face
    assert np.isclose(float(dom.inner_radius(b)), np.min(np.concatenate([-lo, hi])))
    assert float(dom.inner_radius(dom.ball(2.0))) == 2.0


def test_linear_minimiser_matches_enumeration():
    rng = np.random.default_rng(1)
    lo = np.array([-1.0, -0.5, -2.0])
    hi = np.array([0.7, 1.0, 0.3])
    b = dom.box(lo, hi)
    corners = np.array(list(itertools.product(*zip(lo, hi, strict=True))))
    for _ in range(5):
        l = rng.normal(size=3)
        x = np.asarray(dom.linear_minimiser(b, jnp.asarray(l)))
        assert np.isclose(l @ x, (corners @ l).min())
        xb = np.asarray(dom.linear_minimiser(dom.ball(2.0), jnp.asarray(l)))
        assert np.isclose(l @ xb, -2.0 * np.linalg.norm(l))


def test_bad_input():
    with pytest.raises(ValueError, match="radius"):
        dom.ball(0.0)
    with pytest.raises(ValueError, match="radius"):
        dom.ball(-1.0)
    with pytest.raises(ValueError, match="empty box"):
        dom.box(jnp.array([-1.0, 1.0]), jnp.array([1.0, 0.5]))
    with pytest.raises(ValueError, match="upper"):
        dom.box(jnp.array([-1.0, -1.0]), jnp.array([1.0, 1.0, 1.0]))
    with pytest.raises(ValueError, match="lower < 0 < upper"):
        dom.box(jnp.array([0.5, -1.0]), jnp.array([1.0, 1.0]))
    with pytest.raises(ValueError, match="dimension"):
        dom.check_dim(dom.box(jnp.array([-1.0, -1.0]), jnp.array([1.0, 1.0])), 3)


def test_float32_dtype_follows():
    b = dom.ball(jnp.asarray(1.0, jnp.float32))
    x = jnp.ones((4,), jnp.float32) * 3
    assert dom.project(b, x, 0.01).dtype == jnp.float32
