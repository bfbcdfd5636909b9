"""What a rejected update must leave: the learner's state as it was, its last update's record
(``status``, ``info``) aside, and one more failure counted."""

from __future__ import annotations

import jax
import numpy as np


def learned(state):
    """The leaves of ``state`` but the last update's record (``info``, ``status``,
    ``num_failures``)."""
    record = {f: None for f in ("info", "status", "num_failures") if f in state._fields}
    return jax.tree.leaves(state._replace(**record))


def assert_rejected(new, before) -> None:
    """``new`` kept everything ``before`` had learned and counted one more failure."""
    for a, b in zip(learned(new), learned(before), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert int(new.num_failures) == int(before.num_failures) + 1
