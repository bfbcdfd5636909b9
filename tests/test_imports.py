"""Import smoke test: every public name of every subpackage imports and is what __all__ says;
the package's faces (the ``__all__`` of the package and of its four subpackages) hold at most 100
names, and everything else stays importable from its own module."""

import ast
import importlib
import inspect
import pathlib

import pytest

PACKAGES = ["bandits_jax.mlogb", "bandits_jax.sim", "bandits_jax.envs", "bandits_jax.bco"]
FACES = ["bandits_jax", *PACKAGES]
MAX_FACE_NAMES = 100
# Names a user reaches at the top: the learner and environment factories, the runner step of
# each family, the builders and recipes, the rollout (README.md, docs/library.md).
CONTRACT = {
    "bandits_jax.mlogb": (
        "eofd", "oful", "linucb", "hyperparams", "section4", "tuned", "practical", "interact",
        "eofd_buffered", "exact", "ecolog", "greedy", "uniform", "lin_ts", "logistic_ts",
    ),
    "bandits_jax.envs": (
        "digits", "synthetic_mlogb", "classification_bandit", "lowrank_mlogb", "heavy_tail_mlogb",
        "replay_mlogb", "digits_multinomial", "mnist", "wine", "iris", "breast_cancer",
    ),
    "bandits_jax.sim": ("make_rollout",),
    "bandits_jax.bco": (
        "two_point_learner", "sphere_learner", "box_ftrl", "dynamic_ensemble",
        "universal_ensemble", "from_preset", "PRESETS", "interact", "summarize", "ball",
    ),
}  # fmt: skip
# Off the faces, each in the module that defines it (a sample of every kind: states,
# hyperparameter classes and builders, metrics, helpers, errors).
OFF_FACE = [
    ("bandits_jax.mlogb", "bandits_jax.mlogb.eofd", "EOFDState"),
    ("bandits_jax.mlogb", "bandits_jax.mlogb.hparams", "MLogBHyperparams"),
    ("bandits_jax.mlogb", "bandits_jax.mlogb.linucb", "linucb_hyperparams"),
    ("bandits_jax.mlogb", "bandits_jax.mlogb.interact", "MLogBMetrics"),
    ("bandits_jax.mlogb", "bandits_jax.mlogb.recipes", "Tuned"),
    ("bandits_jax.bco", "bandits_jax.bco.two_point", "TwoPointState"),
    ("bandits_jax.bco", "bandits_jax.bco.rounds", "BCOMetrics"),
    ("bandits_jax.bco", "bandits_jax.bco.estimators", "coordinate_estimate"),
    ("bandits_jax.bco", "bandits_jax.bco.schedules", "VariationSchedule"),
    ("bandits_jax.envs", "bandits_jax.envs.synthetic_mlogb", "SyntheticState"),
    ("bandits_jax.envs", "bandits_jax.envs.mnist", "MNISTNotFoundError"),
    ("bandits_jax.sim", "bandits_jax.sim.runner", "play"),
    ("bandits_jax.sim", "bandits_jax.sim.checkpoint", "CheckpointError"),
]


@pytest.mark.parametrize("name", PACKAGES)
def test_public_names_import(name):
    mod = importlib.import_module(name)
    assert mod.__all__, name
    for attr in mod.__all__:
        assert getattr(mod, attr) is not None, f"{name}.{attr}"


def test_the_faces_hold_at_most_100_names_and_nothing_else():
    """At most 100 names on the faces in all; a face's public attributes are its ``__all__``
    (and its submodules): what is not listed is not there."""
    total = 0
    for name in FACES:
        mod = importlib.import_module(name)
        assert len(set(mod.__all__)) == len(mod.__all__), name
        total += len(mod.__all__)
        extra = {
            n
            for n, v in vars(mod).items()
            if not n.startswith("_") and not inspect.ismodule(v) and n not in mod.__all__
        }
        assert not extra, f"{name}: public but not in __all__: {sorted(extra)}"
    assert total <= MAX_FACE_NAMES, total


def test_contract_names():
    for name, attrs in CONTRACT.items():
        mod = importlib.import_module(name)
        for attr in attrs:
            assert attr in mod.__all__, f"{name}.{attr}"
    from bandits_jax import bco, mlogb

    for attr in ("eofd", "oful", "hyperparams", "section4", "interact"):
        assert callable(getattr(mlogb, attr))
    assert callable(bco.from_preset) and "alg1_thm3" in bco.PRESETS


@pytest.mark.parametrize(("face", "home", "attr"), OFF_FACE)
def test_names_off_the_faces_stay_in_their_modules(face, home, attr):
    assert attr not in importlib.import_module(face).__all__
    assert not hasattr(importlib.import_module(face), attr)
    obj = getattr(importlib.import_module(home), attr)
    assert getattr(obj, "__module__", home) == home


def test_one_learner_shape_in_both_families():
    """``interact`` is a function in both families' packages, and every learner carries its one
    hyperparameter builder, ``learner.hyperparams``."""
    import inspect

    from bandits_jax import bco, mlogb
    from bandits_jax.mlogb.linucb import linucb_hyperparams

    assert inspect.isfunction(mlogb.interact) and inspect.isfunction(bco.interact)
    from bandits_jax.bco import interact

    assert interact is bco.interact
    learners = [
        mlogb.eofd(num_outcomes=2, dim=3, sketch_size=2),
        mlogb.oful(num_outcomes=2, dim=3),
        mlogb.linucb(num_outcomes=1, dim=3),
        bco.two_point_learner(dim=3),
        bco.box_ftrl(dim=3),
        bco.dynamic_ensemble(dim=3),
    ]
    for learner in learners:
        assert callable(learner.hyperparams)
    assert learners[0].hyperparams is mlogb.hyperparams
    assert learners[2].hyperparams is linucb_hyperparams


def test_a_factory_named_like_a_module_stays_the_factory():
    """``envs.mnist`` is the environment factory, before and after its reader module
    ``bandits_jax.envs.mnist`` is imported by name."""
    from bandits_jax import envs

    reader = importlib.import_module("bandits_jax.envs.mnist")
    from bandits_jax.envs.classification import mnist

    assert envs.mnist is mnist and inspect.isfunction(envs.mnist)
    assert inspect.ismodule(reader) and hasattr(reader, "load_mnist")


def test_no_module_imports_another_modules_private_name():
    """A name with a leading underscore stays in its module: no ``from bandits_jax.x import _y``
    anywhere in the package (a helper two modules share is public in one of them)."""
    root = pathlib.Path(importlib.import_module("bandits_jax").__file__).parent
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("bandits_jax"):
                found += [f"{path.name}: {a.name}" for a in node.names if a.name.startswith("_")]
    assert not found, found
