"""Each subcommand's ``--help`` lists only options it takes; ``--config`` keys in any spelling;
the BCO table's V_T columns in increasing order. Parsing and validation only: nothing runs."""

import json
import os
import re

import pytest

from bandits_jax import cli
from bandits_jax.cli import bco, tables
from bandits_jax.cli import options as opt
from bandits_jax.sim import chunks

COMMANDS = ("reproduce", "sweep", "bco", "kappa", "bench")
MLOGB_ONLY = ("--S", "--mnist", "--sketch")  # options of MLogB learners and settings

# A valid value per option (``[]``: a flag), and the attribute it must set in ``args``.
COMMON = {
    "--resume": ([], "resume", True),
    "--devices": (["1"], "devices", 1),
    "--threads": (["1"], "threads", "1"),
    "--float32": ([], "float32", True),
    "--quiet": ([], "quiet", True),
    "--no-plots": ([], "plots", False),
    "--seed": (["3"], "seed", 3),
    "--chunk": (["5"], "chunk", 5),
    "--S": (["2.5"], "S", 2.5),
    "--mnist": (["mnist.npz"], "mnist", "mnist.npz"),  # parsed here, not loaded
    "--sketch": (["2"], "sketch", 2),
    "--compile-cache": (["off"], "compile_cache", "off"),
    "--xla-opt-level": (["0"], "xla_opt_level", "0"),
    "--xla-fusion-emitters": (["on"], "xla_fusion_emitters", "on"),
    "--xla-codegen-split": (["2"], "xla_codegen_split", "2"),
    "--quick": ([], "quick", True),
    "--rounds": (["7"], "rounds", 7),
    "--trials": (["2"], "trials", 2),
    "--learners": None,  # per command below
}
PER_COMMAND = {
    "reproduce": {
        "--settings": (["synth-5-2,digits"], "settings", "synth-5-2,digits"),
        "--learners": (["eofd-paper,uniform"], "learners", "eofd-paper,uniform"),
        "--l": (["-0.5"], "l", -0.5),
        "--e": (["0.5"], "e", 0.5),
        "--beta": (["order"], "beta", "order"),
        "--batch": (["3"], "batch", "3"),
    },
    "sweep": {
        "--settings": (["synth-5-2,bco-linear-2"], "settings", "synth-5-2,bco-linear-2"),
        "--learners": (["eofd,sphere"], "learners", "eofd,sphere"),
        "--l-grid": (["-0.5,0"], "l_grid", "-0.5,0"),
        "--e-grid": (["0,0.5"], "e_grid", "0,0.5"),
        "--beta-grid": (["theory,order,0.5"], "beta_grid", "theory,order,0.5"),
        "--S-grid": (["2,4"], "S_grid", "2,4"),
        "--scale-grid": (["0.5,1"], "scale_grid", "0.5,1"),
        "--eval-trials": (["3"], "eval_trials", 3),
        "--select": (["across"], "select", "across"),
        "--no-shard": ([], "no_shard", True),
        "--compare-loop": ([], "compare_loop", True),
        "--max-memory": (["512M"], "max_memory", "512M"),
        "--microbatch": (["2"], "microbatch", 2),
    },
    "bco": {
        "--study": (["both"], "study", "both"),
        "--dims": (["2,4"], "dims", "2,4"),
        "--d-variation": (["3"], "d_variation", 3),
        "--amplitudes": (["0,0.1"], "amplitudes", "0,0.1"),
        "--noise": (["0.1"], "noise", 0.1),
        "--learners": (["alg1_thm3,sphere"], "learners", "alg1_thm3,sphere"),
        "--scale-grid": (["0.5,1"], "scale_grid", "0.5,1"),
        "--tune-trials": (["2"], "tune_trials", 2),
    },
    "kappa": {
        "--S-grid": (["1,2"], "S_grid", "1,2"),
        "--dim": (["4"], "dim", 4),
        "--num-outcomes": (["2"], "num_outcomes", 2),
        "--learners": (["eofd-robust,uniform"], "learners", "eofd-robust,uniform"),
        "--no-tune": ([], "tune", False),
        "--tune": ([], "tune", True),
        "--l-grid": (["-0.5"], "l_grid", "-0.5"),
        "--e-grid": (["0"], "e_grid", "0"),
        "--beta-grid": (["0.1"], "beta_grid", "0.1"),
        "--eval-trials": (["2"], "eval_trials", 2),
    },
    "bench": {},
}
NOT_VALIDATED = {"--mnist", "--config", "--resume"}  # need files or checkpoints: parsed only
NOT_VALIDATED_WITH = {"sweep": {"--S"}}  # --S and --S-grid exclude each other


