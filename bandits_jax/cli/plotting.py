"""Figures of the commands (matplotlib, Agg backend: no display needed): the EOFD-MLogB paper's
Figures 1 and 2 (:func:`regret_figure`: cumulative regret, mean and one-std band over trials;
:func:`time_figure`: per-round time bars), a sweep's (l, e) heatmaps (:func:`heatmap_figure`),
a speed benchmark's bars (:func:`bench_figure`), the BCO studies (:func:`bco_figure`) and the
kappa study (:func:`kappa_figure`). A learner has one colour in every figure
(:func:`learner_color`); a caller's colour wins. matplotlib is an optional dependency (extra
``plot``), imported when a figure is drawn.
"""

from __future__ import annotations

import math
import os
import textwrap
import zlib
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

__all__ = ["regret_figure", "time_figure", "heatmap_figure", "bench_figure", "bco_figure",
           "kappa_figure", "draw_kappa", "learner_color"]  # fmt: skip

# Other learners: one of these (far from the tab10 colours in CIELAB), chosen by a hash of the
# name, so the same in every figure.
_BY_NAME = ("#0804f9", "#ff08e8", "#3c4d03", "#ff0789", "#8fb67b", "#750851", "#9a6200", "#005249")


def learner_color(name: str) -> str:
    """The colour of learner ``name`` in every figure: a registry kind's
    (:data:`bandits_jax.mlogb.recipes.REGISTRY`), a BCO preset's
    (:data:`bandits_jax.bco.PRESETS`), else a colour drawn from the name itself (not from the
    draw order)."""
    from bandits_jax.bco import PRESETS
    from bandits_jax.mlogb.recipes import REGISTRY

    row = REGISTRY.get(name) or PRESETS.get(name)
    return row.color if row else _BY_NAME[zlib.crc32(name.encode()) % len(_BY_NAME)]


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


def _panels(plt, n: int, width: float, height: float, **kw: Any) -> tuple[Any, list[Any]]:
    """A figure of ``n`` panels (``width`` x ``height`` inches each) on a grid of at most three
    columns, the unused cells blank (``kw``: to ``plt.subplots``); returns the figure and the
    ``n`` panels' axes, row by row."""
    cols = min(n, 3)
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(width * cols, height * rows), squeeze=False, **kw)
    axes = list(axes.flat)
    for ax in axes[n:]:
        ax.axis("off")
    return fig, axes[:n]


def _wrap(text: str, inches: float, fontsize: float = 10) -> str:
    """``text`` wrapped to lines of about ``inches`` at ``fontsize``."""
    return textwrap.fill(text, max(12, int(inches * 72 / (0.6 * fontsize))))


def _save(plt, fig, path: str | os.PathLike) -> None:
    if fig.get_layout_engine() is None:
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
    """Cumulative regret curves with one-std bands to ``path``, one panel per ``(title, {legend
    label: (trials, T) per-round regret})`` (``colors``: label -> colour, else
    :func:`learner_color`). A curve that ends more than :data:`OFF_SCALE` times above every
    other one (e.g. uniform choice) is left off the scale (its legend entry says where it ends)."""
    colors = colors or {}
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
            color = colors.get(name) or learner_color(name)
            off_scale = off and finals[name] == top
            label = f"{name} (ends at {mean[-1]:.0f}, off scale)" if off_scale else name
            ax.plot(t, mean, label=label, color=color)
            ax.fill_between(t, mean - std, mean + std, alpha=0.25, color=color, linewidth=0)
        if off:
            ax.set_ylim(
                0, 1.3 * max(m[-1] + s[-1] for n, (m, s) in stats.items() if finals[n] < top)
            )
        ax.set(xlabel="round t", ylabel="cumulative regret")
        ax.set_title(_wrap(title, 4.6), fontsize=10)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="upper left")
    _save(plt, fig, path)


def time_figure(
    panels: Sequence[tuple[str, Mapping[str, Sequence[float]]]],
    path: str | os.PathLike,
    *,
    colors: Mapping[str, str | None] | None = None,
) -> None:
    """Per-round time, horizontal bars (mean over trials, one-std error bars, the mean written
    beside), one panel per setting; the learners' names on the shared y axis, one row each (a
    learner a setting did not run says so), so that no label overlaps another.

    ``panels``: ``(title, {legend label: per-trial seconds per round})``; ``colors`` as in
    :func:`regret_figure`."""
    colors = colors or {}
    plt = _plt()
    names = list(dict.fromkeys(n for _, times in panels for n in times))
    label_w = 0.08 * max((len(n) for n in names), default=0)  # inches, fontsize 9
    fig, axes = _panels(plt, len(panels), 3.4, 1.1 + 0.32 * max(len(names), 1), sharey=True)
    fig.set_figwidth(fig.get_figwidth() + label_w)
    y = np.arange(len(names))
    for ax, (title, times) in zip(axes, panels, strict=True):
        top = 0.0
        for i, name in enumerate(names):
            if name not in times:
                ax.text(0, i, " not run", va="center", fontsize=8, color="0.4", style="italic")
                continue
            ms = 1e3 * np.asarray(times[name], np.float64)
            mean, std = ms.mean(), ms.std(ddof=1) if ms.size > 1 else 0.0
            color = colors.get(name) or learner_color(name)
            ax.barh(i, mean, xerr=std, height=0.7, capsize=3, color=color)
            ax.text(mean + std, i, f" {mean:.3g}", va="center", fontsize=8)
            top = max(top, mean + std)
        ax.set_xlim(0, 1.4 * top if top > 0 else 1.0)
        ax.set_yticks(y, names, fontsize=9)
        ax.set_title(_wrap(title, 3.4), fontsize=10)
        ax.set_xlabel("time per round (ms)")
        ax.grid(axis="x", alpha=0.3)
    axes[0].set_ylim(len(names) - 0.5, -0.5)  # first learner on top (the y axis is shared)
    _save(plt, fig, path)


