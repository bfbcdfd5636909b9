"""Figures: the regret figure keeps the learners that can be told apart on scale; every figure
renders with long names and many panels without overlapping text; one colour per learner in
every figure; the heatmaps share one colour scale unless asked otherwise."""

import warnings

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from matplotlib.colors import to_rgba  # noqa: E402
from matplotlib.text import Text  # noqa: E402

from bandits_jax.cli import plotting  # noqa: E402

# The registry's legends (the longest names that reach the figures) and one name no registry has.
LONG = [
    "EOFD-MLogB robust (tuned)",
    "EOFD-MLogB (tuned)",
    "OFUL-MLogB (tuned)",
    "ada-OFU-ECOLog (tuned)",
    "LinUCB (tuned)",
    "uniform random",
]
NEW = "my experimental learner (v2)"
TITLES = [
    "synthetic (d, K) = (20, 4), S = 8",
    "low-rank (d, K, r) = (100, 4, 5)",
    "digits, 10 classes in turn (d = 65, half 1)",
]


def _draw(curves, tmp_path, monkeypatch):
    saved = []
    monkeypatch.setattr(plotting, "_save", lambda plt_, fig, path: saved.append(fig))
    plotting.regret_figure([("panel", curves)], tmp_path / "r.png")
    return saved[0].axes[0]


def test_a_curve_far_above_the_others_is_left_off_scale(tmp_path, monkeypatch):
    rng = np.random.default_rng(0)
    curves = {
        "random": 1.0 + 0.0 * rng.random((3, 50)),  # ends at 50
        "a": 0.1 * np.ones((3, 50)),  # ends at 5
        "b": 0.2 * np.ones((3, 50)),  # ends at 10
    }
    ax = _draw(curves, tmp_path, monkeypatch)
    top = ax.get_ylim()[1]
    assert 10 <= top < 50  # the others fit, the far curve does not
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels[0] == "random (ends at 50, off scale)" and labels[1:] == ["a", "b"]
    plt.close("all")


def test_close_curves_keep_the_full_scale(tmp_path, monkeypatch):
    curves = {"a": 0.5 * np.ones((2, 40)), "b": np.ones((2, 40))}  # ends at 20 and 40
    ax = _draw(curves, tmp_path, monkeypatch)
    assert ax.get_ylim()[1] >= 40
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["a", "b"]
    plt.close("all")


# ----------------------------------------------------------------------------- every figure


@pytest.fixture
def figures(monkeypatch):
    """The figures the plotting functions close, kept open (laid out and saved as usual)."""
    kept, close = [], plt.close
    monkeypatch.setattr(plt, "close", kept.append)
    yield kept
    for fig in kept:
        close(fig)


def _drawn_texts(fig):
    """``(text, window box)`` of every non-empty text the renderer draws in ``fig``."""
    drawn, draw = [], Text.draw

    def record(self, renderer):
        draw(self, renderer)
        if self.get_visible() and self.get_text().strip():
            drawn.append((self, self.get_window_extent(renderer)))

    Text.draw = record
    try:
        fig.canvas.draw()
    finally:
        Text.draw = draw
    return drawn


def _overlaps(drawn):
    """The pairs of drawn texts whose boxes share more than a pixel's width and height."""
    b = np.array([[x.x0, x.y0, x.x1, x.y1] for _, x in drawn])
    w = np.minimum(b[:, None, 2], b[None, :, 2]) - np.maximum(b[:, None, 0], b[None, :, 0])
    h = np.minimum(b[:, None, 3], b[None, :, 3]) - np.maximum(b[:, None, 1], b[None, :, 1])
    i, j = np.nonzero(np.triu((w > 1) & (h > 1), k=1))
    return [(drawn[a][0].get_text(), drawn[c][0].get_text()) for a, c in zip(i, j, strict=True)]