@pytest.fixture(autouse=True)
def no_runs(monkeypatch):
    def forbidden(*args, **kwargs):
        raise AssertionError("a chunk was compiled: help and validation must not run anything")

    monkeypatch.setattr(chunks.ChunkFn, "compiled", forbidden)


def help_text(command, capsys):
    with pytest.raises(SystemExit) as stop:
        cli.main([command, "--help"])
    assert stop.value.code == 0
    return capsys.readouterr().out


def listed_options(text):
    """The long options of a ``--help`` text's option list (first column)."""
    found = []
    for line in text.splitlines():
        m = re.match(r"^  (-[-\w]+)", line)
        if m:
            found += [s.split()[0] for s in line.strip().split(", ") if s.startswith("--")]
    return [f for f in dict.fromkeys(found) if f != "--help"]


def parse(parser, argv):
    """As ``main`` parses: ``--l-grid -0.5,0`` joined into one argument first."""
    return parser.parse_args(opt.join_negative_values(argv, opt.value_options(parser)))


def valid_value(command, flag, tmp_path):
    if flag == "--out":
        return [str(tmp_path / "out")], "out", str(tmp_path / "out")
    if flag == "--config":
        path = tmp_path / "cfg.json"
        path.write_text("{}")
        return [str(path)], "config", str(path)
    return PER_COMMAND[command].get(flag) or COMMON[flag]


@pytest.mark.parametrize("command", COMMANDS)
def test_every_listed_option_is_accepted(command, tmp_path, capsys):
    text = help_text(command, capsys)
    listed = listed_options(text)
    parser = cli.build_parser()
    sub = parser.subcommands[command]
    # the help lists exactly the parser's options
    own = {s for a in sub._actions for s in a.option_strings if s.startswith("--")} - {"--help"}
    assert set(listed) == own
    validated = [command]
    for flag in listed:
        assert flag in PER_COMMAND[command] or flag in COMMON or flag in ("--out", "--config"), (
            f"{command} {flag}: no test value"
        )
        argv, dest, expected = valid_value(command, flag, tmp_path)
        args = parse(parser, [command, flag, *argv])  # Parser: a bad option raises
        assert getattr(args, dest) == expected, (command, flag)
        skip = NOT_VALIDATED | NOT_VALIDATED_WITH.get(command, set()) | {"--no-tune"}
        if flag not in skip:  # (--tune: --no-tune refuses the grids, which do nothing then)
            validated += [flag, *argv]
    # every listed option at once passes the command's validation (bench: outside a checkout
    # it says so; here the benchmarks are next to the package)
    args = parse(parser, validated)
    args.module.validate(args)
    assert args.plan is not None


@pytest.mark.parametrize("command", ["bco", "bench"])
def test_mlogb_only_options_not_listed(command, tmp_path, capsys):
    text = help_text(command, capsys)
    for flag in MLOGB_ONLY:
        assert flag not in listed_options(text) and f"[{flag} " not in text, (command, flag)
        # and refused: one error line, exit status 2, nothing created
        assert cli.main([command, flag, "2", "--out", str(tmp_path / "o")]) == 2
        err = [x for x in capsys.readouterr().err.splitlines() if x.strip()]
        assert len(err) == 1 and err[0].startswith("bandits-jax: error:") and flag in err[0]
        assert not (tmp_path / "o").exists()


def test_option_groups_per_command(capsys):
    for command in COMMANDS:
        text = help_text(command, capsys)
        # argparse formats help with %: a stray one prints the action's fields instead
        assert "option_strings" not in text, command
        listed = set(listed_options(text))
        groups = opt.COMMAND_GROUPS[command]
        for group, flag, _ in opt.COMMON_OPTIONS:
            assert (flag in listed) == (group == "base" or group in groups), (command, flag)
    assert set(MLOGB_ONLY) <= set(listed_options(help_text("reproduce", capsys)))
    assert set(MLOGB_ONLY) <= set(listed_options(help_text("sweep", capsys)))
    kappa_listed = listed_options(help_text("kappa", capsys))
    assert "--sketch" in kappa_listed and "--S" not in kappa_listed
    assert "--mnist" not in kappa_listed
    with pytest.raises(ValueError, match="command"):
        opt.add_common(opt.Parser(), "nope")


