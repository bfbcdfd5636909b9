"""``bandits-jax``: the EOFD-MLogB paper's experiments, the BCO paper's studies, sweeps, benchmarks.

Subcommands, each writing PNG figures, JSON/CSV numbers and a text summary to ``--out DIR``:
``reproduce`` (:mod:`.reproduce`: the paper's Figures 1 and 2 for the registry's kinds on named
settings), ``sweep`` (:mod:`.sweep`: learners x grid x trials x settings in one compiled call,
tuned honestly), ``bco`` (:mod:`.bco`: the BCO paper's studies), ``kappa`` (:mod:`.kappa`: final
regret vs the bound S) and ``bench`` (:mod:`.bench`: the speed benchmarks of a source checkout).

Every option is validated before any work starts (:mod:`.options`): one line per problem on
stderr (``bandits-jax: error: ...``), exit status 2; an option that does nothing for the chosen
learners or settings is refused, never ignored. Runs are played in chunks with a progress bar
and a checkpoint after each (``DIR/checkpoints``); ``--resume`` continues an interrupted run
bit-identically and refuses checkpoints made with other options. Compiled chunks go to JAX's
persistent compilation cache (:mod:`.cache`); the process settings (:mod:`.process`) apply once
before JAX starts. Settings are the names of :func:`bandits_jax.envs.make`; on classification
data the learners get no bound S unless ``--S`` is given (each kind's no-bound rule chooses).
docs/command.md has the details.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from bandits_jax.cli import bco, bench, cache, kappa, process, reproduce, sweep
from bandits_jax.cli.options import (
    Parser,
    UsageError,
    add_common,
    apply_config,
    compiler_options,
    join_negative_values,
    value_options,
)
from bandits_jax.cli.output import say
from bandits_jax.cli.reproduce import make_setting  # deprecated alias of envs.make

__all__ = ["main", "build_parser", "make_setting"]

COMMANDS = {"reproduce": reproduce, "sweep": sweep, "bco": bco, "kappa": kappa, "bench": bench}
HELP = {  # command -> (one line in the command list, the description of its --help)
    "reproduce": ("the paper's Figures 1-2 (regret curves, per-round time)",
                  "The MLogB learners of --learners on the settings of --settings: cumulative "
                  "regret (mean, one-std band over trials) and per-round time bars."),
    "sweep": ("learners x grid x trials x settings in one compiled call",
              "A hyperparameter sweep in one compiled call (sharded over all devices), tuned on "
              "tuning seeds and reported on separate evaluation seeds."),
    "bco": ("the BCO paper's studies: regret vs d and vs the gradient variation V_T",
            "Algorithm 1 (theorem schedules), the Chiang et al. 2013 rate and the sphere "
            "estimator on drifting linear and quadratic losses: regret vs d and vs V_T with "
            "log-log slopes."),
    "kappa": ("final regret vs the parameter bound S (kappa ~ exp(S)), out of the box and tuned",
              "The learners of --learners on the synthetic stream for each S of --S-grid: final "
              "regret out of the box and tuned per S on tuning seeds, reported on evaluation "
              "seeds; growth from the smallest to the largest S."),
    "bench": ("speed benchmarks of a source checkout (its benchmarks/; pip installs none)",
              "Runs a source checkout's python -m benchmarks.mlogb_speed and benchmarks.bco_speed "
              "(scripts beside the package, not installed by pip: from a wheel, bench says it "
              "needs the checkout); cases in bench.csv."),
}  # fmt: skip
AUTO_DEVICES = ("sweep", "kappa")  # batched and sharded runs: by default one device per idle core


def build_parser() -> Parser:
    """The ``bandits-jax`` parser; ``parser.subcommands`` maps command names to subparsers."""
    p = Parser(prog="bandits-jax", description="Reproduce the EOFD-MLogB experiments, run the "
               "BCO studies, sweeps and benchmarks.")  # fmt: skip
    sub = p.add_subparsers(dest="command", required=True)
    p.subcommands = {}  # for --config defaults and value options
    for name, module in COMMANDS.items():
        # No abbreviations: kappa's --S would silently mean --S-grid, sweep's --rounds r --r.
        s = sub.add_parser(name, help=HELP[name][0], description=HELP[name][1],
                           allow_abbrev=False)  # fmt: skip
        add_common(s, name, module)  # the shared option groups it uses (COMMAND_GROUPS)
        module.add_arguments(s)
        s.set_defaults(module=module)
        p.subcommands[name] = s
    return p


def _error(lines: Sequence[str]) -> int:
    for line in lines:
        print(f"bandits-jax: error: {line}", file=sys.stderr)
    return 2


def _is_run_error(e: BaseException) -> bool:
    """Errors the library raises for a bad checkpoint or output directory (``CheckpointError``
    and any ``ValueError``/``RuntimeError``/``OSError`` subclass of ``bandits_jax.sim``): one
    line, not a traceback."""
    from bandits_jax.sim.checkpoint import CheckpointError

    bases = (ValueError, RuntimeError, OSError)
    return isinstance(e, CheckpointError) or (
        isinstance(e, bases) and (type(e).__module__ or "").startswith("bandits_jax.sim")
        and type(e) not in bases
    )  # fmt: skip


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
        # The console script's process (or an explicit --threads), before JAX starts; main(argv)
        # called from Python leaves its caller's process (e.g. a test session) as it is.
        process.configure_threads(args.threads, devices=args.devices)
    # XLA's compiler options, as XLA_FLAGS before JAX starts (None: JAX had already started)
    args.xla_applied = process.configure_xla(compiler_options(args))
    if args.devices:
        os.environ["XLA_FLAGS"] = process.host_device_flags(os.environ.get("XLA_FLAGS", ""),
                                                            args.devices)  # fmt: skip
    import jax

    if args.devices and jax.device_count() != args.devices and jax.default_backend() == "cpu":
        print(f"bandits-jax: note: --devices {args.devices} ignored (JAX was started with "
              f"{jax.device_count()} devices)", file=sys.stderr)  # fmt: skip
    if not args.float32:
        jax.config.update("jax_enable_x64", True)
    caching = hasattr(args, "compile_cache")  # bench compiles nothing itself
    args.compile_cache_path = cache.cache_path(args) if caching else None
    cache.use(args.compile_cache_path)
    from bandits_jax.sim.checkpoint import DirectoryLock

    try:
        # One process per output directory: a second one fails at once (one error line).
        with DirectoryLock(args.out, name=".bandits-jax.lock"):
            rc = args.module.run(args)
        if caching:
            print(cache.line(cache.report(args)), file=sys.stderr)
        return rc
    except KeyboardInterrupt:
        print("\ninterrupted: the checkpoints of finished chunks are kept; rerun with --resume",
              file=sys.stderr)  # fmt: skip
        return 130
    except Exception as e:
        if _is_run_error(e):
            return _error([" ".join(str(e).split())])
        raise


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
