"""Pure functions behind the command's tables and summaries (numpy in, dicts and text out).
Status codes are counted by name (:func:`bandits_jax.status.count_status`): an update is
*rejected* where its code is in ``REJECTED_CODES``, ``MAX_STEPS`` marks a kept step that hit its
cap, ``INACTIVE`` is healthy; a *flagged* selection has a failure code (NaN scores, empty mask).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from bandits_jax.cli.output import format_table
from bandits_jax.mlogb.exploration import GREEDY_RATIO
from bandits_jax.status import REJECTED_CODES, count_status, is_failure, is_rejected

Rows = Sequence[Mapping[str, Any]]


def rejected_count(status: Any) -> int:
    """Rounds whose update was rejected (:func:`bandits_jax.status.is_rejected`)."""
    return int(np.count_nonzero(is_rejected(np.asarray(status))))


def median_ratio(bonus: np.ndarray, estimate: np.ndarray) -> float:
    """Median over trials and rounds of ``bonus / estimate`` where ``estimate > 0`` (NaN if
    there is no such round)."""
    bonus, estimate = np.asarray(bonus, np.float64), np.asarray(estimate, np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.where(estimate > 0, bonus / estimate, np.nan)
    r = r[np.isfinite(r)]
    return float(np.median(r)) if r.size else float("nan")


def downsample(x: np.ndarray, points: int = 400) -> tuple[list[int], list[float]]:
    """At most ``points`` evenly spaced (1-based round, value) pairs, first and last kept."""
    x = np.asarray(x)
    idx = np.unique(np.linspace(0, x.size - 1, min(points, x.size)).round().astype(int))
    return (idx + 1).tolist(), x[idx].tolist()


def ratio(num: float, den: float) -> float | None:
    """``num / den``, ``None`` when undefined (zero or non-finite denominator)."""
    if den is None or num is None or not math.isfinite(den) or den == 0:
        return None
    return num / den


def _std(x: np.ndarray, axis: int = 0) -> Any:
    """The sample standard deviation, 0 for a single sample."""
    x = np.asarray(x)
    return x.std(axis=axis, ddof=1) if x.shape[axis] > 1 else 0 * x.take(0, axis=axis)


def learner_stats(
    regrets: np.ndarray,
    seconds_per_round: Sequence[float],
    *,
    bonus: np.ndarray | None = None,
    estimate: np.ndarray | None = None,
    explored: np.ndarray | None = None,
    status: np.ndarray | None = None,
    select_status: np.ndarray | None = None,
    compile_seconds: float = 0.0,
) -> dict[str, Any]:
    """Summary statistics of one learner on one setting from its ``(trials, T)`` per-round
    regrets, the wall seconds per round of each timed repeat, and where given the ``(trials,
    T)`` spreads of the exploration diagnostic (``bonus``, ``estimate``), whether the optimistic
    choice differed from the greedy one (``explored``), the update and selection status codes
    (a failing selection: NaN scores or an empty action set) and its compile seconds."""
    regrets = np.asarray(regrets, np.float64)
    final, cum = regrets.sum(axis=1), np.cumsum(regrets, axis=1)
    per_round = [float(s) for s in seconds_per_round]
    rounds_x, mean_y = downsample(cum.mean(axis=0))
    out: dict[str, Any] = {
        "final_regret_mean": float(final.mean()),
        "final_regret_std": float(_std(final)),
        "final_regret_per_trial": final.tolist(),
        "seconds_per_round_mean": float(np.mean(per_round)),
        "seconds_per_round_std": float(_std(per_round)),
        "seconds_per_round_each": per_round,
        "compile_seconds": float(compile_seconds),
        "bonus_ratio_median": None if bonus is None or estimate is None
        else median_ratio(bonus, estimate),
        "explore_rate": None if explored is None else float(np.mean(explored)),
        "curve_rounds": rounds_x,
        "cumulative_regret_mean": mean_y,
        "cumulative_regret_std": downsample(_std(cum))[1],
    }  # fmt: skip
    if status is not None:
        counts = count_status(status)
        out.update(status_counts=counts, rejected_updates=rejected_count(status),
                   max_steps=counts["max_steps"])  # fmt: skip
    if select_status is not None:
        out["flagged_selections"] = int(np.count_nonzero(is_failure(np.asarray(select_status))))
    return out


def pair_ratios(stats: Mapping[str, Mapping[str, Any]], pairs: Sequence[tuple[str, str]]) -> dict:
    """For each pair ``(a, b)`` of learner keys both present in ``stats``, the ratios a / b of
    mean final regret and of mean time per round, keyed ``"a_over_b"`` (``None`` if undefined)."""
    return {
        f"{a}_over_{b}": {
            "numerator": a, "denominator": b,
            "final_regret": ratio(stats[a]["final_regret_mean"], stats[b]["final_regret_mean"]),
            "time_per_round": ratio(stats[a]["seconds_per_round_mean"],
                                    stats[b]["seconds_per_round_mean"]),
        }
        for a, b in pairs if a in stats and b in stats
    }  # fmt: skip


def _ratio_line(name: str, la: str, lb: str, r: Mapping[str, Any]) -> str:
    fr, tr = r["final_regret"], r["time_per_round"]
    text = f"{name}: {la}/{lb} final regret " + ("-" if fr is None else f"{fr:.3f}")
    if tr is None:
        return text + ", per-round time -"
    return text + f", per-round time {tr:.3f} ({abs(100 * (1 - tr)):.0f}% " + (
        "less time)" if tr < 1 else "more time)")  # fmt: skip


def reproduce_summary(
    report: Mapping[str, Any], rows: Rows, notes: Sequence[str], labels: Mapping[str, str]
) -> str:
    """The text summary of ``reproduce`` from its JSON ``report`` (``l``, ``e``, ``beta``:
    ``None`` when no paper kind ran) and CSV ``rows``: the table, the ratio line of each named
    pair (``labels``: learner key -> label), the exploration diagnostic, the update status
    (rejected updates, MAX_STEPS) and the ``notes``."""
    names = ", ".join(dict.fromkeys(r["learner"] for r in rows))
    paper = "" if report["l"] is None else (
        f"the paper's kinds at section 4's (l, e) = ({report['l']}, {report['e']}), "
        f"beta = {report['beta']}; ")  # fmt: skip
    cols = ("setting learner l e beta final_regret_mean final_regret_std ms_per_round_mean "
            "ms_per_round_std state_mib compile_s bonus_ratio rejected_updates max_steps "
            "flagged_selections").split()  # fmt: skip
    lines = [
        f"{names}; {paper}S = {'per setting' if report['S'] is None else report['S']}; "
        f"T = {report['rounds']} rounds, {report['trials']} trials, {report['dtype']} on "
        f"{report['backend']}.",
        "Tuned learners (bandits_jax.mlogb.recipes) run at their own tuned (l, e, beta), shown "
        "per row.",
        f"Per-round time (ms_per_round): a timed pass after the run, one chunk of a batch of "
        f"{report.get('batch', 1)} vmapped trials, its wall time per trial-round (compile and "
        "checkpoints excluded), mean and std over 2 repeats; state_mib: one trial's learner "
        "state.",
        f"Compile time: {report['compile_wall_seconds']:.1f} s of the "
        f"{report['wall_seconds']:.1f} s after start-up went to compiling the learners' chunk "
        "programs (compile_s: each learner's, one after another).",
        "", format_table(rows, cols), "",
    ]  # fmt: skip
    for name, entry in report["settings"].items():
        for r in entry.get("ratios", {}).values():
            a, b = r["numerator"], r["denominator"]
            lines.append(_ratio_line(name, labels.get(a, a), labels.get(b, b), r))
    # a ratio of 0: no bonus at all (greedy, random)
    greedy = [f"{r['setting']}/{r['learner']} ({r['bonus_ratio']:.1e})" for r in rows
              if r.get("bonus_ratio") is not None and math.isfinite(r["bonus_ratio"])
              and 0 < r["bonus_ratio"] < GREEDY_RATIO]  # fmt: skip
    lines += [
        "",
        "Exploration diagnostic (bonus_ratio = median over rounds of the spread of the "
        "optimistic bonus across the action set / the spread of the estimated rewards):",
    ]
    if greedy:
        lines.append(
            f"  effectively greedy (ratio < {GREEDY_RATIO:g}): {', '.join(greedy)}. The bonus "
            "cannot change which action wins, so beta hardly matters there; see `bandits-jax "
            "sweep --beta-grid ...` for (l, e, beta) where exploration matters."
        )
    else:
        lines.append("  no learner/setting is effectively greedy by this measure.")
    return "\n".join([*lines, *status_lines(rows), *notes]) + "\n"


def status_lines(rows: Rows, *, total_key: str = "updates") -> list[str]:
    """Lines naming the rows with rejected updates or MAX_STEPS (or saying there are none).

    Rows carry ``rejected_updates`` (or ``rejected``), ``max_steps``, and ``trials * rounds``
    updates; ``setting``/``env`` and ``learner`` name them."""
    found: dict[str, list[str]] = {"rejected": [], "max_steps": [], "flagged_selections": []}
    for r in rows:
        where = f"{r.get('setting', r.get('env'))}/{r['learner']}"
        n = r.get("trials", 1) * r.get("rounds", 0)
        counts = {"rejected": r.get("rejected_updates", r.get("rejected")),
                  "max_steps": r.get("max_steps"),
                  "flagged_selections": r.get("flagged_selections")}  # fmt: skip
        for key, k in counts.items():
            if k:
                found[key].append(f"{where} {k} of {n}")
    names = ", ".join(c.name.lower() for c in sorted(REJECTED_CODES))
    text = {k: "; ".join(v) if v else "none" for k, v in found.items()}
    out = ["Update status:",
           f"  rejected {total_key} ({names}; the state kept its last good value): "
           f"{text['rejected']}",
           f"  steps that hit the iteration cap (max_steps): {text['max_steps']}"]  # fmt: skip
    if any("flagged_selections" in r for r in rows):
        out.append("  flagged selections (NaN scores or an empty action set): "
                   f"{text['flagged_selections']}")  # fmt: skip
    return out


def sweep_summary(tuning_rows: Rows, eval_rows: Rows, timing: Mapping[str, Any], T: int,
                  betas: Sequence[str]) -> str:  # fmt: skip
    """The text summary of ``sweep`` (best configurations, honest estimate, exploration, status,
    and where beta matters)."""
    lines = [f"Sweep of {timing['runs']} runs x {T} rounds on {timing['devices']} device(s):",
             f"  one call: {timing['one_call_run_seconds']:.2f} s run + "
             f"{timing['one_call_compile_seconds']:.2f} s compile"]  # fmt: skip
    if "loop_run_seconds" in timing:
        speedup = timing["loop_run_seconds"] / max(timing["one_call_run_seconds"], 1e-12)
        lines.append(f"  one by one: {timing['loop_run_seconds']:.2f} s run + "
                     f"{timing['loop_compile_seconds']:.2f} s compile (speed-up of the one call: "
                     f"{speedup:.2f}x)")  # fmt: skip
    every = [*tuning_rows, *eval_rows]
    grid_cols = [c for c in ("l", "e", "beta", "scale") if any(c in r for r in every)]
    cols = ["learner", "env", *grid_cols, *("final_regret_mean final_regret_std bonus_ratio "
            "explore_rate greedy rejected status_max_steps").split()]  # fmt: skip
    best = sorted(tuning_rows, key=lambda r: (r["learner"], r["env"], r["final_regret_mean"]))
    shown = [r for key in dict.fromkeys((r["learner"], r["env"]) for r in best)
             for r in [r for r in best if (r["learner"], r["env"]) == key][:10]]  # fmt: skip
    lines += ["", "Tuning seeds, 10 best configurations per experiment:", format_table(shown, cols)]
    if eval_rows:
        lines += ["", "Honest estimate: the configuration chosen on the tuning seeds, on separate "
                  "evaluation seeds:", format_table(eval_rows, cols)]  # fmt: skip
    with_ratio = [r for r in tuning_rows if "greedy" in r]
    lines.append("")
    if with_ratio:
        n_greedy = sum(1 for r in with_ratio if r.get("greedy"))
        lines.append(f"Exploration: {n_greedy} of {len(with_ratio)} configurations have a median "
                     f"bonus spread below {GREEDY_RATIO:g} of the estimate spread (effectively "
                     "greedy).")  # fmt: skip
    lines += status_lines([{**r, "max_steps": r.get("status_max_steps")} for r in every])
    mlogb_rows = [r for r in tuning_rows if "beta" in r]
    if len(betas) > 1 and mlogb_rows:
        groups: dict[Any, list[Mapping[str, Any]]] = {}
        for r in mlogb_rows:
            groups.setdefault((r["learner"], r["env"], r["l"], r["e"]), []).append(r)
        sens = sorted(((max(v := [r["final_regret_mean"] for r in rs]) - min(v), *key,
                        min(rs, key=lambda r: r["final_regret_mean"]))
                       for key, rs in groups.items()), key=lambda s: -s[0])  # fmt: skip
        lines.append("Where beta matters most (range of mean final regret over beta):")
        lines += [f"  {lrn} {env} l={l_:g} e={e_:g}: range {rng:.3g}, best beta={b['beta']} "
                  f"({b['final_regret_mean']:.3g})"
                  for rng, lrn, env, l_, e_, b in sens[:8]]  # fmt: skip
        flat = sum(1 for s in sens if s[0] == 0.0)
        lines.append(f"  {flat} of {len(sens)} (l, e) points give identical regret for every beta.")
    return "\n".join(lines) + "\n"


def _clean(v: Any) -> Any:
    """A CSV cell: non-finite numbers and nested values (kept in the JSON) become ``None``."""
    bad = isinstance(v, float) and not math.isfinite(v)
    return None if bad or isinstance(v, list | tuple | dict) else v


def bench_rows(benchmark: str, cases: Rows) -> list[dict[str, Any]]:
    """CSV rows of a speed benchmark's ``cases``: one row per case, the benchmark's name first;
    missing or non-finite cells are ``None`` (written as empty cells, printed as ``-``)."""
    return [{"benchmark": benchmark, **{k: _clean(v) for k, v in c.items()}} for c in cases]


def loglog_slope(x: Sequence[float], y: Sequence[float]) -> float:
    """Least-squares slope of log y on log x over the points with x, y > 0 (NaN if < 2)."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    ok = (x > 0) & (y > 0) & np.isfinite(y) & np.isfinite(x)
    if ok.sum() < 2:
        return float("nan")
    return float(np.polyfit(np.log(x[ok]), np.log(y[ok]), 1)[0])


