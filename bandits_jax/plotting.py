"""Figures for the command line (matplotlib, Agg backend: no display needed).

* :func:`regret_figure` -- the EOFD-MLogB paper's Figure 1: cumulative regret, mean over trials
  with a one-sample-standard-deviation band, one panel per setting.
* :func:`time_figure` -- its Figure 2: average per-round time, bars with one-std error bars.
* :func:`heatmap_figure` -- a sweep's (l, e) grid: mean final regret and the exploration
  diagnostic (log10 of the bonus / estimate spread ratio).
* :func:`bench_figure` -- per-round times of a speed benchmark, log scale.
* :func:`bco_figure` -- the BCO studies: regret vs d and vs the gradient variation V_T (log-log,
  fitted slopes in the legend).
* :func:`kappa_figure` -- the kappa study: final regret vs the parameter bound S (log S), out of
  the box (solid) and tuned per S (dashed), and its growth beside the kappa bound.

matplotlib is an optional dependency (extra ``plot``); it is imported when a figure is drawn.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

__all__ = [
    "regret_figure",
    "time_figure",
    "heatmap_figure",
    "bench_figure",
    "bco_figure",
    "kappa_figure",
    "draw_kappa",
]

COLORS = {"EOFD": "tab:blue", "OFUL": "tab:orange"}  # used when no colour is given


def _plt():
    try:
        import matplotlib
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError(
            "Figures need matplotlib, an optional dependency: pip install 'bandits_jax[plot]'"
        ) from e
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def _panels(plt, n: int, width: float, height: float) -> tuple[Any, list[Any]]:
    """A figure of ``n`` panels (``width`` x ``height`` inches each) on a grid of at most three
    columns, the unused cells blank; returns the figure and the ``n`` panels' axes, row by row."""
    cols = min(n, 3)
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(width * cols, height * rows), squeeze=False)
    axes = list(axes.flat)
    for ax in axes[n:]:
        ax.axis("off")
    return fig, axes[:n]


def _save(plt, fig, path: str | os.PathLike) -> None:
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


OFF_SCALE = 3.0  # regret_figure: a curve this far above all others is left off the scale


def regret_figure(
    panels: Sequence[tuple[str, Mapping[str, np.ndarray]]],
    path: str | os.PathLike,
    *,
    colors: Mapping[str, str | None] | None = None,
) -> None:
    """Cumulative regret curves with one-std bands.

    A curve that ends more than :data:`OFF_SCALE` times above every other one (e.g. the uniform
    choice) is left off the scale, so that the others can be told apart: its legend entry says
    where it ends.

    Args:
      panels: ``(title, {legend label: (trials, T) per-round regret})`` per setting.
      path: the PNG to write.
      colors: legend label -> matplotlib colour (missing or ``None``: the default cycle).
    """
    colors = {**COLORS, **(colors or {})}
    plt = _plt()
    fig, axes = _panels(plt, len(panels), 4.6, 3.6)
    for ax, (title, curves) in zip(axes, panels, strict=True):
        stats = {}
        for name, regret in curves.items():
            cum = np.cumsum(np.asarray(regret, np.float64), axis=-1)
            std = cum.std(axis=0, ddof=1) if cum.shape[0] > 1 else np.zeros(cum.shape[-1])
            stats[name] = (cum.mean(axis=0), std)
        finals = {name: m[-1] for name, (m, _) in stats.items()}
        top = max(finals.values(), default=0.0)
        rest = [v for v in finals.values() if v < top]
        off = len(rest) > 0 and top > OFF_SCALE * max(rest) > 0
        for name, (mean, std) in stats.items():
            t = np.arange(1, mean.size + 1)
            color = colors.get(name)
            label = (
                f"{name} (ends at {mean[-1]:.0f}, off scale)"
                if off and finals[name] == top
                else name
            )
            ax.plot(t, mean, label=label, color=color)
            ax.fill_between(t, mean - std, mean + std, alpha=0.25, color=color, linewidth=0)
        if off:
            ax.set_ylim(
                0, 1.3 * max(m[-1] + s[-1] for n, (m, s) in stats.items() if finals[n] < top)
            )
        ax.set_title(title)
        ax.set_xlabel("round t")
        ax.set_ylabel("cumulative regret")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="upper left")
    _save(plt, fig, path)


