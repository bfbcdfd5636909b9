"""Bad options: one line on stderr, exit status 2, no traceback, and no JAX work started."""

import json
import zipfile

import pytest

from bandits_jax import cli
from bandits_jax.cli import cache, reproduce
from bandits_jax.cli import options as opt
from bandits_jax.sim import chunks


@pytest.fixture(autouse=True)
def no_runs(monkeypatch):
    """Validation must fail before anything is compiled or played."""

    def forbidden(*args, **kwargs):
        raise AssertionError("a chunk was compiled before the options were validated")

    monkeypatch.setattr(chunks.ChunkFn, "compiled", forbidden)


def run_bad(argv, capsys):
    rc = cli.main(argv)
    err = capsys.readouterr().err
    lines = [x for x in err.splitlines() if x.strip()]
    return rc, lines


CASES = [
    (["reproduce", "--rounds", "0"], "--rounds"),
    (["reproduce", "--rounds", "-3"], "--rounds"),
    (["reproduce", "--trials", "0"], "--trials"),
    (["reproduce", "--batch", "0"], "--batch"),
    (["reproduce", "--batch", "two"], "--batch"),
    (["reproduce", "--sketch", "0"], "--sketch"),
    (["reproduce", "--chunk", "0"], "--chunk"),
    (["reproduce", "--chunk", "-5"], "--chunk"),
    (["reproduce", "--devices", "0"], "--devices"),
    (["reproduce", "--seed", "-1"], "--seed"),
    (["reproduce", "--S", "-1"], "--S"),
    (["reproduce", "--S", "inf"], "--S"),
    (["reproduce", "--learners", "eofd-paper", "--l", "nan"], "--l"),
    (["reproduce", "--learners", "oful-paper", "--beta", "-1"], "--beta"),
    (["reproduce", "--learners", "eofd-paper", "--beta", "nan"], "--beta"),
    (["reproduce", "--learners", "eofd-paper", "--beta", "optimistic"], "--beta"),
    (["reproduce", "--settings", "bco-linear-3"], "--settings"),
    (["reproduce", "--learners", "eofd,eofd"], "--learners"),
    (["reproduce", "--learners", "eofd,linucbx"], "--learners"),
    (["reproduce", "--learners", ","], "--learners"),
    (["reproduce", "--settings", "synth-0-1"], "--settings"),
    (["reproduce", "--settings", "cifar"], "--settings"),
    (["reproduce", "--rounds", "ten"], "--rounds"),
    (["reproduce", "--bogus"], "--bogus"),
    (["sweep", "--l-grid", ","], "--l-grid"),
    (["sweep", "--e-grid", "0,x"], "--e-grid"),
    (["sweep", "--l-grid", "0,inf"], "--l-grid"),
    (["sweep", "--beta-grid", ""], "--beta-grid"),
    (["sweep", "--beta-grid", "theory,-2"], "--beta-grid"),
    (["sweep", "--trials", "0"], "--trials"),
    (["sweep", "--eval-trials", "-1"], "--eval-trials"),
    (["sweep", "--select", "best"], "--select"),
    (["sweep", "--learners", "nope"], "--learners"),
    (["sweep", "--learners", "alg1_thm3"], "family"),  # no BCO setting in --settings
    (["sweep", "--settings", "bco-cubic-3", "--learners", "alg1_thm3"], "--settings"),
    (["sweep", "--settings", "bco-linear-3", "--learners", "sphere", "--scale-grid", "0"],
     "--scale-grid"),
    (["bco", "--study", "both,dimension"], "--study"),
    (["bco", "--dims", "2.5"], "--dims"),
    (["bco", "--amplitudes", "-1"], "--amplitudes"),
    (["bco", "--learners", "oful"], "--learners"),
    (["bco", "--rounds", "0"], "--rounds"),
]  # fmt: skip


@pytest.mark.parametrize("argv,needle", CASES, ids=[" ".join(c[0]) for c in CASES])
def test_bad_option_is_one_line(argv, needle, tmp_path, capsys):
    rc, lines = run_bad([*argv, "--out", str(tmp_path / "out"), "--quiet"], capsys)
    assert rc == 2
    assert len(lines) == 1, lines
    assert lines[0].startswith("bandits-jax: error: ") and needle in lines[0]
    assert not (tmp_path / "out").exists()  # nothing created before validation passed