def test_help_defines_its_terms(capsys):
    text = " ".join(help_text("reproduce", capsys).split())
    assert "registry" not in text and "--learners" in text.split("options:")[0]
    assert "eq. 36" in text and "eq. 27" in text  # --beta's theory and order
    text = " ".join(help_text("sweep", capsys).split())
    grid = ",".join(f"{v:g}" for v in opt.PAPER_GRID)
    assert text.count(f"the paper's {grid}") == 2  # --l-grid and --e-grid
    assert "eq. 36" in text and "eq. 27" in text  # --beta-grid


def _config_args(command, cfg, tmp_path, name):
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(cfg))
    parser = cli.build_parser()
    args = opt.apply_config(parser, parser.subcommands[command], [command, "--config", str(path)])
    out = vars(args)
    out.pop("config")
    return out


@pytest.mark.parametrize(
    "command,spellings",
    [
        (
            "sweep",
            [
                {"no-plots": True, "S-grid": [2, 4], "eval-trials": 3, "compile-cache": "off"},
                {"no_plots": True, "S_grid": [2, 4], "eval_trials": 3, "compile_cache": "off"},
                {"plots": False, "S_grid": "2,4", "eval_trials": 3, "--compile-cache": "off"},
            ],
        ),
        (
            "kappa",
            [
                {"no-tune": True, "num-outcomes": 2, "float32": True, "sketch": 3},
                {"no_tune": True, "num_outcomes": 2, "float32": True, "sketch": 3},
                {"tune": False, "num_outcomes": 2, "float32": True, "sketch": 3},
            ],
        ),
    ],
)
def test_config_spellings_give_the_same_args(command, spellings, tmp_path):
    got = [_config_args(command, cfg, tmp_path, f"c{i}") for i, cfg in enumerate(spellings)]
    assert got[0] == got[1] == got[2]
    default = _config_args(command, {}, tmp_path, "empty")
    changed = {k for k in got[0] if got[0][k] != default[k]}
    assert changed >= {"plots", "S_grid", "eval_trials"} or changed >= {"tune", "num_outcomes"}
    if command == "sweep":
        assert got[0]["plots"] is False and got[0]["S_grid"] == "2,4"
        # a flag's key reads as the flag: "no-plots": false leaves the plots on
        assert _config_args(command, {"no-plots": False}, tmp_path, "f")["plots"] is True
        assert _config_args(command, {"plots": True}, tmp_path, "t")["plots"] is True
    else:
        assert got[0]["tune"] is False and got[0]["num_outcomes"] == 2


@pytest.mark.parametrize(
    "cfg,needle",
    [
        ({"no-plotz": True}, "'no-plotz'"),
        ({"mnist": "x"}, "'mnist'"),  # kappa has no --mnist
        ({"config": "other.json"}, "'config'"),
        ({"tune": True, "no-tune": True}, "same option"),
        ({"no_tune": "yes"}, "no_tune"),
    ],
)
def test_config_bad_key_is_one_line(cfg, needle, tmp_path, capsys):
    path = tmp_path / "cfg.json"
    path.write_text(json.dumps(cfg))
    assert cli.main(["kappa", "--config", str(path), "--out", str(tmp_path / "o")]) == 2
    err = [x for x in capsys.readouterr().err.splitlines() if x.strip()]
    assert len(err) == 1 and err[0].startswith("bandits-jax: error:") and needle in err[0], err
    assert not (tmp_path / "o").exists()


def _variation_result(V_T, means):
    n = len(V_T)
    per = {
        "amplitude": [0.0] * n,
        "noise": [0.0] * (n - 1) + [0.3],
        "V_T": V_T,
        "mean": means,
        "std": [0.0] * n,
        "regret": [[m, m] for m in means],
        "rejected": [0] * n,
        "max_steps": [0] * n,
        "slope_vs_V_T": 0.5,
        "slope_vs_V_T_top": 0.5,
    }
    return {
        "config": {"T": 10, "seeds": 2, "d_variation": 3, "dtype": "float64", "backend": "cpu"},
        "variation": {"convex": {"a": per, "b": {**per, "mean": [2 * m for m in means]}}},
    }


