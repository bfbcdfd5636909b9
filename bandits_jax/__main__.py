"""``python -m bandits_jax`` runs the ``bandits-jax`` command (see :mod:`bandits_jax.cli`)."""

import sys

from bandits_jax.cli import main

if __name__ == "__main__":
    sys.exit(main())