def bco_rows(result: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Tidy rows of a BCO study result (:mod:`bandits_jax.cli.bco`): one per (study, family,
    learner, point)."""
    rows, cfg = [], result["config"]
    for study in ("dimension", "variation"):
        for family, per in result.get(study, {}).items():
            for name, p in per.items():
                for i in range(len(p["mean"])):
                    row: dict[str, Any] = {"study": study, "family": family, "learner": name}
                    if study == "dimension":
                        row["d"] = p["d"][i]
                    else:
                        row.update(d=cfg["d_variation"], amplitude=p["amplitude"][i],
                                   noise=p["noise"][i])  # fmt: skip
                    row.update(
                        V_T=p["V_T"][i], regret_mean=p["mean"][i], regret_std=p["std"][i],
                        scale=p["scale"][i] if "scale" in p else None,
                        trials=len(p["regret"][i]), rounds=cfg["T"],
                        rejected=p["rejected"][i] if "rejected" in p else None,
                        max_steps=p["max_steps"][i] if "max_steps" in p else None,
                    )  # fmt: skip
                    rows.append(row)
    return rows


def bco_summary(result: Mapping[str, Any]) -> str:
    """The text tables of a BCO study: regret (mean +- std over seeds) per d and per V_T point
    with the fitted log-log slopes, and the update status."""
    cfg = result["config"]
    tuned = len(cfg.get("scale_grid", [])) > 1
    lines = [f"BCO studies (gradient-variation paper): T = {cfg['T']}, {cfg['seeds']} evaluation "
             f"seeds, {cfg['dtype']} on {cfg['backend']}"
             + (f"; step scale tuned over {cfg['scale_grid']} on separate tuning seeds"
                if tuned else "") + "."]  # fmt: skip
    for family, per in result.get("dimension", {}).items():
        first = next(iter(per.values()))
        lines += [f"\n[{family}] final regret vs d (mean +- std over seeds); V_T ~ "
                  f"{np.mean(first['V_T']):.2g}",
                  "learner".ljust(13) + "".join(f"d={d}".rjust(17) for d in first["d"])
                  + "  slope"]  # fmt: skip
        for name, p in per.items():
            pairs = zip(p["mean"], p["std"], strict=True)
            cells = "".join(f"{m:9.1f} +-{s:6.1f}" for m, s in pairs)
            lines.append(name.ljust(13) + cells + "  " + _num(p["slope_vs_d"], ".2f"))
    for family, per in result.get("variation", {}).items():
        first = next(iter(per.values()))
        order = variation_order(first["V_T"])  # columns by increasing V_T
        lines += [f"\n[{family}] final regret vs V_T at d = {cfg['d_variation']}",
                  "V_T".ljust(13) + "".join(f"{first['V_T'][i]:12.3g}" for i in order)
                  + "   slope  slope(top 2 decades)"]  # fmt: skip
        lines += [name.ljust(13) + "".join(f"{p['mean'][i]:12.1f}" for i in order)
                  + f"   {_num(p['slope_vs_V_T'], '.2f')}  {_num(p['slope_vs_V_T_top'], '.2f')}"
                  for name, p in per.items()]  # fmt: skip
    where = [{**r, "setting": f"{r['study']} {r['family']} d={r['d']}"
              + (f" a={r['amplitude']:g} noise={r['noise']:g}" if "amplitude" in r else "")}
             for r in bco_rows(result)]  # fmt: skip
    return "\n".join([*lines, "", *status_lines(where)]) + "\n"


def variation_order(V_T: Sequence[float]) -> list[int]:
    """The V_T study's points by increasing V_T (the i.i.d.-noise point, last in the study,
    takes its place by value; NaN last): the column order of :func:`bco_summary`."""
    v = np.asarray(V_T, np.float64)
    return [int(i) for i in np.argsort(np.where(np.isnan(v), np.inf, v), kind="stable")]


def _num(v: Any, fmt: str) -> str:
    return "-" if v is None or (isinstance(v, float) and not math.isfinite(v)) else format(v, fmt)


def chosen_summary(points: Sequence[tuple[str, str, Mapping[str, Any]]], select: str) -> str:
    """Lines naming the grid point chosen per (learner, setting)."""
    return "\n".join(["", f"Chosen grid points (--select {select}):", *(
        f"  {lr} on {env}: " + ", ".join(f"{k}={v}" for k, v in grid.items())
        for lr, env, grid in points)]) + "\n"  # fmt: skip
