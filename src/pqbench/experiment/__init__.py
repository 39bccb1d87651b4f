"""Experiments: specs (spec), their cells (cells), and how a cell reads in one line (condition)."""