def test_several_errors_one_line_each(tmp_path, capsys):
    rc, lines = run_bad(
        ["reproduce", "--rounds", "0", "--trials", "0", "--out", str(tmp_path)], capsys
    )
    assert rc == 2 and len(lines) == 2
    assert "--rounds" in lines[0] and "--trials" in lines[1]


@pytest.mark.parametrize(
    "cfg,needle",
    [
        ({"float32": "false"}, "float32"),  # a string is not a boolean (it would be truthy)
        ({"rounds": "10"}, "rounds"),
        ({"rounds": 2.5}, "rounds"),
        ({"trials": True}, "trials"),
        ({"l-grid": []}, "l-grid"),
        ({"l-grid": [0.5, None]}, "l-grid"),
        ({"S": "big"}, "S"),
        ({"bogus": 1}, "bogus"),
        ({"rounds": 0}, "--rounds"),  # well-typed but out of range: the same check as argv
    ],
)
def test_bad_config_is_one_line(cfg, needle, tmp_path, capsys):
    path = tmp_path / "cfg.json"
    path.write_text(json.dumps(cfg))
    rc, lines = run_bad(["sweep", "--config", str(path), "--out", str(tmp_path / "o")], capsys)
    assert rc == 2 and len(lines) == 1 and needle in lines[0], lines


def test_config_not_an_object_or_not_json(tmp_path, capsys):
    for text in ("[1, 2]", "{not json"):
        path = tmp_path / "cfg.json"
        path.write_text(text)
        rc, lines = run_bad(["sweep", "--config", str(path), "--out", str(tmp_path)], capsys)
        assert rc == 2 and len(lines) == 1 and "--config" in lines[0]


def test_unwritable_out(tmp_path, capsys):
    blocker = tmp_path / "a_file"
    blocker.write_text("x")
    rc, lines = run_bad(["reproduce", "--out", str(blocker / "sub"), "--quiet"], capsys)
    assert rc == 2 and len(lines) == 1 and "--out" in lines[0]


def test_missing_mnist(tmp_path, capsys, monkeypatch):
    rc, lines = run_bad(["reproduce", "--mnist", str(tmp_path / "nowhere")], capsys)
    assert rc == 2 and len(lines) == 1 and "--mnist" in lines[0]
    empty = tmp_path / "empty"
    empty.mkdir()
    rc, lines = run_bad(["reproduce", "--mnist", str(empty), "--out", str(tmp_path)], capsys)
    assert rc == 2 and len(lines) == 1 and "--mnist" in lines[0] and "not found" in lines[0]
    monkeypatch.setenv("BANDITS_JAX_DATA", str(empty))  # the mnist setting asked for by name
    rc, lines = run_bad(["reproduce", "--settings", "mnist", "--out", str(tmp_path)], capsys)
    assert rc == 2 and len(lines) == 1 and "mnist" in lines[0]


def test_garbage_mnist_npz(tmp_path, capsys, monkeypatch):
    bad = tmp_path / "mnist.npz"
    with zipfile.ZipFile(bad, "w") as z:  # a zip, truncated below
        z.writestr("x_train.npy", b"\x00" * 1000)
    bad.write_bytes(bad.read_bytes()[:300])
    rc, lines = run_bad(["reproduce", "--mnist", str(bad), "--out", str(tmp_path / "o")], capsys)
    assert rc == 2 and len(lines) == 1 and str(bad) in lines[0]


