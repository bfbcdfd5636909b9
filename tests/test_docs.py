"""Every module and every public function or class of the package has a docstring.

Public: listed in the module's ``__all__`` where it has one, else every module-level function or
class defined there whose name does not start with an underscore.
"""

import importlib
import inspect
import pkgutil

import bandits_jax


def _modules():
    for info in pkgutil.walk_packages(bandits_jax.__path__, "bandits_jax."):
        if not info.name.endswith("__main__"):
            yield importlib.import_module(info.name)


def _public(mod):
    names = getattr(mod, "__all__", None)
    if names is None:
        names = [
            n
            for n, v in vars(mod).items()
            if not n.startswith("_")
            and (inspect.isfunction(v) or inspect.isclass(v))
            and v.__module__ == mod.__name__
        ]
    for n in names:
        v = getattr(mod, n)
        if inspect.isfunction(v) or inspect.isclass(v):
            yield n, v


def test_every_module_and_public_name_has_a_docstring():
    missing = []
    modules = list(_modules())
    assert len(modules) > 40  # the walk found the package
    for mod in modules:
        if not (mod.__doc__ or "").strip():
            missing.append(mod.__name__)
        missing += [f"{mod.__name__}.{n}" for n, v in _public(mod) if not inspect.getdoc(v)]
    assert not missing, f"no docstring: {missing}"
