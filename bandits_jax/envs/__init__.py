"""Environments as pure functions of PRNG keys."""