def _text_color(rgba: Sequence[float]) -> str:
    """Black or white, whichever contrasts more with ``rgba`` (WCAG relative luminance)."""
    c = np.asarray(rgba[:3], np.float64)
    lin = np.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)
    return "k" if lin @ (0.2126, 0.7152, 0.0722) > 0.179 else "w"


def _cell_text(x: float) -> str:
    """A heatmap cell's number: three significant digits, thousands as integers."""
    return f"{x:.0f}" if 1e3 <= abs(x) < 1e5 else f"{x:.3g}"


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
    per_panel_scale: bool = False,
) -> None:
    """One heatmap per ``(title, (len(row_values), len(col_values)) values)`` panel over a 2-D
    grid (e.g. mean final regret over (l, e)), each cell's value written in it (black on light
    cells, white on dark ones) at fontsize 8 (smaller only for grids too wide for the page);
    ``log10``: plot ``log10(values)`` (non-positive blank); ``per_panel_scale``: one colour
    scale per panel instead of one for every panel (the range of all finite values)."""
    plt = _plt()
    grids = []
    for _, values in panels:
        v = np.asarray(values, np.float64)
        if log10:
            with np.errstate(divide="ignore", invalid="ignore"):
                v = np.where(v > 0, np.log10(v), np.nan)
        grids.append(v)
    finite = np.concatenate([v[np.isfinite(v)] for v in grids] + [np.zeros(0)])
    vmin, vmax = (
        (None, None) if per_panel_scale or not finite.size else (finite.min(), finite.max())
    )
    xt, yt = [f"{c:g}" for c in col_values], [f"{r:g}" for r in row_values]
    chars = max(len(t) for t in [*xt, *map(_cell_text, finite), "0"])
    cell_w = (0.7 * chars + 1.0) * 8 / 72  # inches that hold `chars` characters at fontsize 8
    grid_w = min(len(xt) * cell_w, 7.0)
    font = 8 * grid_w / (len(xt) * cell_w)
    # at least 2.5 x 2.5 inches: room for the title, ticks and colorbar of a 1 x 1 grid
    width = max(grid_w + 1.0 + (1.0 if per_panel_scale else 0.0), 2.5)
    height = max(len(yt) * 0.3, 1.3) + 1.2
    fig, axes = _panels(plt, len(panels), width, height, layout="constrained")
    label = ("log10 " if log10 else "") + (cbar_label or "value")
    for ax, (title, _), v in zip(axes, panels, grids, strict=True):
        im = ax.imshow(v, origin="lower", aspect="auto", cmap="viridis", vmin=vmin, vmax=vmax)
        ax.set_xticks(range(len(xt)), xt, fontsize=8, rotation=0 if font >= 8 else 90)
        ax.set_yticks(range(len(yt)), yt, fontsize=8)
        ax.set_xlabel(col_label)
        ax.set_ylabel(row_label, rotation=0 if len(row_label) < 3 else 90)
        ax.set_title(_wrap(title, width - 0.5, 9), fontsize=9)
        for (i, j), x in np.ndenumerate(v):
            if np.isfinite(x) and font >= 5:
                color = _text_color(im.cmap(im.norm(x)))
                ax.text(j, i, _cell_text(x), ha="center", va="center", fontsize=font, color=color)
        if per_panel_scale:
            fig.colorbar(im, ax=ax, label=_wrap(f"{label} (per-panel scale)", height - 0.8))
    if not per_panel_scale and axes:
        text = _wrap(f"{label} (one scale, every panel)", 0.6 * fig.get_figheight())
        fig.colorbar(im, ax=axes, label=text, shrink=0.6)
    _save(plt, fig, path)


