"""Host snapshots of run states (``sim.checkpoint.to_host``/``to_device``): a round trip gives the
same arrays and typed PRNG keys, fresh device buffers each time, and compiles no program (where
eager copies or indexing on the device compile one per shape)."""

import logging

import jax
import jax.numpy as jnp
import numpy as np

from bandits_jax.sim import checkpoint


def tree():
    keys = jax.random.split(jax.random.key(3), 4)
    return {"x": jnp.arange(12.0).reshape(4, 3), "n": jnp.arange(4, dtype=jnp.int32),
            "key": keys, "nested": (jnp.ones((4, 2, 2)),)}  # fmt: skip


def test_round_trip_keeps_arrays_and_keys():
    t = tree()
    host = checkpoint.to_host(t)
    assert all(isinstance(x, np.ndarray) for x in host.leaves)
    back = checkpoint.to_device(host)
    assert jax.tree.structure(back) == jax.tree.structure(t)
    for a, b in zip(jax.tree.leaves(back), jax.tree.leaves(t), strict=True):
        assert a.dtype == b.dtype and a.shape == b.shape
        if jnp.issubdtype(a.dtype, jax.dtypes.prng_key):  # the same keys draw the same numbers
            a, b = jax.random.key_data(a), jax.random.key_data(b)
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    # map acts on every leaf (key data included): the first two trials
    two = checkpoint.to_device(host.map(lambda x: x[:2]))
    np.testing.assert_array_equal(np.asarray(jax.random.key_data(two["key"])),
                                  np.asarray(jax.random.key_data(t["key"]))[:2])  # fmt: skip


def test_fresh_buffers_and_no_compiled_program(caplog):
    host = checkpoint.to_host(tree())
    first = checkpoint.to_device(host)
    jax.jit(lambda s: jax.tree.map(lambda v: v, s), donate_argnums=0)(first)  # donated
    with jax.log_compiles(True), caplog.at_level(logging.WARNING):
        again = checkpoint.to_device(host.map(lambda x: x[1:]))
        jax.block_until_ready(again)
    assert not [r for r in caplog.records if "Compiling" in r.getMessage()]
    np.testing.assert_array_equal(np.asarray(again["x"]), np.arange(3.0, 12.0).reshape(3, 3))
