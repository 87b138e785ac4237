"""Numerical kernels: pure functions on arrays, no estimator logic."""
