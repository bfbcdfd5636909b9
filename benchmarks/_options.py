"""The options the benchmark scripts share, declared once.

A script builds its parser here and adds only its own options::

    p = parser(__file__, __doc__, quick="a run of under a minute", repeats=5, device=True)
    p.add_argument("--trials", type=positive_int, default=64, help="vmapped trials")
    args = p.parse_args(argv)
    select_device(args)  # benchmarks._device, before JAX starts (scripts with device=True)

The shared options, each where the script asks for it:

* ``--quick``: the script's reduced run (``quick=`` says what it reduces); every script has it;
* ``--json PATH``: write the figures there (also spelt ``--out`` where ``json_aliases`` says so:
  ``batched_throughput`` and ``compile_seconds`` took ``--out``); every script has it;
* ``--repeats N``: timed repeats, a positive int (``repeats=``: the default, or a text saying it);
* ``--dtypes LIST``: comma-separated dtypes out of ``dtypes=`` (a list in ``args.dtypes``);
* ``--device cpu|gpu|auto``, ``--host-devices N``, ``--threads N|auto`` (``device=True``): where
  JAX runs; :func:`benchmarks._device.select_device` applies them.

Bad values are one ``error:`` line and exit status 2 (argparse).
"""

from __future__ import annotations

import argparse
import pathlib
from collections.abc import Callable, Sequence

DEVICES = ("cpu", "gpu", "auto")


def positive_int(text: str) -> int:
    """An ``int`` >= 1 (an argparse ``type``)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive int, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive int, got {text!r}")
    return value


def names(choices: Sequence[str]) -> Callable[[str], list[str]]:
    """An argparse ``type``: a comma list of some of ``choices``, in order, without repeats."""

    def parse(text: str) -> list[str]:
        got = [v.strip() for v in text.split(",") if v.strip()]
        bad = [v for v in got if v not in choices]
        if not got or bad:
            raise argparse.ArgumentTypeError(f"expected some of {','.join(choices)}, got {text!r}")
        return list(dict.fromkeys(got))

    return parse


def parser(
    file: str,
    doc: str | None,
    *,
    quick: str,
    json_aliases: Sequence[str] = (),
    repeats: int | str | None = None,
    dtypes: Sequence[str] | None = None,
    device: bool = False,
) -> argparse.ArgumentParser:
    """The parser of the benchmark script ``file`` with the shared options (module docstring).

    Args:
      file: the script's ``__file__`` (its name makes ``prog``: ``python -m benchmarks.NAME``).
      doc: the script's docstring, the help's description.
      quick: what ``--quick`` reduces (its help).
      json_aliases: other spellings of ``--json`` the script accepts.
      repeats: ``--repeats``' default (an int), or a text saying how the script picks it when the
        option is not given (then ``args.repeats`` is ``None``); ``None``: no ``--repeats``.
      dtypes: the choices of ``--dtypes``, all by default; ``None``: no ``--dtypes``.
      device: whether the script takes ``--device``, ``--host-devices`` and ``--threads``.
    """
    p = argparse.ArgumentParser(
        prog=f"python -m benchmarks.{pathlib.Path(file).stem}",
        description=doc,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--quick", action="store_true", help=quick)
    p.add_argument("--json", *json_aliases, dest="json", default=None, metavar="PATH",
                   help="write the figures to this JSON file")  # fmt: skip
    if repeats is not None:
        text = str(repeats)
        p.add_argument("--repeats", type=positive_int, metavar="N",
                       default=repeats if isinstance(repeats, int) else None,
                       help=f"timed repeats (default {text})")  # fmt: skip
    if dtypes is not None:
        p.add_argument("--dtypes", type=names(dtypes), default=list(dtypes), metavar="LIST",
                       help=f"comma-separated, of {','.join(dtypes)} (default: all)")  # fmt: skip
    if device:
        p.add_argument("--device", choices=DEVICES, default="auto",
                       help="where JAX runs: cpu, gpu (fails if JAX sees none) or auto "
                            "(JAX's default)")  # fmt: skip
        p.add_argument("--host-devices", type=positive_int, default=1, metavar="N",
                       help="split the CPU into N host devices (one thread each); the scripts "
                            "that shard their trials use them")  # fmt: skip
        p.add_argument("--threads", default=None, metavar="N|auto",
                       help="XLA CPU threads (default: $BANDITS_JAX_THREADS, else auto); a "
                            "user's own XLA_FLAGS/NPROC always win")  # fmt: skip
    return p
