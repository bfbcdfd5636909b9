"""Buffered EOFD's summary forms, sketch sizes, buffers and Hessian forms on the tuning problems:
the measurements behind the registry's ``eofd-buffered`` rows of ``recipes.RULES`` (summary,
buffer and sketch).

:func:`bandits_jax.mlogb.eofd_buffered` summarises the rounds that leave its buffer either with
their gradient at the estimate kept exact (``summary="gradient"``, eq. 2) or with the summary's
minimiser kept (``"anchor"``, eq. 3), in a sketch of Section 4's ``m = floor(K d / 10)`` or as
wide as the buffer, ``min(K d, 64)``. This plays the four variants with ``bandits-jax
reproduce`` at the kind's recipe points (each problem's known bound, or the no-bound points on
classification data) on the tuning problems of both recipe families (never a reported
setting), tuning seeds 0.., and prints final regret mean +- standard error per problem and
the across-problems score (mean over the problems of regret over the problem's best variant)
for K = 1 and K >= 2 separately::

    python -m benchmarks.buffered_forms --out docs/bench/buffered_forms.json

``--summaries``, ``--sketches``, ``--buffers`` (B, default 64) and ``--hessians``
(``eofd_buffered(hessian=)``, default ``auto``) choose the axes; docs/recipes.md has the runs.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import pathlib
import shlex
import sys
import tempfile

from bandits_jax.mlogb import recipes
from bandits_jax.mlogb.eofd_buffer import DEFAULT_BUFFER
from benchmarks._report import finish

# Not the K = 4 digits (K d = 260): the buffer-wide sketch there (m = 64) stalled XLA's CPU
# runtime in longer runs (docs/recipes.md#buffered-eofd); its two summaries are compared there
# by the sweeps of docs/recipes.md at Section 4's m.
SETTINGS = (
    "wine-all", "iris-all", "cancer-all", "digits-all-h0",
    "synth-30-1-S1", "synth-30-1-S8", "synth-15-3-S4", "lowrank-60-1-4-S8",
)  # fmt: skip
SUMMARIES = ("gradient", "anchor")
SKETCHES = {
    "section4": recipes.sketch_size,  # floor(K d / 10), at least 1
    "buffer": lambda K, d: min(K * d, DEFAULT_BUFFER),
}


def variants(
    summaries=SUMMARIES, sketches=tuple(SKETCHES), buffers=(DEFAULT_BUFFER,), hessians=("auto",)
) -> dict:
    """Command rows ``buffered-<summary>-<sketch>`` (``-B<b>`` where the buffer is not the
    default, ``-<hessian>`` where the Hessian's form is not ``auto``): buffered EOFD at the
    registry kind's points with the given summary, sketch rule, buffer size and Hessian form,
    each with its sketch rule."""
    from bandits_jax.mlogb import eofd_buffered, recipes

    base = recipes.REGISTRY["eofd-buffered"]
    rows = {}
    for summary in summaries:
        for sk in sketches:
            for B, h in itertools.product(buffers, hessians):
                rule = SKETCHES[sk]

                def factory(K, d, m, horizon=None, summary=summary, rule=rule, B=B, h=h):
                    return eofd_buffered(num_outcomes=K, dim=d, sketch_size=rule(K, d),
                                         buffer_size=B, summary=summary, hessian=h)  # fmt: skip

                name = (f"buffered-{summary}-{sk}" + ("" if B == DEFAULT_BUFFER else f"-B{B}")
                        + ("" if h == "auto" else f"-{h}"))  # fmt: skip
                rows[name] = (base._replace(label=name, legend=name, factory=factory), rule)
    return rows


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=None, help="write the JSON here")
    p.add_argument("--settings", default=",".join(SETTINGS))
    p.add_argument("--trials", type=int, default=5)
    p.add_argument("--rounds", type=int, default=2000)
    p.add_argument("--summaries", default=",".join(SUMMARIES))
    p.add_argument("--sketches", default=",".join(SKETCHES))
    p.add_argument("--buffers", default=str(DEFAULT_BUFFER), help="buffer sizes B")
    p.add_argument("--hessians", default="auto", help="eofd_buffered's hessian= forms")
    a = p.parse_args(argv)
    from bandits_jax.cli import main as cli_main
    from bandits_jax.mlogb import recipes

    rows = variants(a.summaries.split(","), a.sketches.split(","),
                    [int(b) for b in a.buffers.split(",")], a.hessians.split(","))  # fmt: skip
    # this process only: each variant a registry kind with buffered EOFD's rules
    recipes.REGISTRY.update({n: row for n, (row, _) in rows.items()})
    recipes.RULES += tuple(r._replace(kind=n) for n in rows for r in recipes.RULES
                           if r.kind == "eofd-buffered")  # fmt: skip
    recipes.KINDS = tuple(recipes.REGISTRY)
    work = pathlib.Path(tempfile.mkdtemp(prefix="buffered_forms_"))
    argv_run = ["reproduce", "--settings", a.settings, "--learners", ",".join(rows),
                "--rounds", str(a.rounds), "--trials", str(a.trials), "--seed", "0",
                "--out", str(work), "--no-plots", "--quiet"]  # fmt: skip
    if cli_main(argv_run):
        raise SystemExit(f"reproduce failed: {shlex.join(argv_run)}")
    runs = json.loads((work / "reproduce.json").read_text())["settings"]
    table: dict = {}
    for name, entry in runs.items():
        table[name] = {
            "K": entry["K"],
            "d": entry["d"],
            "rows": {
                label: {
                    "mean": s["final_regret_mean"],
                    "se": s["final_regret_std"] / math.sqrt(a.trials),
                    "m": rows[label][1](entry["K"], entry["d"]),
                    "point": {k: s.get(k) for k in ("l", "e", "beta", "S")},
                    "ms_per_round": 1e3 * s["seconds_per_round_mean"],
                    "rejected_updates": s.get("rejected_updates"),
                }
                for label, s in entry["learners"].items()
            },
        }
    scores = {}
    for group, keep in (("K = 1", lambda K: K == 1), ("K >= 2", lambda K: K >= 2)):
        names = [n for n, t in table.items() if keep(t["K"])]
        if names:
            scores[group] = {
                v: sum(
                    table[n]["rows"][v]["mean"] / min(r["mean"] for r in table[n]["rows"].values())
                    for n in names
                ) / len(names)
                for v in rows
            }  # fmt: skip
    print(f"{'problem':20s}" + "".join(f"{v:>28s}" for v in rows))
    for name, t in table.items():
        cells = (f"{t['rows'][v]['mean']:9.1f} ± {t['rows'][v]['se']:5.1f} (m {t['rows'][v]['m']})"
                 for v in rows)  # fmt: skip
        print(f"{name:20s}" + "".join(f"{c:>28s}" for c in cells))
    for group, sc in scores.items():
        print(
            f"across-problems score, {group}: " + ", ".join(f"{v} {s:.2f}" for v, s in sc.items())
        )
    return finish(
        {
            "benchmark": "buffered_forms",
            "command": shlex.join(
                ["python", "-m", "benchmarks.buffered_forms", *(argv or sys.argv[1:])]
            ),
            "rounds": a.rounds,
            "trials": a.trials,
            "seeds": list(range(a.trials)),
            "settings": table,
            "across_scores": scores,
        },
        a.out,
    )


if __name__ == "__main__":
    main()
