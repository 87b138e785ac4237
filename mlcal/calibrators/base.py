"""Shared plumbing for every calibrator: validation, input transform, predict, JSON round trip.

A method implements only ``_fit(scores, y, w) -> map`` on validated (and, where the method needs
[0, 1] inputs, already squashed) scores. Everything after fitting goes through the canonical map.
"""

from __future__ import annotations

import dataclasses
import os
import stat
from typing import Any, Callable, ClassVar

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.exceptions import NotFittedError

from mlcal._atomic import write_json
from mlcal._solvers.bounds import equal_runs, off_bound_run_values, run_weights
from mlcal._solvers.ties import sort_and_collapse
from mlcal._safe_json import MAX_DOCUMENT_BYTES, dumps_safe, loads_strict
from mlcal._validation import check_fit_inputs
from mlcal.calibrators.output_floor import data_floor, floor_map
from mlcal.calibrators._params import (Constraint, Integer, InvalidParameterError, IsNone,
                                       Options, Real, short_repr, validate_params)
from mlcal.maps import (DEFAULT_MAX_MAP_SIZE, CalibrationMap, LinearMap, MapFormatError,
                        MapReduction, StepMap, apply_input_transform, map_from_dict, reduce_map)

CALIBRATOR_FORMAT = "mlcal-calibrator"
CALIBRATOR_FORMAT_VERSION = 1
INPUT_TRANSFORM_CHOICES = ("auto", "identity", "sigmoid")
_MAX_PATH_CHARS = 4096
#: the ``_parameter_constraints`` entry of a ``max_map_size`` parameter
MAX_MAP_SIZE_CONSTRAINTS = [IsNone(), Integer(2)]
#: the ``_parameter_constraints`` entry of a ``bound_smoothing`` parameter
BOUND_SMOOTHING_CONSTRAINTS = [IsNone(), Real(0.0, closed="neither")]


#: per calibrator class, its ``__init__`` parameter names (:meth:`BaseCalibrator._get_param_names`)
_PARAM_NAMES: dict[type, tuple[str, ...]] = {}


def resolve_input_transform(calibrator: Any, choice: str, s: np.ndarray) -> str:
    """``"identity"`` or ``"sigmoid"`` for an ``input_transform`` choice and the training
    scores (see :class:`BaseCalibrator`); ``ValueError`` for ``"identity"`` with scores outside
    [0, 1]."""
    outside = bool(s.min() < 0.0 or s.max() > 1.0)
    if choice == "identity" and outside:
        raise ValueError(
            f"{type(calibrator).__name__} requires scores in [0, 1] but got values in "
            f"[{s.min():.6g}, {s.max():.6g}]; pass probabilities, or set "
            "input_transform='sigmoid' (or 'auto') to squash raw scores first")
    if choice == "sigmoid" or (choice == "auto" and outside):
        return "sigmoid"
    return "identity"


class CalibratorFormatError(ValueError):
    """A serialised calibrator is not valid mlcal JSON (corrupt, unknown method or version)."""


