"""Benchmarks: ``make bench`` prints numbers and ratios against the targets; it asserts nothing."""
