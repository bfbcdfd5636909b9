"""``bandits-jax``: the EOFD-MLogB paper's experiments, the BCO paper's studies, sweeps, benchmarks.

Subcommands (each writes PNG figures, JSON/CSV numbers and a text summary to ``--out DIR``,
default ``./results``, and prints where):

* ``reproduce`` (:mod:`.reproduce`) -- the paper's Figures 1 and 2 (section 4): cumulative regret
  with one-std bands over trials and per-round time bars for the kinds of the library's registry
  (``--learners``, :data:`bandits_jax.mlogb.recipes.KINDS`) on the settings (docs/command.md);
  ``--quick`` is a reduced run of a minute or two on a laptop CPU.
* ``sweep`` (:mod:`.sweep`) -- learners x grid x trials x settings in one compiled call, tuned
  honestly (best on tuning seeds, reported on separate evaluation seeds).
* ``bco`` (:mod:`.bco`) -- the BCO paper's studies: regret vs d and vs the gradient variation.
* ``kappa`` (:mod:`.kappa`) -- final regret vs the parameter bound S (kappa ~ exp(S)), per
  learner out of the box and tuned per S.
* ``bench`` (:mod:`.bench`) -- the speed benchmarks of a source checkout, into ``bench.csv``.

Every option is validated before any work starts (:mod:`.options`): one line per problem on
stderr (``bandits-jax: error: ...``), exit status 2. Runs are played in chunks of rounds with a
progress bar and a checkpoint after each chunk (``DIR/checkpoints``); ``--resume`` continues an
interrupted run bit-identically; a checkpoint that does not match is one error line too.

Compiled chunks go to JAX's persistent compilation cache (``--compile-cache DIR|off``,
:func:`.options.compile_cache_dir`, keyed by :func:`.options.source_key`); the process settings
(:mod:`.process`: ``--threads``, ``--xla-*`` as ``XLA_FLAGS``) apply once before JAX starts;
docs/command.md has both.

Settings: the names of :func:`bandits_jax.envs.make` (docs/command.md). On classification data
the learners get no bound S unless ``--S`` is given: each kind's no-bound rule
(:data:`bandits_jax.mlogb.recipes.RULES`) chooses its own. An option that does nothing for the
chosen learners or settings is refused (exit status 2), never ignored.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import shlex
import sys
from collections.abc import Sequence
from typing import Any

from bandits_jax.cli import bco, bench, kappa, process, reproduce, sweep
from bandits_jax.cli.options import (
    COMPILE_CACHE_ENV,
    EVAL_SEED_OFFSET,
    PAPER_GRID,
    Parser,
    UsageError,
    add_common,
    apply_config,
    compile_cache_path,
    compiler_options,
    join_negative_values,
    value_options,
)
from bandits_jax.cli.reproduce import DEFAULT_SETTINGS, make_setting

__all__ = ["main", "build_parser", "PAPER_GRID", "DEFAULT_SETTINGS", "EVAL_SEED_OFFSET",
           "UsageError", "make_setting"]  # fmt: skip


COMMANDS = {"reproduce": reproduce, "sweep": sweep, "bco": bco, "kappa": kappa, "bench": bench}
HELP = {
    "reproduce": (
        "the paper's Figures 1-2 (regret curves, per-round time)",
        "The MLogB learners of --learners (EOFD-MLogB against OFUL-MLogB and baselines; defaults "
        "below) on the settings of --settings: cumulative regret (mean, one-std band over "
        "trials) and per-round time bars.",
    ),
    "sweep": (
        "learners x grid x trials x settings in one compiled call",
        "A hyperparameter sweep in one compiled call (sharded over all devices), tuned on "
        "tuning seeds and reported on separate evaluation seeds.",
    ),
    "bco": (
        "the BCO paper's studies: regret vs d and vs the gradient variation V_T",
        "Algorithm 1 (theorem schedules), the Chiang et al. 2013 rate and the sphere estimator on "
        "drifting linear and quadratic losses: regret vs d and vs V_T with log-log slopes.",
    ),
    "kappa": (
        "final regret vs the parameter bound S (kappa ~ exp(S)), out of the box and tuned",
        "The learners of --learners on the synthetic stream for each S of --S-grid: final regret "
        "(mean +- s.e.) out of the box and tuned per S on tuning seeds, reported on evaluation "
        "seeds; growth from the smallest to the largest S.",
    ),
    "bench": (
        "speed benchmarks of a source checkout (its benchmarks/; pip installs none)",
        "Runs a source checkout's python -m benchmarks.mlogb_speed and benchmarks.bco_speed "
        "(scripts beside the package, not installed by pip: from a wheel, bench says it needs "
        "the checkout); cases in bench.csv.",
    ),
}


def dtype_of(args: argparse.Namespace) -> Any:
    import jax.numpy as jnp

    return jnp.float32 if args.float32 else jnp.float64


def say(args: argparse.Namespace, text: str) -> None:
    if not getattr(args, "quiet", False):
        print(text, flush=True)


def write_outputs(out: pathlib.Path, written: list[pathlib.Path]) -> None:
    print(f"\nResults in {out.resolve()}:")
    for p in written:
        print(f"  {p.resolve()}")


COMPILE_CACHE_MIN_SECONDS = 0.1  # programs compiled faster than this are not cached (a chunk
# compiles in 0.4-1.5 s at --quick's options: python -m benchmarks.xla_opt_level)
_CACHE_OFF = f"--compile-cache off or {COMPILE_CACHE_ENV}=off"
_CACHE_ON = f"--compile-cache DIR, or unset ${COMPILE_CACHE_ENV}"


_CACHE_EVENTS = {"asked": 0, "hits": 0}  # this run's compiles that asked the cache, hits
_LISTENING: list[bool] = []  # whether _count_cache_event is registered with JAX
_EVENT_KEYS = {
    "/jax/compilation_cache/compile_requests_use_cache": "asked",
    "/jax/compilation_cache/cache_hits": "hits",
}


def _count_cache_event(event: str, **kwargs: Any) -> None:
    key = _EVENT_KEYS.get(event)
    if key is not None:
        _CACHE_EVENTS[key] += 1


def _use_compile_cache(path: pathlib.Path | None) -> None:
    """Points JAX's persistent compilation cache at ``path`` (``None``: off). JAX opens its cache
    once per process, so a change (a second command in one process) resets it."""
    import jax
    from jax.experimental.compilation_cache import compilation_cache

    if not _LISTENING:  # once per process
        jax.monitoring.register_event_listener(_count_cache_event)
        _LISTENING.append(True)
    _CACHE_EVENTS.update(asked=0, hits=0)
    if path is not None:
        path.mkdir(parents=True, exist_ok=True)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", COMPILE_CACHE_MIN_SECONDS)
    value = None if path is None else str(path)
    if jax.config.jax_compilation_cache_dir != value:
        jax.config.update("jax_compilation_cache_dir", value)
        compilation_cache.reset_cache()


def compile_cache_report(args: argparse.Namespace) -> dict[str, Any]:
    """The compile cache now: ``dir`` (where this checkout's entries go; ``None`` when off),
    ``root`` (its parent, every checkout's entries), ``enabled``, ``entries`` (JAX's ``*-cache``
    files), ``bytes`` (all files under ``dir``), ``xla_options`` (what the programs compiled
    with: ``--xla-opt-level``, ``--xla-fusion-emitters``, ``--xla-codegen-split``; ``{}`` for
    XLA's defaults; ``None``: the calling process's own, JAX had started before the command) and
    ``programs`` (compiles asked of the cache in this process, ``hits``: served from it)."""
    path = args.compile_cache_path
    xla = getattr(args, "xla_applied", compiler_options(args) or {})
    programs = dict(_CACHE_EVENTS)
    if path is None:
        return {"dir": None, "root": None, "enabled": False, "entries": 0, "bytes": 0,
                "xla_options": xla, "programs": programs}  # fmt: skip
    entries = size = 0
    for p in path.rglob("*") if path.is_dir() else ():
        try:  # another process may evict an entry meanwhile
            if p.is_file():
                size += p.stat().st_size
                entries += p.name.endswith("-cache")
        except OSError:
            continue
    return {
        "dir": str(path),
        "root": str(path.parent),
        "enabled": True,
        "entries": entries,
        "bytes": size,
        "xla_options": xla,
        "programs": programs,
    }


def compile_cache_text(report: dict[str, Any]) -> str:
    """The summary's lines on compiling: the XLA options; the compile cache (where, how big, how
    to clear or turn it off)."""
    xla = report.get("xla_options")
    if xla is None:
        options = "\nCompiled with: the calling process's XLA options (JAX had already started)"
    else:
        level = xla.get("xla_backend_optimization_level", "XLA's default")
        emitters = "classic" if xla.get("xla_cpu_use_fusion_emitters") is False else "MLIR"
        parts = xla.get("xla_cpu_parallel_codegen_split_count", "XLA's own number of")
        options = (
            f"\nCompiled with: optimisation level {level}, {emitters} fusion emitters, machine "
            f"code in {parts} part(s) on CPU (--xla-opt-level, --xla-fusion-emitters, "
            "--xla-codegen-split)"
        )
    if not report["enabled"]:
        return f"{options}\nCompile cache: off (turn it on with {_CACHE_ON})\n"
    d, root = shlex.quote(report["dir"]), shlex.quote(report["root"])
    programs = report.get("programs") or {}
    return (
        f"{options}\nCompile cache: on, in {report['dir']}: {report['entries']} entries, "
        f"{report['bytes'] / 1e6:.1f} MB; {programs.get('hits', 0)} of "
        f"{programs.get('asked', 0)} programs of this run came from it\n"
        "  (JAX's persistent compilation cache, keyed by this checkout's source and JAX's "
        "version: it saves compiling, no result depends on it)\n"
        f"  clear: rm -rf {d} (this checkout) or rm -rf {root}/src-* (every checkout); "
        f"turn off: {_CACHE_OFF}\n"
    )


def _compile_cache_line(report: dict[str, Any]) -> str:
    """The last line on stderr: the cache in one line."""
    if not report["enabled"]:
        return f"bandits-jax: compile cache off (on: {_CACHE_ON})"
    return (
        f"bandits-jax: compile cache on: {report['dir']}, {report['entries']} entries, "
        f"{(report.get('programs') or {}).get('hits', 0)} of "
        f"{(report.get('programs') or {}).get('asked', 0)} programs from it, "
        f"{report['bytes'] / 1e6:.1f} MB; clear: rm -rf {shlex.quote(report['dir'])}; "
        f"off: {_CACHE_OFF}"
    )


def build_parser() -> Parser:
    """The ``bandits-jax`` parser; ``parser.subcommands`` maps command names to subparsers."""
    p = Parser(
        prog="bandits-jax",
        description="Reproduce the EOFD-MLogB experiments, run the BCO studies, sweeps and "
        "benchmarks.",
    )
    sub = p.add_subparsers(dest="command", required=True)
    subs = {}
    for name, module in COMMANDS.items():
        short, long = HELP[name]
        # No abbreviations: kappa's --S would silently mean --S-grid, sweep's --rounds r --r.
        s = sub.add_parser(name, help=short, description=long, allow_abbrev=False)
        add_common(s, name, module)  # the shared option groups it uses (COMMAND_GROUPS)
        module.add_arguments(s)
        s.set_defaults(module=module)
        subs[name] = s
    p.subcommands = subs  # for --config defaults and value options
    return p


# Commands whose runs are batched and sharded over host devices: by default one per idle core.
AUTO_DEVICES = ("sweep", "kappa")


def _configure_devices(n: int | None) -> None:
    if not n:
        return
    os.environ["XLA_FLAGS"] = process.host_device_flags(os.environ.get("XLA_FLAGS", ""), n)
    import jax

    if jax.device_count() != n and jax.default_backend() == "cpu":
        print(
            f"bandits-jax: note: --devices {n} ignored (JAX was started with "
            f"{jax.device_count()} devices)",
            file=sys.stderr,
        )


def _error(lines: Sequence[str]) -> int:
    for line in lines:
        print(f"bandits-jax: error: {line}", file=sys.stderr)
    return 2


def _is_run_error(e: BaseException) -> bool:
    """Errors the library raises for a bad checkpoint or output directory (``CheckpointError``
    and any ``ValueError``/``RuntimeError`` subclass defined in ``bandits_jax.sim``): one line,
    not a traceback."""
    from bandits_jax.sim.checkpoint import CheckpointError

    if isinstance(e, CheckpointError):
        return True
    mod = type(e).__module__ or ""
    return (
        isinstance(e, (ValueError, RuntimeError, OSError))
        and mod.startswith("bandits_jax.sim")
        and type(e) not in (ValueError, RuntimeError, OSError)
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``bandits-jax`` console script (and ``python -m bandits_jax``)."""
    argv_list = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    try:
        argv_list = join_negative_values(argv_list, value_options(parser))
        args = parser.parse_args(argv_list)
        args = apply_config(parser, parser.subcommands[args.command], argv_list)
        args.module.validate(args)  # every option, before any JAX work
    except UsageError as e:
        return _error(e.errors)
    args.argv = None if argv is None else "bandits-jax " + " ".join(argv_list)
    if args.devices is None and argv is None and args.command in AUTO_DEVICES:
        # The console script's process: batched runs shard over one host device per idle core
        # (results equal the one-device run's, tests/sim/test_sharding.py).
        args.devices = process.idle_cores()
        say(args, f"devices: {args.devices} (one per idle core; --devices N chooses)")
    if argv is None or args.threads is not None:
        # The console script's process (or an explicit --threads): before JAX starts; auto is
        # one thread per host device (.process). main(argv) called from Python leaves its
        # caller's process (e.g. a test session) as it is unless asked.
        process.configure_threads(args.threads, devices=args.devices)
    # XLA's compiler options, as XLA_FLAGS before JAX starts (None: JAX had already started)
    args.xla_applied = process.configure_xla(compiler_options(args))
    _configure_devices(args.devices)  # starts JAX's backend
    import jax

    if not args.float32:
        jax.config.update("jax_enable_x64", True)
    # Compiled chunks are reused across runs (first vs second run) of this checkout; bench
    # compiles nothing itself (its benchmarks run in their own processes).
    caching = hasattr(args, "compile_cache")
    args.compile_cache_path = compile_cache_path(args) if caching else None
    _use_compile_cache(args.compile_cache_path)
    from bandits_jax.sim.checkpoint import DirectoryLock

    try:
        # One process per output directory: a second one fails at once (one error line).
        with DirectoryLock(args.out, name=".bandits-jax.lock"):
            rc = args.module.run(args)
        if caching:
            print(_compile_cache_line(compile_cache_report(args)), file=sys.stderr)
        return rc
    except KeyboardInterrupt:
        print(
            "\ninterrupted: the checkpoints of finished chunks are kept; rerun with --resume",
            file=sys.stderr,
        )
        return 130
    except Exception as e:
        if _is_run_error(e):
            return _error([" ".join(str(e).split())])
        raise


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