def time_figure(
    panels: Sequence[tuple[str, Mapping[str, Sequence[float]]]],
    path: str | os.PathLike,
    *,
    colors: Mapping[str, str | None] | None = None,
) -> None:
    """Per-round time bars (mean over trials, one-std error bars), one panel per setting.

    Args:
      panels: ``(title, {legend label: per-trial seconds per round})``.
      path: the PNG to write.
      colors: legend label -> matplotlib colour (missing or ``None``: grey).
    """
    colors = {**COLORS, **(colors or {})}
    plt = _plt()
    fig, axes = _panels(plt, len(panels), 3.6, 3.4)
    for ax, (title, times) in zip(axes, panels, strict=True):
        names = list(times)
        ms = [1e3 * np.asarray(times[n], np.float64) for n in names]
        means = [m.mean() for m in ms]
        stds = [m.std(ddof=1) if m.size > 1 else 0.0 for m in ms]
        ax.bar(
            names,
            means,
            yerr=stds,
            capsize=4,
            color=[colors.get(n) or "tab:gray" for n in names],
        )
        ax.tick_params(axis="x", labelrotation=20 if len(names) > 3 else 0)
        ax.set_title(title)
        ax.set_ylabel("time per round (ms)")
        ax.grid(axis="y", alpha=0.3)
    _save(plt, fig, path)


def heatmap_figure(
    panels: Sequence[tuple[str, np.ndarray]],
    row_values: Sequence[Any],
    col_values: Sequence[Any],
    path: str | os.PathLike,
    *,
    row_label: str = "l",
    col_label: str = "e",
    cbar_label: str = "",
    log10: bool = False,
) -> None:
    """One heatmap per panel over a 2-D grid (e.g. mean final regret over (l, e)).

    Args:
      panels: ``(title, (len(row_values), len(col_values)) values)``.
      row_values, col_values: tick labels.
      path: the PNG to write.
      log10: plot ``log10(values)`` (non-positive values shown blank).
    """
    plt = _plt()
    fig, axes = _panels(plt, len(panels), 4.4, 3.8)
    for ax, (title, values) in zip(axes, panels, strict=True):
        v = np.asarray(values, np.float64)
        if log10:
            with np.errstate(divide="ignore", invalid="ignore"):
                v = np.where(v > 0, np.log10(v), np.nan)
        im = ax.imshow(v, origin="lower", aspect="auto", cmap="viridis")
        ax.set_xticks(range(len(col_values)), [f"{c:g}" for c in col_values])
        ax.set_yticks(range(len(row_values)), [f"{r:g}" for r in row_values])
        ax.set_xlabel(col_label)
        ax.set_ylabel(row_label)
        ax.set_title(title, fontsize=9)
        for (i, j), x in np.ndenumerate(v):
            if np.isfinite(x):
                ax.text(j, i, f"{x:.3g}", ha="center", va="center", fontsize=6, color="w")
        fig.colorbar(im, ax=ax, label=("log10 " if log10 else "") + cbar_label)
    _save(plt, fig, path)


def bench_figure(cases: Sequence[Mapping[str, Any]], path: str | os.PathLike) -> None:
    """Grouped bars of a benchmark's cases, log scale: per-round times (keys ending in ``_s``,
    compile times excluded) when the cases have them (``benchmarks.mlogb_speed``), else
    throughputs (keys with ``rounds_per_s``, ``benchmarks.bco_speed``)."""
    plt = _plt()
    keys = list(dict.fromkeys(k for c in cases for k in c))
    times = [k for k in keys if k.endswith("_s") and "compile" not in k and "per_s" not in k]
    if times:
        keys, scale, ylabel = times, 1e3, "time per round (ms)"
    else:
        keys = [k for k in keys if "rounds_per_s" in k]
        scale, ylabel = 1.0, "rounds per second"
    labels = [", ".join(f"{k}={c[k]}" for k in ("learner", "d", "K", "m") if k in c) for c in cases]
    fig, ax = plt.subplots(figsize=(max(5.0, 1.6 * len(cases)), 3.8))
    width = 0.8 / max(len(keys), 1)
    for i, k in enumerate(keys):
        vals = [scale * float(c[k]) if c.get(k) is not None else np.nan for c in cases]
        ax.bar(np.arange(len(cases)) + i * width, vals, width, label=k)
    ax.set_xticks(np.arange(len(cases)) + width * (len(keys) - 1) / 2, labels, fontsize=7)
    ax.tick_params(axis="x", labelrotation=20)
    ax.set_yscale("log")
    ax.set_ylabel(ylabel)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=7)
    _save(plt, fig, path)


