"""Optional integrations: MLflow (``mlcal[mlflow]``), ONNX (``mlcal[onnx]``), Spark
(``mlcal[spark]``).

The core (calibrators, maps, metrics, ``CalibratedModel``) needs neither; the integration
packages call :func:`require` first, so a missing one is an ``ImportError`` that says which
extra to install instead of a bare ``No module named ...`` from deep inside.
"""

from __future__ import annotations

import importlib

#: extra name -> the distributions it installs (import names)
EXTRAS = {"mlflow": ("mlflow",), "onnx": ("onnx", "skl2onnx", "onnxruntime"),
          "spark": ("pyspark",)}


class MissingExtraError(ImportError):
    """An optional integration is used but its packages are not installed."""


def require(extra: str, *modules: str, feature: str | None = None) -> None:
    """Import ``modules`` (default: every package of ``extra``) or raise
    :class:`MissingExtraError` naming the extra to install.

    Parameters
    ----------
    extra : str
        A key of :data:`EXTRAS`.
    *modules : str
        The packages of ``extra`` needed here (importing all of them can be slow).
    feature : str, optional
        What needs them, for the message (defaults to ``mlcal.<extra>``).
    """
    if extra not in EXTRAS:
        raise ValueError(f"unknown extra {extra!r}; expected one of {sorted(EXTRAS)}")
    unknown = set(modules) - set(EXTRAS[extra])
    if unknown:
        raise ValueError(f"{sorted(unknown)} are not packages of the {extra!r} extra")
    for module in modules or EXTRAS[extra]:
        try:
            importlib.import_module(module)
        except ImportError as exc:
            what = feature or f"mlcal.{extra}"
            raise MissingExtraError(
                f"{what} needs the optional package {module!r}, which is not installed: "
                f"pip install 'mlcal[{extra}]'") from exc
