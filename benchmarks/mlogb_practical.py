"""Where the tuned MLogB learners stand: regret and time per round against OFUL and the baselines.

Runs ``bandits-jax reproduce`` with the paper's recipe (EOFD, OFUL) and every kind of
:mod:`bandits_jax.mlogb.recipes` at its tuned point (chosen on separate tuning problems and
seeds, see that module) on the reported settings synth-100-4, synth-400-1, digits and digits-k4
(T = 2000, 10 evaluation trials with seeds 10000.., disjoint from the tuning seeds), then prints
a markdown table (final regret mean +- sd, ms per round) with the goals of the EOFD issue
checked per setting, and writes the JSON::

    python -m benchmarks.mlogb_practical --json docs/bench/mlogb_practical.json

``--quick`` (T = 300, 3 trials) checks the script end to end in a few minutes. float64.
The learners can be run in groups (``--learners`` ... ``--out DIR1``, then others into ``DIR2``)
and the groups' reports merged (``--merge DIR1 DIR2 --json ...``, which also draws the regret
figure of every learner from the reports' curves with ``--figure PNG``).
"""

from __future__ import annotations

import argparse
import json
import pathlib
import tempfile

from benchmarks._device import add_device_option, select_device
from benchmarks._report import finish

SETTINGS = ("synth-100-4", "synth-400-1", "digits", "digits-k4")
LEARNERS = (
    "eofd",  # the paper's own recipe (section 4, (l, e) = (0.75, 0.75), theory radius)
    "oful",
    "eofd-tuned",
    "eofd-robust",
    "eofd-adaptive",
    "oful-tuned",
    "greedy",
    "linucb",
    "uniform",
)
EVAL_SEED = 10_000  # evaluation seeds: the tuning sweep used 0, 1, 2


def goals(entry: dict) -> dict:
    """The EOFD issue's goals on one setting: the better sketched variant (robust or adaptive)
    within 10% of tuned OFUL's regret, at or below LinUCB's, at <= 10% of OFUL's time."""
    L = entry["learners"]
    oful, lin = L["OFUL tuned"], L["LinUCB"]
    best = min(("EOFD robust", "EOFD adaptive"), key=lambda k: L[k]["final_regret_mean"])
    b = L[best]
    return {
        "best_sketched": best,
        "regret_over_oful": b["final_regret_mean"] / oful["final_regret_mean"],
        "regret_over_linucb": b["final_regret_mean"] / lin["final_regret_mean"],
        "time_over_oful": b["seconds_per_round_mean"] / oful["seconds_per_round_mean"],
        "within_10pct_of_oful": b["final_regret_mean"] <= 1.1 * oful["final_regret_mean"],
        "at_or_below_linucb": b["final_regret_mean"] <= lin["final_regret_mean"],
        "time_at_most_10pct": b["seconds_per_round_mean"] <= 0.1 * oful["seconds_per_round_mean"],
    }


