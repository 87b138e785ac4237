"""What a calibrator document may hold, method by method, and the checks the loader applies.

One table, built from the calibrator catalog and the multiclass classes (:func:`method_table`):
per method the map kinds it produces (each class's ``map_kinds``), whether its maps are
non-decreasing (``monotone``), whether it takes an ``input_transform`` (and so may record
``"sigmoid"`` on its map), the extra top-level fields it writes and its parameter constraints.
:func:`mlcal.load_calibrator` checks every document against it (so do ``mlcal evaluate`` and
``mlcal export-onnx``, which load through it); the Java evaluator reads the same table from
``jvm/src/main/resources/io/mlcal/methods.json``, which ``python -m
mlcal.calibrators.document_rules`` writes and a test compares with this module's output.

Monotone methods (a decreasing map in their document is corrupt): ``isotonic`` (PAVA block
means), ``spline`` (cumulative sums of non-negative increments), ``beta`` (``a, b >= 0``),
``platt-logit`` and ``temperature`` (slope ``k >= 0``). Not monotone by construction:
``platt`` (a negative slope fits anti-correlated scores), ``histogram``, ``bbq``, ``sbb``,
``abb`` (bin rates in any order), ``kde`` (kernel regression), ``enir`` (near-isotonic),
``elite`` (trend filtering), ``quadratic`` (``b != 0`` bends the map) and ``venn-abers``
(monotone in exact arithmetic, but its rounded merge may dip by an ulp, so it is not
checked).

Re-offset stage: the map of any binary method's document may be an ``"offset"`` map
(:class:`mlcal.maps.offset.OffsetMap`, written by :func:`mlcal.maps.reoffset.reoffset`) wrapping one
map the method fits; every rule above applies to that inner map (the offset is strictly
increasing, so monotonicity carries over). The table lists the method's own kinds; the offset
is not a kind of any method but a stage any binary method's map may carry (``"offset_stage":
true`` in the table).
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from mlcal.maps import BetaMap, CalibrationMap, LinearMap, SigmoidMap, StepMap
from mlcal.maps.offset import OffsetMap

#: the fields every calibrator document has (``mlcal_version`` is informational)
ENVELOPE_FIELDS = ("format", "format_version", "mlcal_version", "method", "params", "map")
#: map kinds of binary maps (what a method without its own ``map_kinds`` may carry)
BINARY_MAP_KINDS = ("beta", "linear", "sigmoid", "step")


def _error(message: str) -> Exception:
    from mlcal.calibrators.base import CalibratorFormatError

    return CalibratorFormatError(f"calibrator document: {message}")


def check_fields(doc: dict, allowed: tuple[str, ...], method: str) -> None:
    """Refuse top-level fields outside ``allowed``, naming them."""
    unknown = sorted(k for k in doc if k not in allowed)
    if unknown:
        shown = ", ".join(repr(k[:40]) for k in unknown[:5])
        raise _error(f"unknown top-level field(s) {shown}; a {method!r} document holds "
                     f"{', '.join(allowed)}")


def decreasing_at(m: CalibrationMap) -> str | None:
    """Why ``m`` is not non-decreasing in the score, or None when it is."""
    if isinstance(m, OffsetMap):   # the offset is strictly increasing on (0, 1)
        m = m.inner
    if isinstance(m, (StepMap, LinearMap)):
        drops = np.flatnonzero(np.diff(m.values) < 0)
        if drops.size:
            i = int(drops[0])
            return (f"values[{i + 1}] = {m.values[i + 1]!r} is below values[{i}] = "
                    f"{m.values[i]!r}")
        return None
    if isinstance(m, SigmoidMap):   # 1 / (1 + exp(a s + b)) rises with s iff a <= 0
        return None if m.a <= 0.0 else f"a = {m.a!r} > 0 makes it decreasing"
    if isinstance(m, BetaMap):
        return None if m.a >= 0.0 and m.b >= 0.0 else \
            f"a = {m.a!r}, b = {m.b!r}: both must be >= 0"
    return None


def allowed_transforms(cls: type, params: dict) -> tuple[str, ...]:
    """Input transforms a map of ``cls`` fitted with ``params`` can record."""
    if not cls.requires_unit_interval:
        return ("identity",)
    choice = params.get("input_transform", "auto")
    return (choice,) if choice in ("identity", "sigmoid") else ("identity", "sigmoid")


def check_binary_map(cls: type, params: dict, m: CalibrationMap, where: str = "") -> None:
    """The map of a ``cls`` document (fitted with ``params``) must be one ``cls`` produces:
    a kind it fits, an input transform its parameters allow, non-decreasing if the method
    is monotone."""
    method = cls.method_name
    kinds = cls.map_kinds or BINARY_MAP_KINDS
    if isinstance(m, OffsetMap):   # a re-offset stage: the method's rules apply to its inner map
        m = m.inner
    if m.kind not in kinds:
        raise _error(f"{where}a {method!r} calibrator fits {' or '.join(map(repr, kinds))} "
                     f"maps, not a {m.kind!r} map")
    transforms = allowed_transforms(cls, params)
    if m.input_transform not in transforms:
        raise _error(f"{where}a {method!r} calibrator with these parameters records input "
                     f"transform {' or '.join(map(repr, transforms))}, not "
                     f"{m.input_transform!r}")
    if cls.monotone:
        why = decreasing_at(m)
        if why is not None:
            raise _error(f"{where}a {method!r} map is non-decreasing, this one is not ({why})")


def method_table() -> dict[str, dict[str, Any]]:
    """The rules of every registered method and multiclass document method (JSON-ready)."""
    from mlcal.calibrators.base import BaseCalibrator, INPUT_TRANSFORM_CHOICES
    from mlcal.calibrators.catalog import _CATALOG
    from mlcal.calibrators.multiclass import INPUT_KINDS
    from mlcal.calibrators.multiclass_catalog import _DOCUMENT_CLASSES
    from mlcal.calibrators._params import Options

    table: dict[str, dict[str, Any]] = {}
    for name, cls in sorted(_CATALOG.items()):
        constraints = dict(cls._parameter_constraints)
        if cls.requires_unit_interval:
            constraints.setdefault("input_transform", [Options(INPUT_TRANSFORM_CHOICES)])
        table[name] = {
            "multiclass": False, "map_kinds": list(cls.map_kinds), "offset_stage": True,
            "monotone": bool(cls.monotone), "unit_interval": bool(cls.requires_unit_interval),
            "extras": list(cls.document_extras),
            "param_names": sorted(cls._get_param_names()),
            "params": {k: [c.spec() for c in v] for k, v in sorted(constraints.items())}}
    from mlcal.calibrators.auto import ANCHORS

    # auto's anchor candidates (fit_info 'chosen' may name one): name -> registered method
    table["auto"]["anchors"] = {n: method for n, (method, _) in sorted(ANCHORS.items())}
    assert set(BaseCalibrator.EXTRA_DOCUMENT_FIELDS) >= {
        e for entry in table.values() for e in entry["extras"]}
    from mlcal.calibrators.segmented import SEGMENTED_METHOD, SegmentedCalibrator

    # a shared binary map plus a segment table (docs/segments.md); the map kind "segmented"
    # takes segment columns besides the score
    table[SEGMENTED_METHOD] = {
        "multiclass": False, "segmented": True, "map_kinds": ["segmented"],
        "offset_stage": False, "monotone": False, "unit_interval": False, "extras": [],
        "param_names": sorted(SegmentedCalibrator._get_param_names()),
        # parameters added after the format: a document written before may lack them
        "optional_params": ["select", "tau", "fold_shared", "shrinkage", "shared_slope",
                            "heterogeneity_alpha", "slope_alpha"],
        "params": {k: [c.spec() for c in v]
                   for k, v in sorted(SegmentedCalibrator.document_constraints().items())}}
    table["multicalibration"] = multicalibration_entry()
    for name, cls in sorted(_DOCUMENT_CLASSES.items()):
        constraints = {"input_kind": [Options(INPUT_KINDS)], **cls._parameter_constraints}
        table[name] = {
            "multiclass": True, "offset_stage": False,
            "map_kinds": [t.kind for t in (cls.map_type if isinstance(cls.map_type, tuple)
                                           else (cls.map_type,))],
            "weights": cls.weights_shape,
            "extras": list(cls.document_extras),
            # legacy names: older documents of the method still load (their map is what counts)
            "param_names": sorted([*cls._get_param_names(),
                                   *getattr(cls, "legacy_document_params", ())]),
            "params": {k: [c.spec() for c in v] for k, v in sorted(constraints.items())
                       if k != "calibrator"}}
    return table


def multicalibration_entry() -> dict[str, Any]:
    """The rules of ``multicalibration`` documents (:class:`mlcal.multicalibration.
    Multicalibration`): their one map kind reads segment features besides the score, so the
    binary-map rules do not apply; the map's own structure checks run when it is read
    (:meth:`mlcal.multicalibration.MulticalibrationMap.from_dict`)."""
    from mlcal.multicalibration import Multicalibration

    return {"multiclass": False, "map_kinds": ["multicalibration"], "offset_stage": False,
            "monotone": False, "unit_interval": True, "extras": [], "segment_features": True,
            "param_names": sorted(Multicalibration._get_param_names()),
            "params": {k: [c.spec() for c in v]
                       for k, v in sorted(Multicalibration._parameter_constraints.items())}}


def table_json() -> str:
    """:func:`method_table` as the text of the Java evaluator's resource file."""
    return json.dumps(method_table(), indent=1, sort_keys=True) + "\n"


if __name__ == "__main__":   # regenerate the Java evaluator's copy of the table
    import pathlib

    target = (pathlib.Path(__file__).resolve().parents[2] / "jvm" / "src" / "main" /
              "resources" / "io" / "mlcal" / "methods.json")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(table_json(), encoding="utf-8")
    print(target)