def test_bco_table_V_T_columns_increase():
    # amplitudes 0, 0.1, 0.01, 1 and the i.i.d.-noise point last (V_T between): out of order
    V_T = [0.0, 28.0, 0.28, 2800.0, 5.0]
    means = [1.0, 40.0, 4.0, 400.0, 10.0]
    text = tables.bco_summary(_variation_result(V_T, means))
    lines = text.splitlines()
    i = next(k for k, line in enumerate(lines) if line.startswith("V_T "))
    header = [float(x) for x in lines[i].split()[1 : 1 + len(V_T)]]
    assert header == sorted(V_T)
    row_a = [float(x) for x in lines[i + 1].split()[1 : 1 + len(V_T)]]
    row_b = [float(x) for x in lines[i + 2].split()[1 : 1 + len(V_T)]]
    assert row_a == sorted(means) and row_b == [2 * m for m in sorted(means)]  # kept with V_T
    assert tables.variation_order([3.0, float("nan"), 1.0]) == [2, 0, 1]  # NaN last


def test_bco_table_from_the_study_order():
    """The study's own point order (amplitudes, then the noise point) gives increasing columns
    whatever the noise point's V_T."""
    amps = [float(a) for a in bco.QUICK["amplitudes"].split(",")]
    V_T = [2.8 * a * a * 100 for a in amps] + [7.0]  # V_T ~ 2.8 a^2 T, noise point anywhere
    text = tables.bco_summary(_variation_result(V_T, list(range(1, len(V_T) + 1))))
    line = next(x for x in text.splitlines() if x.startswith("V_T "))
    cols = [float(x) for x in line.split()[1 : 1 + len(V_T)]]
    assert cols == sorted(cols) and len(cols) == len(V_T)


def test_commands_without_an_option_have_no_attribute():
    # validation reads what a command lacks as None (getattr), never a stale default
    parser = cli.build_parser()
    args = parser.parse_args(["kappa", "--sketch", "2"])
    assert args.sketch == 2 and not hasattr(args, "S") and not hasattr(args, "mnist")
    args = parser.parse_args(["bench"])
    assert not hasattr(args, "seed") and not hasattr(args, "sketch") and args.plots is True


def test_no_abbreviated_options(capsys):
    """``kappa --S 2`` is an error (kappa has no --S), not ``--S-grid 2``."""
    from bandits_jax.cli import main

    assert main(["kappa", "--S", "2", "--quick"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--S" in err[0]


def test_xla_options_auto_are_level_0_for_quick_runs_classic_emitters_and_a_split_per_core():
    parser = cli.build_parser()
    quick = parse(parser, ["reproduce", "--quick"])
    full = parse(parser, ["reproduce"])
    fixed = parse(parser, ["reproduce", "--quick", "--xla-opt-level", "default"])
    split = {"xla_cpu_parallel_codegen_split_count": len(os.sched_getaffinity(0))}
    classic = {"xla_cpu_use_fusion_emitters": False, **split}
    assert opt.compiler_options(quick) == {"xla_backend_optimization_level": 0, **classic}
    assert opt.compiler_options(full) == classic and opt.compiler_options(fixed) == classic
    xla_own = ["--xla-fusion-emitters", "on", "--xla-codegen-split", "default"]
    assert opt.compiler_options(parse(parser, ["reproduce", *xla_own])) is None
    assert opt.compiler_options(parse(parser, ["sweep", "--xla-opt-level", "2", *xla_own])) == {
        "xla_backend_optimization_level": 2
    }
    three = parse(parser, ["bco", "--xla-fusion-emitters", "on", "--xla-codegen-split", "3"])
    assert opt.compiler_options(three) == {"xla_cpu_parallel_codegen_split_count": 3}


@pytest.mark.parametrize("bad", ["0", "-1", "two", "1.5"])
def test_a_bad_codegen_split_is_one_line_and_exit_2(bad, capsys):
    assert cli.main(["reproduce", "--quick", f"--xla-codegen-split={bad}"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--xla-codegen-split" in err[0] and bad in err[0]


def test_default_chunks_are_a_tenth_of_the_run_but_at_least_min_chunk_rounds():
    for T in (1, 7, opt.MIN_CHUNK, 250, 1000, 2000, 5000, 7919):
        c = opt.chunk_size(T, None)
        assert min(T, opt.MIN_CHUNK) <= c <= T
        assert c == T or c >= max(opt.MIN_CHUNK, T // 20)
    assert opt.chunk_size(200, None) == 200  # the quick run: one chunk per trial
    assert opt.chunk_size(2000, None) == 200 and opt.chunk_size(5000, None) == 500
    assert opt.chunk_size(2000, 7) == 7 and opt.chunk_size(5, 7) == 5
