"""Figures: the regret figure keeps the learners that can be told apart on scale."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from bandits_jax import plotting  # noqa: E402


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
