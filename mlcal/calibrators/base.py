"""Shared plumbing for every calibrator: validation, input transform, predict, JSON round trip.

A method implements only ``_fit(scores, y, w) -> map`` on validated (and, where the method needs
[0, 1] inputs, already squashed) scores. Everything after fitting goes through the canonical map.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, ClassVar

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.exceptions import NotFittedError

from mlcal._validation import check_fit_inputs
from mlcal.maps import CalibrationMap, MapFormatError, apply_input_transform, map_from_dict

CALIBRATOR_FORMAT = "mlcal-calibrator"
CALIBRATOR_FORMAT_VERSION = 1
INPUT_TRANSFORM_CHOICES = ("auto", "identity", "sigmoid")


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
    """

    method_name: ClassVar[str] = ""
    requires_unit_interval: ClassVar[bool] = False

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
        s, z, w = check_fit_inputs(scores, y, sample_weight)
        transform = self._resolve_input_transform(s)
        fitted = self._fit(apply_input_transform(s, transform), z, w)
        self.map_ = dataclasses.replace(fitted, input_transform=transform,
                                        domain=(float(s.min()), float(s.max())))
        return self

    def _fit(self, scores: np.ndarray, y: np.ndarray, w: np.ndarray) -> CalibrationMap:
        raise NotImplementedError  # pragma: no cover

    def _resolve_input_transform(self, s: np.ndarray) -> str:
        if not self.requires_unit_interval:
            return "identity"
        choice = getattr(self, "input_transform", "auto")
        if choice not in INPUT_TRANSFORM_CHOICES:
            raise ValueError(f"input_transform must be one of {INPUT_TRANSFORM_CHOICES}, "
                             f"got {choice!r}")
        outside = bool(s.min() < 0.0 or s.max() > 1.0)
        if choice == "identity" and outside:
            raise ValueError(
                f"{type(self).__name__} requires scores in [0, 1] but got values in "
                f"[{s.min():.6g}, {s.max():.6g}]; pass probabilities, or set "
                "input_transform='sigmoid' (or 'auto') to squash raw scores first")
        if choice == "sigmoid" or (choice == "auto" and outside):
            return "sigmoid"
        return "identity"

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
        from mlcal import __version__

        return {"format": CALIBRATOR_FORMAT, "format_version": CALIBRATOR_FORMAT_VERSION,
                "mlcal_version": __version__, "method": self.method_name,
                "params": self.get_params(deep=False), "map": self.map_.to_dict()}

    def to_json(self, indent: int | None = None) -> str:
        """Serialise with :meth:`to_dict`; floats round-trip bit-exactly."""
        return json.dumps(self.to_dict(), indent=indent, allow_nan=False)

    @classmethod
    def from_json(cls, text: str) -> "BaseCalibrator":
        """Rebuild a fitted calibrator from :meth:`to_json` output (validated; no code runs).

        Called on a specific class, the document must be of that method.
        """
        try:
            doc = json.loads(text)
        except (TypeError, json.JSONDecodeError) as exc:
            raise CalibratorFormatError(f"calibrator document is not valid JSON: {exc}") from None
        return cls.from_dict(doc)

    @classmethod
    def from_dict(cls, doc: Any) -> "BaseCalibrator":
        """Rebuild a fitted calibrator from :meth:`to_dict` output."""
        from mlcal.calibrators.registry import calibrator_class

        if not isinstance(doc, dict) or doc.get("format") != CALIBRATOR_FORMAT:
            raise CalibratorFormatError("not an mlcal calibrator document "
                                        f"(expected \"format\": \"{CALIBRATOR_FORMAT}\")")
        if doc.get("format_version") != CALIBRATOR_FORMAT_VERSION:
            raise CalibratorFormatError(
                f"unsupported calibrator format_version {doc.get('format_version')!r} "
                f"(this mlcal reads version {CALIBRATOR_FORMAT_VERSION})")
        try:
            target = calibrator_class(doc.get("method"))
        except ValueError as exc:
            raise CalibratorFormatError(str(exc)) from None
        if cls is not BaseCalibrator and target is not cls:
            raise CalibratorFormatError(f"document holds a {target.__name__} calibrator, "
                                        f"not {cls.__name__}")
        params = doc.get("params")
        if not isinstance(params, dict):
            raise CalibratorFormatError("calibrator document: 'params' must be an object")
        try:
            obj = target(**params)
        except TypeError as exc:
            raise CalibratorFormatError(f"calibrator document: bad parameters: {exc}") from None
        try:
            obj.map_ = map_from_dict(doc.get("map"))
        except MapFormatError as exc:
            raise CalibratorFormatError(f"calibrator document: {exc}") from None
        return obj


def load_calibrator(source: str | dict) -> BaseCalibrator:
    """Load any mlcal calibrator from a JSON string, a dict, or a path to a ``.json`` file."""
    if isinstance(source, dict):
        return BaseCalibrator.from_dict(source)
    text = str(source)
    if not text.lstrip().startswith("{"):
        try:
            with open(text, encoding="utf-8") as fh:
                text = fh.read()
        except OSError as exc:
            raise CalibratorFormatError(f"cannot read calibrator file {source!r}: {exc}") from None
    return BaseCalibrator.from_json(text)


def save_calibrator(calibrator: BaseCalibrator, path: str, *, overwrite: bool = False) -> str:
    """Write ``calibrator.to_json()`` to ``path``; refuses to replace an existing file unless
    ``overwrite=True``. Returns the path."""
    import os

    if os.path.exists(path) and not overwrite:
        raise FileExistsError(f"{path} already exists; pass overwrite=True (CLI: --force) "
                              "to replace it")
    text = calibrator.to_json(indent=1)
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(text + "\n")
    return path
