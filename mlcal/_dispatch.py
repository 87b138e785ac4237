"""Helpers for the per-map-type registries (``functools.singledispatch`` functions)."""

from __future__ import annotations


def registered_types(dispatcher) -> list[str]:
    """Sorted names of the classes a singledispatch function has an implementation for, for
    error messages that say what would have been accepted."""
    return sorted(c.__name__ for c in dispatcher.registry if c is not object)
