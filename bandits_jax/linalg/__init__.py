"""Shared numerics (no bandit words): sketches, low-rank solves, roots, projections."""