def bco_figure(result: Mapping[str, Any], path: str | os.PathLike) -> None:
    """The BCO studies (``bandits-jax bco``): one column per loss family, regret vs d (top) and
    vs V_T (bottom), mean with one-std error bars over seeds, fitted log-log slopes in the
    legend. Studies absent from ``result`` leave their row out."""
    plt = _plt()
    studies = [s for s in ("dimension", "variation") if result.get(s)]
    families = list(dict.fromkeys(f for s in studies for f in result[s]))
    fig, axes = plt.subplots(
        max(len(studies), 1),
        max(len(families), 1),
        figsize=(5.5 * max(len(families), 1), 4.2 * max(len(studies), 1)),
        squeeze=False,
    )
    cfg = result["config"]

    def fmt(v: Any) -> str:
        return "-" if v is None or not np.isfinite(v) else f"{v:.2f}"

    for row, study in enumerate(studies):
        for col, family in enumerate(families):
            ax = axes[row, col]
            for name, p in result[study].get(family, {}).items():
                if study == "dimension":
                    x, label = p["d"], f"{name} (slope {fmt(p['slope_vs_d'])})"
                else:
                    x = np.asarray(p["V_T"])
                    label = (
                        f"{name} (slope {fmt(p['slope_vs_V_T'])}, top {fmt(p['slope_vs_V_T_top'])})"
                    )
                ax.errorbar(x, p["mean"], yerr=p["std"], marker="o", capsize=3, label=label)
            if study == "dimension":
                ax.set_xscale("log")
                ax.set_xlabel("d")
                ax.set_title(f"{family}: regret vs d (V_T ~ 0)")
            else:
                ax.set_xscale("symlog", linthresh=0.1)
                ax.set_xlabel("V_T (eq. 1.1)")
                ax.set_title(f"{family}: regret vs V_T (d = {cfg['d_variation']})")
            ax.set_yscale("log")
            ax.set_ylabel(f"regret at T = {cfg['T']}")
            ax.legend(fontsize=8)
    _save(plt, fig, path)


def _thin_tick_labels(fig: Any, ax: Any, values: Sequence[float], pad: float = 2.0) -> None:
    """Sets the x ticks at ``values`` (sorted) with ``%g`` labels, blanking any label that would
    overlap a kept one (kept left to right; the last value is always labelled)."""
    texts = [f"{v:g}" for v in values]
    ax.set_xticks(values, texts)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    boxes = [t.get_window_extent(renderer) for t in ax.get_xticklabels()]
    if len(boxes) != len(values):  # pragma: no cover - every tick is inside the view
        return
    keep: list[int] = []
    for i, b in enumerate(boxes):
        if not keep or b.x0 >= boxes[keep[-1]].x1 + pad:
            keep.append(i)
    last = len(values) - 1
    if keep and keep[-1] != last:
        keep = [i for i in keep if boxes[i].x1 + pad <= boxes[last].x0] + [last]
    ax.set_xticks(values, [s if i in keep else "" for i, s in enumerate(texts)])