class BaseCalibrator(BaseEstimator):
    """Base class: ``fit(scores, y, sample_weight) -> self``, ``predict(scores)``, ``map_``.

    Subclasses set ``requires_unit_interval = True`` when the method assumes scores in [0, 1];
    such classes take an ``input_transform`` parameter:

    * ``"auto"`` (default): apply the logistic sigmoid when any training score lies outside
      [0, 1] (raw margins, as the papers do), else use the scores as they are;
    * ``"identity"``: never transform; scores outside [0, 1] are an error;
    * ``"sigmoid"``: always apply the logistic sigmoid.

    The chosen transform is recorded on ``map_.input_transform`` and applied again at predict time.

    Every constructor parameter is checked by :meth:`_validate_params` against the class's
    ``_parameter_constraints`` (see :mod:`mlcal.calibrators._params`), at ``fit`` and when a
    calibrator is loaded from JSON.

    Output floor: the fitted map never returns exactly 0 or 1; it is kept in
    ``[floor, 1 - floor]`` with ``floor = 1 / (2 (n + 1))`` for ``n`` calibration rows
    (:mod:`mlcal.calibrators.output_floor`).

    Map size cap: after ``_fit``, the map is reduced by :func:`mlcal.maps.reduce_map` to at most
    ``max_map_size`` bins or knots (a constructor parameter where the method declares one,
    else :data:`mlcal.maps.DEFAULT_MAX_MAP_SIZE`; ``None`` switches it off). ``map_reduction_``
    (a :class:`~mlcal.maps.MapReduction`) records the original size and the measured sup-norm
    error. A method may reduce its arrays itself before building the map (to avoid holding a
    huge map in memory) and report that through :meth:`_record_reduction`.
    """

    method_name: ClassVar[str] = ""
    requires_unit_interval: ClassVar[bool] = False
    #: the map kinds ``_fit`` returns (a document of the method holding another kind is
    #: refused on load); empty: any binary kind
    map_kinds: ClassVar[tuple[str, ...]] = ()
    #: whether every fitted map is non-decreasing in the score (checked on load)
    monotone: ClassVar[bool] = False
    _parameter_constraints: ClassVar[dict[str, list[Constraint]]] = {}

    @classmethod
    def _get_param_names(cls) -> list[str]:
        """scikit-learn's parameter names (read off ``__init__``'s signature), cached per class:
        ``inspect.signature`` ran three times per fit, 0.1-0.2 ms each time, which added up
        over ``auto``'s fold fits."""
        names = _PARAM_NAMES.get(cls)
        if names is None:
            names = _PARAM_NAMES[cls] = tuple(super()._get_param_names())
        return list(names)

    def _validate_params(self) -> None:
        """``InvalidParameterError`` (a ``ValueError``) naming the first invalid parameter."""
        constraints = dict(self._parameter_constraints)
        if self.requires_unit_interval:
            constraints.setdefault("input_transform", [Options(INPUT_TRANSFORM_CHOICES)])
        validate_params(type(self).__name__, self.get_params(deep=False), constraints)

    # -- fitting -------------------------------------------------------------------------------
    def fit(self, scores, y, sample_weight=None) -> "BaseCalibrator":
        """Fit the calibration map.

        Parameters
        ----------
        scores : array-like of shape (n,)
            Uncalibrated scores of the base model (finite).
        y : array-like of shape (n,)
            Binary labels in {0, 1}; both classes must occur.
        sample_weight : array-like of shape (n,), optional
            Non-negative weights; integer weights are equivalent to repeated rows, which makes a
            calibrator fittable from pre-aggregated counts.

        Returns
        -------
        self
        """
        self._validate_params()
        s, z, w = check_fit_inputs(scores, y, sample_weight)
        transform = self._resolve_input_transform(s)
        st = apply_input_transform(s, transform)
        self._fit_transform = transform   # for a method whose map depends on it (beta's clamp)
        self._finish_fit(self._fit, (st, z, w), lambda: sort_and_collapse(st, z, w), transform, s,
                         data_floor(w))
        return self

    def _fit_points(self, x: np.ndarray, ybar: np.ndarray, wsum: np.ndarray,
                    scores: np.ndarray) -> CalibrationMap:
        """The map fitted on tie-collapsed points (``sort_and_collapse``'s output), for methods
        whose ``_fit`` is that collapse followed by this; ``scores`` are the training scores
        (or any array with their minimum and maximum) for decisions on their range."""
        raise NotImplementedError

    @classmethod
    def _fits_points(cls) -> bool:
        """Whether the method fits on collapsed points (:meth:`_fit_points`)."""
        return cls._fit_points is not BaseCalibrator._fit_points

    def _fit_collapsed(self, x: np.ndarray, ybar: np.ndarray, wsum: np.ndarray,
                       scores: np.ndarray, floor: float) -> bool:
        """Private fast path of :meth:`fit` for callers that already hold the tie-collapsed
        training points (``auto``'s fold fits and refit): exactly the calibrator ``fit`` gives
        on the rows, without validating, sorting and collapsing them again.

        ``x, ybar, wsum`` must be ``sort_and_collapse``'s output on the rows, ``scores`` an
        array with the rows' smallest and largest score, ``floor`` ``data_floor`` of the row
        weights. Returns False (nothing fitted) when the method has no :meth:`_fit_points` or
        the input transform is not the identity (a transform can tie distinct scores);
        the caller then fits on rows.
        """
        if not self._fits_points():
            return False
        self._validate_params()
        transform = self._resolve_input_transform(scores)
        if transform != "identity":
            return False
        self._fit_transform = transform
        self._finish_fit(self._fit_points, (x, ybar, wsum, scores), lambda: (x, ybar, wsum),
                         transform, scores, floor)
        return True

    def _finish_fit(self, fit_fn: Callable[..., CalibrationMap], args: tuple,
                    points: Callable[[], tuple], transform: str, scores: np.ndarray,
                    floor: float) -> None:
        """Run ``fit_fn(*args)`` (``_fit`` or ``_fit_points``) and finish the map as every fit
        does: ``bound_smoothing`` (``points()`` gives the tie-collapsed training points, asked
        only when a run sits on 0 or 1), the size cap added to any reduction ``fit_fn`` recorded,
        the input transform and the raw ``scores``' domain, and the data floor ``floor``;
        sets ``map_reduction_`` and ``map_``."""
        self._early_reduction: tuple[int, float] | None = None
        try:
            fitted = fit_fn(*args)
        finally:
            early = self.__dict__.pop("_early_reduction", None)
        if getattr(self, "bound_smoothing", None) is not None and has_bound_runs(fitted):
            fitted = keep_off_bounds_points(fitted, *points(), float(self.bound_smoothing))
        fitted, reduction = reduce_map(fitted, self._max_map_size())
        if early is not None:   # errors of two reductions add up (triangle inequality)
            reduction = MapReduction(early[0], reduction.size, early[1] + reduction.max_error)
        self.map_reduction_ = reduction
        fitted = dataclasses.replace(fitted, input_transform=transform,
                                     domain=(float(scores.min()), float(scores.max())))
        # no probability of exactly 0 or 1 that the data cannot support (output_floor.py)
        self.map_ = floor_map(fitted, floor)

    def _max_map_size(self) -> int | None:
        """The size cap: the ``max_map_size`` parameter if the method has one, else the default."""
        if "max_map_size" in self._get_param_names():
            return self.max_map_size
        return DEFAULT_MAX_MAP_SIZE

    def _record_reduction(self, original_size: int, max_error: float) -> None:
        """Called by ``_fit`` when it already capped its map's arrays (see the class notes)."""
        self._early_reduction = (int(original_size), float(max_error))

    def _fit(self, scores: np.ndarray, y: np.ndarray, w: np.ndarray) -> CalibrationMap:
        raise NotImplementedError  # pragma: no cover

    def _resolve_input_transform(self, s: np.ndarray) -> str:
        if not self.requires_unit_interval:
            return "identity"
        # validated by _validate_params
        return resolve_input_transform(self, getattr(self, "input_transform", "auto"), s)

    # -- prediction ----------------------------------------------------------------------------
    def _check_fitted(self) -> None:
        if not hasattr(self, "map_"):
            raise NotFittedError(f"this {type(self).__name__} is not fitted yet; call "
                                 "fit(scores, y) before predict or to_json")

    def predict(self, scores) -> np.ndarray:
        """Calibrated probabilities of the positive class for ``scores``.

        Raises ``ValueError`` on NaN/infinite scores and ``NotFittedError`` (a ``ValueError``)
        before ``fit``.
        """
        self._check_fitted()
        return self.map_(scores)

    def predict_proba(self, scores) -> np.ndarray:
        """Probabilities of both classes as an (n, 2) array ``[1 - p, p]``."""
        p = self.predict(scores)
        return np.column_stack([1.0 - p, p])

    # -- serialisation -------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """The fitted calibrator as JSON-ready data: method, parameters and canonical map."""
        self._check_fitted()
        return {**calibrator_document(self.method_name, self.get_params(deep=False), self.map_),
                **self._extra_to_dict()}

    #: optional top-level document fields some methods write (Venn--Abers' ``interval``,
    #: ``auto``'s ``fit_info``); a method refuses on load those it does not write
    EXTRA_DOCUMENT_FIELDS: ClassVar[tuple[str, ...]] = ("interval", "fit_info")
    #: the extra fields this method writes (a subset of :attr:`EXTRA_DOCUMENT_FIELDS`)
    document_extras: ClassVar[tuple[str, ...]] = ()

    def _extra_to_dict(self) -> dict[str, Any]:
        """Hook: extra top-level fields of a method's document (e.g. Venn--Abers' interval
        maps, what ``auto`` compared and chose); the canonical ``"map"`` stays the one every
        consumer uses."""
        return {}

    def _extra_from_dict(self, doc: dict) -> None:
        """Hook: validate and restore what :meth:`_extra_to_dict` wrote (only called with
        fields listed in :attr:`document_extras`); raise ``MapFormatError`` or
        :class:`CalibratorFormatError` naming a malformed field."""

    def restore_extras(self, doc: dict) -> None:
        """Validate and restore a document's extra fields onto this calibrator (whose map is
        set): those of other methods are refused, this method's go to its hook.
        :class:`CalibratorFormatError` names what is wrong."""
        for key in self.EXTRA_DOCUMENT_FIELDS:
            if key in doc and key not in self.document_extras:
                raise CalibratorFormatError(f"calibrator document: {type(self).__name__} "
                                            f"documents have no {key!r}")
        try:
            self._extra_from_dict(doc)
        except MapFormatError as exc:
            raise CalibratorFormatError(f"calibrator document: {exc}") from None

    def to_json(self, indent: int | None = None) -> str:
        """Serialise with :meth:`to_dict`; floats round-trip bit-exactly. Encoded by mlcal's one
        JSON writer (a non-finite number is an error naming where it is)."""
        return dumps_safe(self.to_dict(), indent=indent, nonfinite="error")

    @classmethod
    def from_json(cls, text: str | bytes, *,
                  max_bytes: int = MAX_DOCUMENT_BYTES) -> "BaseCalibrator":
        """Rebuild a fitted calibrator from :meth:`to_json` output (validated; no code runs).

        Called on a specific class, the document must be of that method. Any malformed input
        (not strict JSON, over ``max_bytes``, non-finite or overflowing numbers, deep nesting,
        bad fields or parameters) raises :class:`CalibratorFormatError`.
        """
        return cls.from_dict(parse_document(text, max_bytes))

    @classmethod
    def from_dict(cls, doc: Any) -> "BaseCalibrator":
        """Rebuild a fitted calibrator from :meth:`to_dict` output, validating every field."""
        from mlcal.calibrators.catalog import calibrator_class

        method, params = read_document_header(doc)
        try:
            target = calibrator_class(method)
        except ValueError as exc:
            raise CalibratorFormatError(str(exc)) from None
        if cls is not BaseCalibrator and target is not cls:
            raise CalibratorFormatError(f"document holds a {target.__name__} calibrator, "
                                        f"not {cls.__name__}")
        from mlcal.calibrators.document_rules import ENVELOPE_FIELDS, check_fields

        # another method's extras are refused by name in restore_extras
        check_fields(doc, ENVELOPE_FIELDS + cls.EXTRA_DOCUMENT_FIELDS, target.method_name)
        obj = build_from_params(target, target._params_from_document(params))
        obj.map_ = read_document_map(doc)
        obj.restore_extras(doc)
        obj.check_document_map()
        return obj

    @classmethod
    def _params_from_document(cls, params: dict) -> dict:
        """Hook: the parameters a document's ``params`` stand for (a method whose new
        parameter's default differs from the behaviour before it existed fills it in for
        documents written without it)."""
        return params

    def check_document_map(self, where: str = "") -> None:
        """Refuse a loaded ``map_`` this method cannot have fitted (another kind, an input
        transform its parameters exclude, a decreasing map of a monotone method; see
        :mod:`mlcal.calibrators.document_rules`): :class:`CalibratorFormatError`."""
        from mlcal.calibrators.document_rules import check_binary_map

        check_binary_map(type(self), self.get_params(deep=False), self.map_, where)


