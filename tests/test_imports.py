"""Import smoke test: every public name of every subpackage imports and is what __all__ says."""

import importlib

import pytest

PACKAGES = ["bandits_jax.mlogb", "bandits_jax.sim", "bandits_jax.envs", "bandits_jax.bco"]


@pytest.mark.parametrize("name", PACKAGES)
def test_public_names_import(name):
    mod = importlib.import_module(name)
    assert mod.__all__, name
    for attr in mod.__all__:
        assert getattr(mod, attr) is not None, f"{name}.{attr}"


def test_contract_names():
    from bandits_jax import mlogb

    for attr in ("eofd", "oful", "hyperparams", "section4", "interact"):
        assert callable(getattr(mlogb, attr))
