"""Benchmarks: they print medians and assert nothing (`just bench`)."""