def has_bound_runs(fitted: CalibrationMap) -> bool:
    """Whether ``bound_smoothing`` has anything to move: a step or piecewise-linear map with a
    value at exactly 0 or 1 (other map types are left unchanged)."""
    return isinstance(fitted, (StepMap, LinearMap)) and bool(
        ((fitted.values == 0.0) | (fitted.values == 1.0)).any())


def keep_off_bounds(fitted: CalibrationMap, scores: np.ndarray, y: np.ndarray, w: np.ndarray,
                    a: float) -> CalibrationMap:
    """``fitted`` with its runs at exactly 0 or 1 moved off the bounds: the ``bound_smoothing``
    parameter of the binning and isotonic-type methods.

    Each run at exactly 0 or 1 takes its Beta(a, a) posterior mean ``(k + a) / (n + 2a)``, with
    ``n`` and ``k`` the training weight and positive weight of the scores it covers, clipped to
    the neighbouring runs' values so that a non-decreasing map stays non-decreasing
    (:func:`mlcal._solvers.bounds.off_bound_run_values`; ``a = 0.5`` is the Jeffreys prior,
    ``a = 1`` Laplace's rule). Every other value is kept bit for bit.

    A run is a maximal stretch of equal values: bins of a :class:`~mlcal.maps.StepMap` (it
    covers ``[first cut, last cut)``), knots of a :class:`~mlcal.maps.LinearMap` (it covers
    ``[first knot, last knot]``, interpolation elsewhere is strictly inside (0, 1)); the outer
    runs extend to infinity. ``scores`` are the scores the map was fitted on (after the input
    transform). Other map types are returned unchanged.
    """
    if not has_bound_runs(fitted):
        return fitted
    return keep_off_bounds_points(fitted, *sort_and_collapse(scores, y, w), a)