def _regret_panels(names, T=300, trials=4):
    rng = np.random.default_rng(1)
    return [
        (title, {n: rng.random((trials, T)) * (k + 1) / len(names) for k, n in enumerate(names)})
        for title in TITLES
    ]


def _time_panels(names):
    rng = np.random.default_rng(2)
    scales = [3e-4, 5e-5, 4e-2, 2e-3, 1e-4, 1e-6]  # 1 us to 40 ms per round
    panels = [
        (title, {n: s * (1 + 0.1 * rng.random(4)) for n, s in zip(names, scales, strict=False)})
        for title in TITLES
    ]
    panels[2][1].pop(names[-1])  # a learner a setting does not run (ECOLog where K > 1)
    return panels


def _heatmap_panels(n=16, shape=(7, 7)):
    rng = np.random.default_rng(3)
    panels = []
    for k in range(n):
        v = 10.0 ** (k / 3 - 1) * (1 + 9 * rng.random(shape))  # 0.1 .. 1e5 over the panels
        v[0, 0] = np.nan if k == 5 else v[0, 0]
        panels.append((f"EOFD robust synth-20-4-S8 beta={k}", v))
    return panels


GRID = [-0.5, -0.25, 0.0, 0.25, 0.5, 0.75, 1.0]


def _bench_cases():
    """``benchmarks.mlogb_speed``- and ``bco_speed``-like cases, spreads (lists) and all."""
    mlogb = [
        {"d": d, "K": K, "m": m, "jax_eofd_s": 1e-4 * d, "jax_eofd_compile_s": 3.0,
         "jax_eofd_spread_s": [9e-5 * d, 1.1e-4 * d], "numpy_eofd_s": 2e-3 * d,
         **({"jax_oful_s": 4e-2} if K * d <= 400 else {}),
         "rounds_per_s_1": 900.0, "rounds_per_s_64": 4e4, "rounds_per_s_1_spread": [800, 950]}
        for d, K, m in [(20, 4, 8), (100, 4, 40), (400, 1, 40), (785, 1, 78), (1000, 10, 100)]
    ]  # fmt: skip
    bco = [
        {"learner": name, "d": d, "jax_rounds_per_s_1": 1e5 / d, "jax_rounds_per_s_64": 3e6 / d,
         "numpy_rounds_per_s": None if name == "universal" else 1e4 / d, "compile_s_1": 0.5,
         "rounds_timed": {"jax_1": 1000}}
        for d in (10, 100, 1000) for name in ("alg1", "alg4", "universal")
    ]  # fmt: skip
    return mlogb, bco


def _bco_result():
    def point(x, slope):
        mean = [10.0 * (v + 1) ** slope for v in x]
        return {"mean": mean, "std": [0.1 * m for m in mean]}

    dims = [5, 10, 20, 40, 80]
    V = [0.0, 0.03, 0.3, 3.0, 30.0, 300.0, 0.5]
    fams = {"convex": ("alg1_thm3", "alg1_thm1", "sphere"),
            "strongly_convex": ("alg1_thm2", "chiang2013", "sphere_thm8")}  # fmt: skip
    return {
        "config": {"T": 10000, "d_variation": 20},
        "dimension": {
            f: {n: {"d": dims, **point(dims, 0.5), "slope_vs_d": 0.51} for n in names}
            for f, names in fams.items()
        },
        "variation": {
            f: {
                n: {"V_T": V, **point(V, 0.3), "slope_vs_V_T": 0.3, "slope_vs_V_T_top": np.nan}
                for n in names
            }
            for f, names in fams.items()
        },
    }


def _kappa_series(names, S=(1.0, 1.5, 2.0, 4.0, 8.0, 16.0)):
    return [
        {"label": n, "mode": mode, "color": None, "S": list(S),
         "mean": [20.0 * (k + 1) * s**0.5 * (0.8 if mode == "tuned" else 1.0) for s in S],
         "se": [1.0] * len(S)}
        for k, n in enumerate(names) for mode in ("recipe", "tuned")
    ]  # fmt: skip