def draw_kappa(
    series: Sequence[Mapping[str, Any]],
    *,
    title: str = "",
    reference: Mapping[str, Sequence[float]] | None = None,
) -> Any:
    """The ``bandits-jax kappa`` figure, laid out but not saved (see :func:`kappa_figure`).

    Returns:
      The matplotlib figure (close it with ``matplotlib.pyplot.close``).
    """
    from matplotlib.lines import Line2D

    plt = _plt()
    fig, (ax, ax_g) = plt.subplots(1, 2, figsize=(10.0, 4.0))
    cycle = plt.rcParams["axes.prop_cycle"].by_key().get("color", ["k"])
    colors: dict[str, str] = {}
    for s in series:
        colors.setdefault(s["label"], s.get("color") or cycle[len(colors) % len(cycle)])
    style = {"recipe": ("-", "o"), "tuned": ("--", "s")}
    S_all = sorted({float(x) for s in series for x in s["S"]})
    all_pos = True
    for s in series:
        ls, marker = style.get(s["mode"], ("-", "o"))
        x = np.asarray(s["S"], np.float64)
        m = np.asarray(s["mean"], np.float64)
        se = np.asarray(s["se"], np.float64)
        c = colors[s["label"]]
        mfc = "none" if s["mode"] == "tuned" else c  # open markers: a tuned point on the recipe's
        ax.errorbar(x, m, yerr=se, color=c, linestyle=ls, marker=marker, capsize=3, ms=5, mfc=mfc)
        all_pos &= bool(np.all(m > 0))
        if m.size and m[0] > 0:
            ax_g.plot(x, m / m[0], color=c, linestyle=ls, marker=marker, ms=5, mfc=mfc)
    handles = [Line2D([], [], color=c, label=name) for name, c in colors.items()]
    handles += [
        Line2D([], [], color="k", linestyle="-", marker="o", label="out of the box (recipe)"),
        Line2D([], [], color="k", linestyle="--", marker="s", mfc="none", label="tuned per S"),
    ]
    if reference is not None and len(reference["S"]):
        rx = np.asarray(reference["S"], np.float64)
        ry = np.asarray(reference["value"], np.float64)
        order = np.argsort(rx)
        ax_g.plot(rx[order], ry[order] / ry[order][0], color="k", linestyle=":", linewidth=1.5)
        handles.append(
            Line2D([], [], color="k", linestyle=":", label=reference.get("label", "kappa bound"))
        )
    for a in (ax, ax_g):
        a.set_xscale("log")
        a.minorticks_off()
        a.set_xlabel("parameter bound S = ||W*||_F (log scale)")
        a.grid(alpha=0.3)
    from matplotlib.ticker import LogFormatter

    for a in (ax, ax_g) if all_pos and series else (ax_g,):
        a.set_yscale("log")
        a.yaxis.set_major_formatter(LogFormatter())  # plain numbers, not 6 x 10^1
        a.yaxis.set_minor_formatter(LogFormatter(labelOnlyBase=False))
    ax.set_ylabel("final cumulative regret (mean +- s.e.)")
    ax_g.set_ylabel("regret(S) / regret(smallest S)")
    ax.set_title(f"final regret vs S{': ' + title if title else ''}", fontsize=10)
    ax_g.set_title("growth with S (vs the kappa bound)", fontsize=10)
    fig.legend(handles=handles, loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=8)
    fig.tight_layout()
    for a in (ax, ax_g):
        _thin_tick_labels(fig, a, S_all)
    return fig


def kappa_figure(
    series: Sequence[Mapping[str, Any]],
    path: str | os.PathLike,
    *,
    title: str = "",
    reference: Mapping[str, Sequence[float]] | None = None,
) -> None:
    """Final regret against the parameter bound S (``bandits-jax kappa``), log-scaled S.

    Left: mean final regret with standard-error bars; right: the same divided by its value at
    the smallest S, beside ``reference`` (e.g. the kappa bound ``1/sigma'(S)``) divided likewise.
    One colour per learner, solid = out of the box (``mode`` ``"recipe"``), dashed = tuned per S
    (``"tuned"``); the legend sits outside the panels and overlapping S labels are thinned.

    Args:
      series: curves, each ``{"label", "mode", "color" (None: the default cycle), "S", "mean",
        "se"}``.
      path: the PNG to write.
      title: appended to the left panel's title.
      reference: ``{"S": [...], "value": [...], "label": optional}``.
    """
    plt = _plt()
    fig = draw_kappa(series, title=title, reference=reference)
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)
