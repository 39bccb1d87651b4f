"""Experiments: specs (spec), their cells (cells), and the runner that measures them (runner)."""