def bench_figure(cases: Sequence[Mapping[str, Any]], path: str | os.PathLike) -> None:
    """Grouped bars of a benchmark's cases, log scale: per-round times (number-valued keys ending
    in ``_s``, compile times excluded) when the cases have them (``benchmarks.mlogb_speed``),
    else throughputs (keys with ``rounds_per_s``, ``benchmarks.bco_speed``). The bars are
    measurements, not learners: their colours are none of the learners'."""
    plt = _plt()
    keys = list(dict.fromkeys(k for c in cases for k, v in c.items() if _number(v)))
    times = [k for k in keys if k.endswith("_s") and "compile" not in k and "per_s" not in k]
    if times:
        keys, scale, ylabel = times, 1e3, "time per round (ms)"
    else:
        keys = [k for k in keys if "rounds_per_s" in k]
        scale, ylabel = 1.0, "rounds per second"
    labels = [", ".join(f"{k}={c[k]}" for k in ("learner", "d", "K", "m") if k in c) for c in cases]
    fig, ax = plt.subplots(figsize=(max(5.0, 1.6 * len(cases)), 3.8))
    width = 0.8 / max(len(keys), 1)
    palette = plt.get_cmap("Set2").colors  # measurements, not learners: no learner's colour
    for i, k in enumerate(keys):
        vals = [scale * float(c[k]) if _number(c.get(k)) else np.nan for c in cases]
        color = palette[i % len(palette)]
        ax.bar(np.arange(len(cases)) + i * width, vals, width, label=k, color=color)
    ax.set_xticks(np.arange(len(cases)) + width * (len(keys) - 1) / 2, labels, fontsize=7)
    ax.tick_params(axis="x", labelrotation=20)
    ax.set_yscale("log")
    ax.set_ylabel(ylabel)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=7)
    _save(plt, fig, path)


def _number(v: Any) -> bool:
    """Whether a benchmark cell is a plain number (not a spread list, a dict or ``None``)."""
    return isinstance(v, int | float)


def bco_figure(result: Mapping[str, Any], path: str | os.PathLike) -> None:
    """The BCO studies (``bandits-jax bco``): one column per loss family, regret vs d (top) and
    vs V_T (bottom), mean with one-std error bars over seeds, fitted log-log slopes in the
    legend. Studies absent from ``result`` leave their row out; the d axis is labelled at the
    dimensions run."""
    plt = _plt()
    studies = [s for s in ("dimension", "variation") if result.get(s)]
    families = list(dict.fromkeys(f for s in studies for f in result[s]))
    rows, cols = max(len(studies), 1), max(len(families), 1)
    fig, axes = plt.subplots(rows, cols, figsize=(5.5 * cols, 4.2 * rows), squeeze=False)
    cfg = result["config"]

    def fmt(v: Any) -> str:
        return "-" if v is None or not np.isfinite(v) else f"{v:.2f}"

    d_axes = []
    for row, study in enumerate(studies):
        for col, family in enumerate(families):
            ax = axes[row, col]
            per = result[study].get(family, {})
            for name, p in per.items():
                if study == "dimension":
                    x, label = p["d"], f"{name} (slope {fmt(p['slope_vs_d'])})"
                else:
                    x = np.asarray(p["V_T"])
                    slopes = f"{fmt(p['slope_vs_V_T'])}, top {fmt(p['slope_vs_V_T_top'])}"
                    label = f"{name} (slope {slopes})"
                ax.errorbar(x, p["mean"], yerr=p["std"], marker="o", capsize=3, label=label,
                            color=learner_color(name))  # fmt: skip
            if study == "dimension":
                ax.set_xscale("log")
                ax.minorticks_off()
                d_axes.append((ax, sorted({d for p in per.values() for d in p["d"]})))
                ax.set(xlabel="d", title=f"{family}: regret vs d (V_T ~ 0)")
            else:
                ax.set_xscale("symlog", linthresh=0.1)
                ax.set(xlabel="V_T (eq. 1.1)",
                       title=f"{family}: regret vs V_T (d = {cfg['d_variation']})")  # fmt: skip
            ax.set_yscale("log")
            ax.set_ylabel(f"regret at T = {cfg['T']}")
            ax.legend(fontsize=8)
    fig.tight_layout()
    for ax, dims in d_axes:
        _thin_tick_labels(fig, ax, dims)
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
    """The ``bandits-jax kappa`` figure laid out, not saved (:func:`kappa_figure`): the
    matplotlib figure (close it with ``matplotlib.pyplot.close``)."""
    from matplotlib.lines import Line2D

    plt = _plt()
    fig, (ax, ax_g) = plt.subplots(1, 2, figsize=(10.0, 4.0))
    colors: dict[str, str] = {}
    for s in series:
        colors.setdefault(s["label"], s.get("color") or learner_color(s["label"]))
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
    """Final regret against the parameter bound S (``bandits-jax kappa``), log-scaled S. Left:
    mean final regret with standard-error bars; right: the same over its value at the smallest
    S, beside ``reference`` (e.g. the kappa bound ``1/sigma'(S)``) divided likewise. Solid: out
    of the box (``mode`` ``"recipe"``), dashed: tuned per S; overlapping S labels are thinned.
    ``series``: curves ``{"label", "mode", "color" (None: :func:`learner_color`), "S", "mean",
    "se"}``; ``title``: appended to the left panel's; ``reference``: ``{"S", "value", "label"}``."""
    plt = _plt()
    fig = draw_kappa(series, title=title, reference=reference)
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)