def keep_off_bounds_points(fitted: CalibrationMap, x: np.ndarray, ybar: np.ndarray,
                           wsum: np.ndarray, a: float) -> CalibrationMap:
    """:func:`keep_off_bounds` on the tie-collapsed training points (``sort_and_collapse``'s
    output on the rows): the same result."""
    if not has_bound_runs(fitted):
        return fitted
    starts, ends = equal_runs(fitted.values)
    inf = np.array([np.inf])
    if isinstance(fitted, StepMap):
        cuts = fitted.thresholds
        lo = np.concatenate((-inf, cuts))[starts]
        hi = np.concatenate((cuts, inf))[ends - 1]
    else:
        lo = fitted.knots[starts].copy()
        hi = fitted.knots[ends - 1].copy()
        lo[0], hi[-1] = -np.inf, np.inf
    n, k = run_weights(x, ybar * wsum, wsum, lo, hi, hi_closed=isinstance(fitted, LinearMap))
    new = off_bound_run_values(fitted.values[starts], n, k, a)
    return dataclasses.replace(fitted, values=np.repeat(new, ends - starts))


def read_document_header(doc: Any) -> tuple[str, dict]:
    """Check the envelope every calibrator document shares (format, version, method,
    params) and return ``(method, params)``; :class:`CalibratorFormatError` otherwise."""
    if not isinstance(doc, dict) or doc.get("format") != CALIBRATOR_FORMAT:
        raise CalibratorFormatError("not an mlcal calibrator document "
                                    f"(expected \"format\": \"{CALIBRATOR_FORMAT}\")")
    version = doc.get("format_version")
    if type(version) is not int or version != CALIBRATOR_FORMAT_VERSION:  # True == 1
        raise CalibratorFormatError(
            f"unsupported calibrator format_version {short_repr(version)} "
            f"(this mlcal reads version {CALIBRATOR_FORMAT_VERSION})")
    method = doc.get("method")
    if not isinstance(method, str):
        raise CalibratorFormatError(f"calibrator document: 'method' must be a string, got "
                                    f"{short_repr(method)}")
    params = doc.get("params")
    if not isinstance(params, dict):
        raise CalibratorFormatError("calibrator document: 'params' must be an object")
    return method, params