def markdown(report: dict) -> str:
    names = list(report["settings"])
    labels = list(next(iter(report["settings"].values()))["learners"])
    head = "| learner | " + " | ".join(names) + " |"
    lines = [head, "|---" * (len(names) + 1) + "|"]
    for lab in labels:
        cells = []
        for n in names:
            s = report["settings"][n]["learners"][lab]
            cells.append(
                f"{s['final_regret_mean']:.1f} +- {s['final_regret_std']:.1f} "
                f"({1e3 * s['seconds_per_round_mean']:.2f} ms)"
            )
        lines.append(f"| {lab} | " + " | ".join(cells) + " |")
    lines.append("")
    for n in [n for n in names if "goals" in report["settings"][n]]:
        g = report["settings"][n]["goals"]
        lines.append(
            f"- {n}: {g['best_sketched']} / OFUL tuned regret {g['regret_over_oful']:.3f}, "
            f"/ LinUCB {g['regret_over_linucb']:.3f}, time / OFUL {g['time_over_oful']:.3f}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict:
    from bandits_jax.cli import main as cli_main

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json", default=None, help="write the results here")
    p.add_argument("--out", default=None, help="reproduce's output directory (default: temp)")
    p.add_argument("--quick", action="store_true", help="T = 300, 3 trials")
    p.add_argument("--float32", action="store_true", help="float32 (default float64)")
    p.add_argument("--learners", default=",".join(LEARNERS), help="comma list (default: all)")
    p.add_argument("--settings", default=",".join(SETTINGS), help="comma list (default: all)")
    p.add_argument("--merge", nargs="+", default=None, help="merge these runs' reports instead")
    p.add_argument("--figure", default=None, help="with --merge: draw the regret figure here")
    add_device_option(p)
    a = p.parse_args(argv)
    select_device(a)  # the in-process reproduce command runs with this choice
    if a.merge:
        report = merge([json.loads((pathlib.Path(d) / "reproduce.json").read_text())
                        for d in a.merge])  # fmt: skip
    else:
        out = pathlib.Path(a.out or tempfile.mkdtemp(prefix="mlogb_practical_"))
        T, trials = (300, 3) if a.quick else (2000, 10)
        args = [
            "reproduce",
            "--settings", a.settings,
            "--learners", a.learners,
            "--rounds", str(T),
            "--trials", str(trials),
            "--seed", str(EVAL_SEED),
            "--out", str(out),
            "--quiet",
        ]  # fmt: skip
        if a.float32:
            args.append("--float32")
        rc = cli_main(args)
        if rc:
            raise SystemExit(rc)
        report = json.loads((out / "reproduce.json").read_text())
    complete = all(
        {"OFUL tuned", "LinUCB", "EOFD robust", "EOFD adaptive"} <= set(e["learners"])
        for e in report["settings"].values()
    )
    for entry in report["settings"].values():
        if complete:
            entry["goals"] = goals(entry)
    print(markdown(report))
    if a.merge and a.figure:
        figure(report, a.figure)
    return finish({"benchmark": "mlogb_practical", "reproduce": report}, a.json)


def merge(reports: list[dict]) -> dict:
    """One report from runs of learner groups and/or setting groups with the same T and trials."""
    first = reports[0]
    for r in reports[1:]:
        for key in ("rounds", "trials", "dtype"):
            if r[key] != first[key]:
                raise SystemExit(f"--merge: runs differ in {key}: {r[key]} vs {first[key]}")
    out = {**first, "command": [r["command"] for r in reports], "settings": {}}
    for name in [n for n in SETTINGS if any(n in r["settings"] for r in reports)]:
        entry: dict = {}
        for r in reports:
            if name in r["settings"]:
                learners = {**entry.get("learners", {}), **r["settings"][name]["learners"]}
                entry = {**r["settings"][name], "learners": learners}
        entry.pop("ratios", None)
        out["settings"][name] = entry
    return out


def figure(report: dict, path: str) -> None:
    """Cumulative regret (mean +- one sd over trials) per learner and setting, from the report."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(report["settings"])
    fig, axes = plt.subplots(1, len(names), figsize=(4.2 * len(names), 3.6), squeeze=False)
    for ax, name in zip(axes[0], names, strict=True):
        entry = report["settings"][name]
        for label, s in entry["learners"].items():
            x = s["curve_rounds"]
            m, sd = s["cumulative_regret_mean"], s["cumulative_regret_std"]
            (line,) = ax.plot(x, m, label=label)
            ax.fill_between(x, [a - b for a, b in zip(m, sd, strict=True)],
                            [a + b for a, b in zip(m, sd, strict=True)],
                            color=line.get_color(), alpha=0.15)  # fmt: skip
        ax.set_title(entry["title"], fontsize=9)
        ax.set_xlabel("round")
    axes[0][0].set_ylabel("cumulative regret")
    axes[0][-1].legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
