"""The table of multiclass methods: the names :func:`multiclass_calibrator` accepts, the
document ``method`` each class writes, and :func:`register_multiclass_method` for methods defined
elsewhere (:class:`~mlcal.calibrators.multiclass_auto.MulticlassAuto` enters itself as ``"auto"``
when :mod:`mlcal.calibrators` imports it).

Kept apart from :mod:`mlcal.calibrators.multiclass` so that the scalings built on its classes
(:mod:`mlcal.calibrators.structured_scaling`) and ``auto`` can be listed here without the base
module importing them back (issue 27: no import cycles). The names are also importable from
:mod:`mlcal.calibrators.multiclass`.
"""

from __future__ import annotations

from mlcal.calibrators.catalog import get_calibrator
from mlcal.calibrators.multiclass import MulticlassCalibrator, OneVsRest, TemperatureScaling
from mlcal.calibrators.structured_scaling import (MatrixScaling, StructuredMatrixScaling,
                                                  StructuredVectorScaling, TemperatureMixScaling,
                                                  VectorScaling)

#: multiclass method names accepted by :func:`multiclass_calibrator` (besides binary names);
#: ``"auto"`` (:class:`~mlcal.calibrators.multiclass_auto.MulticlassAuto`) adds itself
MULTICLASS_METHODS = {"temperature": TemperatureScaling, "vector": VectorScaling,
                      "matrix": MatrixScaling, "ts-mix": TemperatureMixScaling,
                      "svs": StructuredVectorScaling, "sms": StructuredMatrixScaling}


def multiclass_calibrator(name: str) -> MulticlassCalibrator:
    """A new multiclass calibrator: ``"auto"`` (chosen among the multiclass methods by
    cross-validated log loss), ``"temperature"``, ``"vector"``, ``"matrix"``, ``"ts-mix"``,
    ``"svs"`` or ``"sms"`` (:data:`MULTICLASS_METHODS`), or any other binary method name
    (:func:`mlcal.available_calibrators`) applied one-vs-rest."""
    key = str(name).lower()
    if key in MULTICLASS_METHODS:
        return MULTICLASS_METHODS[key]()
    try:
        get_calibrator(key)
    except ValueError as exc:
        raise ValueError(f"{exc}; multiclass methods: {', '.join(MULTICLASS_METHODS)}") from None
    return OneVsRest(key)


_DOCUMENT_CLASSES = {c.document_method: c for c in (OneVsRest, *MULTICLASS_METHODS.values())}


def multiclass_document_class(method: str) -> type[MulticlassCalibrator] | None:
    """The multiclass calibrator class whose documents carry ``method``, or None."""
    return _DOCUMENT_CLASSES.get(method)


def register_multiclass_method(name: str, cls: type[MulticlassCalibrator]) -> None:
    """Make ``cls`` a multiclass method: :func:`multiclass_calibrator` builds it from ``name``
    and its documents (``cls.document_method``) load."""
    MULTICLASS_METHODS[name] = cls
    _DOCUMENT_CLASSES[cls.document_method] = cls