def build_from_params(target: type, params: dict) -> Any:
    """An unfitted ``target`` estimator with the document's parameters, validated."""
    unknown = sorted(set(params) - set(target._get_param_names()))
    if unknown:
        raise CalibratorFormatError(f"calibrator document: {target.__name__} has no "
                                    f"parameter(s) {short_repr(unknown)}")
    obj = target(**params)
    try:
        obj._validate_params()
    except (InvalidParameterError, ValueError) as exc:
        raise CalibratorFormatError(f"calibrator document: {exc}") from None
    return obj


def read_document_map(doc: dict) -> CalibrationMap:
    """The validated map of a calibrator document."""
    try:
        return map_from_dict(doc.get("map"))
    except MapFormatError as exc:
        raise CalibratorFormatError(f"calibrator document: {exc}") from None


def calibrator_document(method: str, params: dict, fitted_map: CalibrationMap) -> dict[str, Any]:
    """The JSON-ready document of a fitted calibrator (binary or multiclass)."""
    from mlcal import __version__

    return {"format": CALIBRATOR_FORMAT, "format_version": CALIBRATOR_FORMAT_VERSION,
            "mlcal_version": __version__, "method": method, "params": params,
            "map": fitted_map.to_dict()}


def calibrator_from_document(doc: Any) -> Any:
    """A binary or multiclass calibrator from a parsed document (dispatch on ``method``)."""
    from mlcal.calibrators.multiclass import MulticlassCalibrator
    from mlcal.calibrators.multiclass_catalog import multiclass_document_class

    method, _ = read_document_header(doc)
    if method == "segmented":   # two inputs (scores and segments): not in the binary catalog
        from mlcal.calibrators.segmented import SegmentedCalibrator

        return SegmentedCalibrator.from_dict(doc)
    if multiclass_document_class(method) is not None:
        return MulticlassCalibrator.from_dict(doc)
    if method == "multicalibration":   # a map over the score and segment features
        from mlcal.multicalibration import Multicalibration

        return Multicalibration.from_dict(doc)
    return BaseCalibrator.from_dict(doc)


