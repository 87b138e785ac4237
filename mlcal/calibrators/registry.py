"""Name -> calibrator class registry. Each method module registers itself on import."""

from __future__ import annotations

from typing import Any, Callable

_REGISTRY: dict[str, type] = {}


def register(name: str) -> Callable[[type], type]:
    """Class decorator that registers a calibrator under ``name`` and sets ``cls.method_name``."""

    def decorate(cls: type) -> type:
        if name in _REGISTRY and _REGISTRY[name] is not cls:
            raise ValueError(f"calibrator name {name!r} is already registered "
                             f"by {_REGISTRY[name].__name__}")
        cls.method_name = name
        _REGISTRY[name] = cls
        return cls

    return decorate


def available_calibrators() -> list[str]:
    """Sorted names accepted by :func:`get_calibrator`."""
    return sorted(_REGISTRY)


def calibrator_class(name: str) -> type:
    """The class registered under ``name`` (case-insensitive); ``ValueError`` if unknown."""
    key = str(name).lower()
    if key not in _REGISTRY:
        raise ValueError(f"unknown calibrator {name!r}; available: {', '.join(available_calibrators())}")
    return _REGISTRY[key]


def get_calibrator(name: str, **params: Any):
    """A new, unfitted calibrator of method ``name`` built with ``params``.

    Examples
    --------
    >>> import mlcal
    >>> mlcal.get_calibrator("isotonic", interpolate=False)
    Isotonic(interpolate=False)
    """
    return calibrator_class(name)(**params)
