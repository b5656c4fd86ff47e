"""Benchmarks of pygents_ctx against the bare-Python floor (`make bench`)."""