@pytest.mark.parametrize("garbage", [b"not a zip at all", b"PK\x03\x04truncated"])
def test_garbage_mnist_in_default_cache_is_skipped(garbage, tmp_path, capsys, monkeypatch):
    # The user did not ask for MNIST: a plain reproduce warns once and runs without it.
    cache = tmp_path / "data" / "mnist"
    cache.mkdir(parents=True)
    (cache / "mnist.npz").write_bytes(garbage)
    monkeypatch.setenv("BANDITS_JAX_DATA", str(tmp_path / "data"))
    parser = cli.build_parser()
    args = parser.parse_args(["reproduce", "--quick", "--out", str(tmp_path / "o")])
    args.module.validate(args)
    err = [x for x in capsys.readouterr().err.splitlines() if x.strip()]
    assert len(err) == 1 and err[0].startswith("bandits-jax: warning:") and "MNIST" in err[0]
    assert args.plan["settings"] == list(reproduce.DEFAULT_SETTINGS)
    assert any("MNIST skipped" in n for n in args.plan["notes"])


def test_negative_grid_values_without_equals(tmp_path):
    parser = cli.build_parser()
    argv = ["sweep", "--l-grid", "-0.5,0", "--e-grid", "-.25", "--out", str(tmp_path)]
    argv = opt.join_negative_values(argv, opt.value_options(parser))
    args = parser.parse_args(argv)
    args.module.validate(args)
    assert args.plan["ls"] == [-0.5, 0.0] and args.plan["es"] == [-0.25]
    args = parser.parse_args(["reproduce", "--l", "-0.5", "--out", str(tmp_path)])
    assert args.l == -0.5


def test_join_negative_values_only_after_value_options():
    opts = {"--l-grid", "--out"}
    assert opt.join_negative_values(["--l-grid", "-0.5,0", "--quiet"], opts) == [
        "--l-grid=-0.5,0",
        "--quiet",
    ]
    assert opt.join_negative_values(["--quiet", "-1"], opts) == ["--quiet", "-1"]
    assert opt.join_negative_values(["--out", "-dir"], opts) == ["--out", "-dir"]


def test_config_values_typed(tmp_path):
    parser = cli.build_parser()
    path = tmp_path / "cfg.json"
    path.write_text(json.dumps({"float32": False, "rounds": 7, "l-grid": [-0.5, 0], "S": 2}))
    args = opt.apply_config(parser, parser.subcommands["sweep"], ["sweep", "--config", str(path)])
    assert args.float32 is False and args.rounds == 7 and args.l_grid == "-0.5,0"
    assert args.S == 2.0
    # the command line wins over the file
    args = opt.apply_config(
        parser, parser.subcommands["sweep"], ["sweep", "--config", str(path), "--rounds", "3"]
    )
    assert args.rounds == 3


