"""The calibrator catalog: method name -> calibrator class. Each method module adds itself on
import with :func:`register_calibrator`.

(Called a catalog, not a registry: in mlcal "registry" always means the MLflow model registry
that :mod:`mlcal.mlflow.gate` promotes versions in.)"""

from __future__ import annotations

from typing import Any, Callable

_CATALOG: dict[str, type] = {}


def register_calibrator(name: str) -> Callable[[type], type]:
    """Class decorator that adds a calibrator to the catalog under ``name`` (what
    :func:`get_calibrator` accepts) and sets ``cls.method_name``."""

    def decorate(cls: type) -> type:
        if name in _CATALOG and _CATALOG[name] is not cls:
            raise ValueError(f"calibrator name {name!r} is already taken "
                             f"by {_CATALOG[name].__name__}")
        cls.method_name = name
        _CATALOG[name] = cls
        return cls

    return decorate


def available_calibrators() -> list[str]:
    """Sorted names accepted by :func:`get_calibrator`."""
    return sorted(_CATALOG)


def calibrator_class(name: str) -> type:
    """The class registered under ``name`` (case-insensitive); ``ValueError`` if unknown."""
    key = str(name).lower()
    if key not in _CATALOG:
        raise ValueError(f"unknown calibrator {name!r}; available: {', '.join(available_calibrators())}")
    return _CATALOG[key]


def get_calibrator(name: str, **params: Any):
    """A new, unfitted calibrator of method ``name`` built with ``params``.

    Examples
    --------
    >>> import mlcal
    >>> mlcal.get_calibrator("isotonic", interpolate=False)
    Isotonic(interpolate=False)
    """
    return calibrator_class(name)(**params)


def register(name: str) -> Callable[[type], type]:
    """Deprecated alias of :func:`register_calibrator` (the old name read like the MLflow
    model registry)."""
    import warnings

    warnings.warn("mlcal.register is deprecated; use mlcal.register_calibrator",
                  DeprecationWarning, stacklevel=2)
    return register_calibrator(name)
