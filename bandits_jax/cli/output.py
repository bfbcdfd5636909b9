"""What the commands write: plain-text tables, CSV and JSON files (``write_json``:
:func:`bandits_jax.sim.checkpoint.write_json`)."""

from __future__ import annotations

import csv
import os
from collections.abc import Mapping, Sequence
from typing import Any

from bandits_jax.sim.checkpoint import write_json  # the one (atomic) JSON writer

__all__ = ["format_table", "write_csv", "write_json"]


def _missing(v: Any) -> bool:
    return v is None or (isinstance(v, float) and v != v)


def _fmt(v: Any) -> str:
    """A table cell; a missing value (``None`` or NaN) is ``-``, never ``nan``."""
    return "-" if _missing(v) else f"{v:.4g}" if isinstance(v, float) else str(v)


def format_table(rows: Sequence[Mapping[str, Any]], columns: Sequence[str] | None = None) -> str:
    """A plain-text table of rows (columns default to the union of keys, in order)."""
    if not rows:
        return "(no rows)"
    if columns is None:
        columns = list(dict.fromkeys(k for r in rows for k in r))
    cells = [[_fmt(r.get(c)) for c in columns] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(columns)]
    line = "  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True))
    body = ["  ".join(x.ljust(w) for x, w in zip(row, widths, strict=True)) for row in cells]
    return "\n".join([line, "-" * len(line), *body])


def write_csv(path: str | os.PathLike, rows: Sequence[Mapping[str, Any]]) -> None:
    """Writes rows as CSV (columns: union of keys in order; missing, ``None`` and NaN cells are
    empty)."""
    columns = list(dict.fromkeys(k for r in rows for k in r))
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=columns)
        w.writeheader()
        w.writerows({k: "" if _missing(v := r.get(k)) else v for k in columns} for r in rows)


def dtype_of(args: Any) -> Any:
    """``jnp.float32`` under ``--float32``, else ``jnp.float64``."""
    import jax.numpy as jnp

    return jnp.float32 if args.float32 else jnp.float64


def say(args: Any, text: str) -> None:
    """Prints ``text`` unless ``--quiet``."""
    if not getattr(args, "quiet", False):
        print(text, flush=True)


def write_outputs(out: os.PathLike, written: Sequence[os.PathLike]) -> None:
    """Prints where the files written are."""
    import pathlib

    print(f"\nResults in {pathlib.Path(out).resolve()}:")
    for p in written:
        print(f"  {pathlib.Path(p).resolve()}")


def command_line(args: Any) -> str:
    """The command as the user typed it (``args.argv`` from ``main(argv)``, else ``sys.argv``)."""
    import sys

    return " ".join(["bandits-jax", *sys.argv[1:]]) if args.argv is None else args.argv


def finish(args: Any, name: str, report: dict, rows: Sequence[Mapping[str, Any]], summary: str,
           figures: Sequence[os.PathLike] = ()) -> None:  # fmt: skip
    """Writes ``NAME.json`` (``report`` with the compile cache's state), ``NAME.csv`` (``rows``)
    and ``NAME_summary.txt`` (``summary`` and the compile cache's lines) under ``--out``, prints
    the summary, then every file written (``figures`` first)."""
    import pathlib

    from bandits_jax.cli import cache

    out = pathlib.Path(args.out)
    report["compile_cache"] = cache.report(args)
    write_json(out / f"{name}.json", report)
    write_csv(out / f"{name}.csv", rows)
    summary += cache.text(report["compile_cache"])
    (out / f"{name}_summary.txt").write_text(summary)
    print("\n" + summary)
    write_outputs(out, [*figures, *(out / f"{name}{s}" for s in (".json", ".csv", "_summary.txt"))])