@pytest.mark.long  # minutes of CPU: CI runs it after the default suite
@pytest.mark.slow
def test_every_figure_renders_without_overlapping_text(tmp_path, figures):
    names = LONG[:5] + [NEW]
    mlogb_cases, bco_cases = _bench_cases()
    ref = {"S": [1.0, 16.0], "value": [1.0, 30.0], "label": "kappa bound"}
    calls = {
        "regret": lambda p: plotting.regret_figure(_regret_panels(names), p),
        "time": lambda p: plotting.time_figure(_time_panels(names), p),
        "heatmap": lambda p: plotting.heatmap_figure(
            _heatmap_panels(), GRID, GRID, p, cbar_label="mean final regret"
        ),
        "heatmap log10": lambda p: plotting.heatmap_figure(
            _heatmap_panels(6), GRID, GRID, p, cbar_label="spread ratio", log10=True
        ),
        "heatmap per panel": lambda p: plotting.heatmap_figure(
            _heatmap_panels(5), GRID, GRID, p, per_panel_scale=True
        ),
        "heatmap wide grid": lambda p: plotting.heatmap_figure(
            _heatmap_panels(2, (3, 24)), GRID[:3], np.linspace(-0.5, 1, 24), p
        ),
        "bench mlogb": lambda p: plotting.bench_figure(mlogb_cases, p),
        "bench bco": lambda p: plotting.bench_figure(bco_cases, p),
        "bco": lambda p: plotting.bco_figure(_bco_result(), p),
        "kappa": lambda p: plotting.kappa_figure(
            _kappa_series(names), p, title="synth-20-4, T = 2000", reference=ref
        ),
    }
    for name, call in calls.items():
        path = tmp_path / f"{name}.png"
        call(path)
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name
        drawn = _drawn_texts(figures[-1])
        assert len(drawn) > 10, name
        assert not _overlaps(drawn), (name, _overlaps(drawn)[:5])
        if name != "kappa":  # saved with bbox_inches="tight": the image holds every text
            box = figures[-1].bbox
            cut = [
                t.get_text()
                for t, b in drawn
                if min(b.x0, b.y0) < -1 or b.x1 > box.x1 + 1 or b.y1 > box.y1 + 1
            ]
            assert not cut, (name, cut)


def test_heatmap_numbers_are_legible(figures, tmp_path):
    plotting.heatmap_figure(_heatmap_panels(), GRID, GRID, tmp_path / "h.png")
    fig = figures[-1]
    for ax in fig.axes:
        if not ax.images:
            continue
        im = ax.images[0]
        values = im.get_array()
        assert len(ax.texts) == np.isfinite(values).sum()
        for t in ax.texts:
            j, i = (round(c) for c in t.get_position())
            assert t.get_fontsize() >= 8
            assert float(t.get_text()) == pytest.approx(values[i, j], rel=6e-3)
            assert _contrast(t.get_color(), im.cmap(im.norm(values[i, j]))) >= 4.5


