"""Plain numpy implementations (per-round Python loops) for tests and speed comparisons."""