_FILE_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
               (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
               (stat.S_ISSOCK, "a socket"))


def read_regular_file(path: str | os.PathLike, max_bytes: int, what: str = "calibrator file"
                      ) -> bytes:
    """At most ``max_bytes`` bytes of the regular file at ``path``
    (:class:`CalibratorFormatError` otherwise, naming ``what`` and the path).

    The file is opened non-blocking and checked with ``fstat`` on the open descriptor, so a
    FIFO, device, socket or directory (also behind a symlink, also one swapped in after a
    check) is refused at once instead of hanging or streaming forever; at most
    ``max_bytes + 1`` bytes are read whatever size the file reports.
    """
    name = short_repr(os.fspath(path))
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except (OSError, ValueError) as exc:   # ValueError: a NUL in the path
        raise CalibratorFormatError(f"cannot read {what} {name}: {exc}") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = next((k for test, k in _FILE_KINDS if test(mode)), "not a regular file")
            raise CalibratorFormatError(f"{what} {name} is {kind}, not a regular file")
        chunks, left = [], max_bytes + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    except OSError as exc:
        raise CalibratorFormatError(f"cannot read {what} {name}: {exc}") from None
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > max_bytes:
        raise CalibratorFormatError(f"{what} {name} is larger than the {max_bytes}-byte limit")
    return data


def _read_calibrator_file(path: str | os.PathLike, max_bytes: int) -> bytes:
    return read_regular_file(path, max_bytes)


def load_calibrator(source: str | bytes | os.PathLike | dict, *,
                    max_bytes: int = MAX_DOCUMENT_BYTES) -> Any:
    """Load any mlcal calibrator, binary (:class:`BaseCalibrator`) or multiclass
    (:class:`~mlcal.calibrators.multiclass.MulticlassCalibrator`), from JSON text, a dict,
    or a path to a JSON file.

    Parameters
    ----------
    source : str, bytes, os.PathLike or dict
        A ``dict`` is a parsed document; ``bytes`` and a ``str`` whose first non-blank
        character is ``{``, ``[`` or a byte-order mark are JSON text; a ``pathlib.Path`` or any
        other ``str`` is the path of a JSON file. A file's content is only ever parsed as JSON.
    max_bytes : int
        Largest document accepted.

    Raises
    ------
    CalibratorFormatError
        For every malformed, oversized or unreadable input.
    """
    if isinstance(source, dict):
        return calibrator_from_document(source)
    if isinstance(source, (bytes, bytearray)):
        return _load_text(source, max_bytes)
    if isinstance(source, os.PathLike):
        return _load_text(_read_calibrator_file(source, max_bytes), max_bytes)
    if not isinstance(source, str):
        raise CalibratorFormatError(f"load_calibrator expects JSON text, a path or a dict, got "
                                    f"{type(source).__name__}")
    if source.lstrip().startswith(("{", "[", "\ufeff")):
        return _load_text(source, max_bytes)
    if len(source) > _MAX_PATH_CHARS or "\n" in source or "\x00" in source:
        raise CalibratorFormatError("calibrator source is neither a JSON object nor a file path")
    return _load_text(_read_calibrator_file(source, max_bytes), max_bytes)


def parse_document(text: str | bytes, max_bytes: int) -> Any:
    """Strictly parsed JSON of a calibrator document (:class:`CalibratorFormatError`)."""
    try:
        return loads_strict(text, max_bytes=max_bytes)
    except ValueError as exc:
        raise CalibratorFormatError(f"calibrator document: {exc}") from None


def _load_text(text: str | bytes, max_bytes: int) -> Any:
    return calibrator_from_document(parse_document(text, max_bytes))


def save_calibrator(calibrator: Any, path: str | os.PathLike, *,
                    overwrite: bool = False) -> str:
    """Write ``calibrator.to_json()`` (a binary or multiclass calibrator) to ``path`` atomically (a temporary file renamed over
    it, so a crash leaves the old file intact); refuses to replace an existing file unless
    ``overwrite=True``. Returns the path."""
    write_json(path, calibrator.to_dict(), overwrite=overwrite, indent=1, nonfinite="error")
    return os.fspath(path)