def _contrast(a, b):
    """WCAG contrast ratio of two colours."""

    def lum(c):
        rgb = np.asarray(to_rgba(c)[:3])
        lin = np.where(rgb <= 0.04045, rgb / 12.92, ((rgb + 0.055) / 1.055) ** 2.4)
        return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]

    hi, lo = sorted((lum(a), lum(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def test_heatmap_panels_share_one_scale_unless_asked(figures, tmp_path):
    panels = _heatmap_panels(4)
    finite = np.concatenate([v[np.isfinite(v)] for _, v in panels])
    plotting.heatmap_figure(panels, GRID, GRID, tmp_path / "h.png", cbar_label="regret")
    fig = figures[-1]
    images = [ax.images[0] for ax in fig.axes if ax.images]
    assert len(images) == 4
    for im in images:
        assert im.get_clim() == pytest.approx((finite.min(), finite.max()))
    bars = [ax for ax in fig.axes if ax.get_label() == "<colorbar>"]
    assert len(bars) == 1 and "regret" in bars[0].get_ylabel()

    plotting.heatmap_figure(panels, GRID, GRID, tmp_path / "p.png", per_panel_scale=True)
    fig = figures[-1]
    images = [ax.images[0] for ax in fig.axes if ax.images]
    for im, (_, v) in zip(images, panels, strict=True):
        assert im.get_clim() == pytest.approx((np.nanmin(v), np.nanmax(v)))
    bars = [ax for ax in fig.axes if ax.get_label() == "<colorbar>"]
    assert len(bars) == 4 and all("per-panel scale" in b.get_ylabel() for b in bars)


# ----------------------------------------------------------------------------- colours


def _regret_colors(fig):
    return {
        ln.get_label(): to_rgba(ln.get_color())
        for ax in fig.axes
        for ln in ax.get_lines()
        if not ln.get_label().startswith("_")
    }


def _time_colors(fig):
    first = fig.axes[0]  # the panels share its y axis: the learners' names
    names = {
        round(y): t.get_text()
        for y, t in zip(first.get_yticks(), first.get_yticklabels(), strict=True)
    }
    out = {}
    for ax in fig.axes:
        for bar in ax.patches:
            out[names[round(bar.get_y() + bar.get_height() / 2)]] = to_rgba(bar.get_facecolor())
    return out


def _kappa_colors(fig):
    legend = fig.legends[0]
    return {
        t.get_text(): to_rgba(h.get_color())
        for t, h in zip(legend.texts, legend.legend_handles, strict=True)
    }


def test_a_learner_has_one_colour_in_every_figure(tmp_path, figures):
    from bandits_jax.mlogb.recipes import REGISTRY

    plotting.regret_figure(_regret_panels([NEW, LONG[0], LONG[4]]), tmp_path / "r.png")
    regret = _regret_colors(figures[-1])
    plotting.time_figure(_time_panels([LONG[4], LONG[2], NEW]), tmp_path / "t.png")
    time = _time_colors(figures[-1])
    plotting.kappa_figure(_kappa_series([LONG[1], LONG[0], NEW, LONG[4]]), tmp_path / "k.png")
    kappa = _kappa_colors(figures[-1])
    assert regret[NEW] == time[NEW] == kappa[NEW]  # first, last and third drawn
    assert regret[LONG[4]] == time[LONG[4]] == kappa[LONG[4]]
    # every registry kind has a colour of its own, keyed by kind; a kind's name draws it
    assert len({to_rgba(s.color) for s in REGISTRY.values()}) == len(REGISTRY)
    assert all(plotting.learner_color(k) == s.color for k, s in REGISTRY.items())
    # a caller's colour wins
    plotting.regret_figure(_regret_panels([LONG[0]]), tmp_path / "c.png", colors={LONG[0]: "k"})
    assert _regret_colors(figures[-1])[LONG[0]] == to_rgba("k")
    plotting.time_figure(_time_panels([LONG[0]]), tmp_path / "c.png", colors={LONG[0]: "k"})
    assert _time_colors(figures[-1])[LONG[0]] == to_rgba("k")


@pytest.mark.parametrize("shape", [(1, 1), (2, 1), (1, 2)])
def test_a_tiny_heatmap_grid_keeps_its_layout(tmp_path, shape):
    """A one- or two-cell grid (a sweep over one or two points) still has room for its title,
    ticks and colorbar (matplotlib warns when constrained layout collapses the axes)."""
    values = np.arange(1, 1 + shape[0] * shape[1], dtype=float).reshape(shape) * 37.5
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        plotting.heatmap_figure(
            [("EOFD synthetic (d, K) = (4, 1) beta=theory", values)],
            list(range(shape[0])),
            list(range(shape[1])),
            tmp_path / "h.png",
            cbar_label="mean final regret",
        )