def test_unwritable_compile_cache(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("")
    argv = ["reproduce", "--compile-cache", str(blocker / "xla"), "--out", str(tmp_path / "o")]
    rc, lines = run_bad(argv, capsys)
    assert rc == 2 and len(lines) == 1 and "--compile-cache" in lines[0]


def test_compile_cache_dir_default_and_off(tmp_path, monkeypatch):
    parser = cli.build_parser()
    monkeypatch.setenv("BANDITS_JAX_DATA", str(tmp_path))
    monkeypatch.delenv(cache.ENV, raising=False)
    args = parser.parse_args(["reproduce"])
    assert cache.cache_dir(args) == tmp_path / "xla"
    args = parser.parse_args(["reproduce", "--compile-cache", "off"])
    assert cache.cache_dir(args) is None
    # The environment variable: a directory or off; the option wins over it.
    monkeypatch.setenv(cache.ENV, str(tmp_path / "env"))
    assert cache.cache_dir(parser.parse_args(["reproduce"])) == tmp_path / "env"
    monkeypatch.setenv(cache.ENV, "off")
    assert cache.cache_dir(parser.parse_args(["reproduce"])) is None
    args = parser.parse_args(["reproduce", "--compile-cache", str(tmp_path / "opt")])
    assert cache.cache_dir(args) == tmp_path / "opt"


def test_out_in_use_by_another_process(tmp_path, capsys):
    import os

    (tmp_path / ".bandits-jax.lock").write_text(str(os.getpid()))  # a live process holds it
    rc, lines = run_bad(["reproduce", "--out", str(tmp_path)], capsys)
    assert rc == 2 and len(lines) == 1 and "in use by process" in lines[0]


@pytest.mark.parametrize("command", ["reproduce", "kappa", "sweep"])
def test_learners_are_exactly_the_registry_kinds(command, tmp_path, capsys):
    """``--learners`` takes the registry's kinds and nothing else (no old name, no alias): one
    line per unknown name, listing the accepted kinds (exit status 2, nothing created)."""
    from bandits_jax.mlogb.recipes import KINDS

    rc, lines = run_bad([command, "--learners", "eofd-tuned,eofd,oful-tuned",
                         "--out", str(tmp_path / "o"), "--quiet"], capsys)  # fmt: skip
    assert rc == 2 and len(lines) == 2, lines
    for line, name in zip(lines, ("eofd-tuned", "oful-tuned"), strict=True):
        assert f"unknown learner {name!r}" in line and str(list(KINDS))[:-1] in line
    assert not (tmp_path / "o").exists()


UNUSED = [  # an option that does nothing for the chosen learners or settings: refused
    (["reproduce", "--learners", "eofd,oful", "--l", "0.5"], "--l", "paper's kinds"),
    (["reproduce", "--e", "0.5"], "--e", "paper's kinds"),  # the default learners: tuned kinds
    (["reproduce", "--learners", "linucb", "--beta", "order"], "--beta", "paper's kinds"),
    (["reproduce", "--learners", "linucb,oful", "--sketch", "4"], "--sketch", "sketched"),
    (["kappa", "--no-tune", "--l-grid", "0"], "--l-grid", "--no-tune"),
    (["kappa", "--no-tune", "--trials", "3"], "--trials", "--no-tune"),
    (["kappa", "--learners", "uniform", "--sketch", "2"], "--sketch", "sketched"),
    (["bco", "--study", "variation", "--dims", "3,4"], "--dims", "variation"),
    (["bco", "--study", "dimension", "--noise", "0.1"], "--noise", "dimension"),
    (["bco", "--tune-trials", "2"], "--tune-trials", "nothing tuned"),
    (["sweep", "--settings", "bco-linear-2", "--learners", "sphere", "--beta-grid", "0.1"],
     "--beta-grid", "no MLogB learner"),
    (["sweep", "--settings", "bco-linear-2", "--learners", "sphere", "--S", "2"], "--S",
     "no MLogB learner"),
    (["sweep", "--learners", "eofd", "--scale-grid", "1,2"], "--scale-grid", "no BCO learner"),
    (["sweep", "--learners", "linucb", "--sketch", "3"], "--sketch", "sketched"),
]  # fmt: skip


@pytest.mark.parametrize("argv,option,why", UNUSED, ids=[" ".join(u[0]) for u in UNUSED])
def test_an_option_that_does_nothing_is_refused(argv, option, why, tmp_path, capsys):
    rc, lines = run_bad([*argv, "--out", str(tmp_path / "o"), "--quiet"], capsys)
    assert rc == 2 and len(lines) == 1, lines
    assert lines[0].startswith(f"bandits-jax: error: {option}: ") and why in lines[0]
    assert not (tmp_path / "o").exists()
    # the same option given where it acts is accepted (the paper's kinds, a sketched learner,
    # the tuned column, the study that uses it, several scales, an MLogB or BCO learner)
    both = ["--learners", "sphere,eofd", "--settings", "bco-linear-2,synth-3-1"]
    fixes = {"--l": ["--learners", "eofd-paper"], "--e": ["--learners", "oful-paper"],
             "--beta": ["--learners", "eofd-paper"], "--sketch": ["--learners", "eofd"],
             "--l-grid": ["--tune"], "--trials": ["--tune"], "--dims": ["--study", "both"],
             "--noise": ["--study", "both"], "--tune-trials": ["--scale-grid", "1,2"],
             "--beta-grid": both, "--S": both, "--scale-grid": both}  # fmt: skip
    fixed = [*argv, *fixes[option], "--out", str(tmp_path / "ok")]
    if option in ("--l-grid", "--trials"):
        fixed.remove("--no-tune")
    parser = cli.build_parser()
    args = parser.parse_args(opt.join_negative_values(fixed, opt.value_options(parser)))
    args.module.validate(args)  # no UsageError
