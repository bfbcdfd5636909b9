"""Fixtures of the command tests."""

import pytest

from bandits_jax.sim import chunks


@pytest.fixture
def bars(monkeypatch):
    """Every progress bar the commands make, in order (they import ``Progress`` when they run)."""
    made = []

    class Recorded(chunks.Progress):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            made.append(self)

    monkeypatch.setattr(chunks, "Progress", Recorded)
    return made
