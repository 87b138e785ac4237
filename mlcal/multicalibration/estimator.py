"""``Multicalibration``: boosted logit corrections over the base score and segment features.

Derivation (ours). Let ``s`` be the base model's probability and ``x`` the chosen segment
features. We model the calibrated log-odds as

    z(s, x) = a * logit(s) + b + sum_{t=1}^{T} f_t(s, x)

and minimise the weighted log loss ``L = sum_i w_i [log(1 + e^{z_i}) - y_i z_i]``. The start
``a logit(s) + b`` is the global Platt-on-logit fit (``initial="platt-logit"``; ``a = 1, b = 0``
with ``initial="logit"``), so the trees only have to model what a global monotone map cannot:
miscalibration that differs between segments, or along the score within a segment. Each
``f_t`` is a shallow regression tree fitted by one Newton step: with ``p_i = expit(z_i)`` the
loss has gradient ``g_i = w_i (p_i - y_i)`` and Hessian ``h_i = w_i p_i (1 - p_i)`` in ``z_i``;
the second-order expansion of ``L`` in a leaf's common shift ``v`` is
``G v + (H + lam) v^2 / 2`` (with the L2 penalty ``lam v^2 / 2``), minimised at
``v = -G / (H + lam)`` with decrease ``G^2 / (2 (H + lam))``, which gives the split gain of
:mod:`mlcal.multicalibration._trees`. The step is shrunk by ``learning_rate``. Why this
corrects segments: a segment that is over-predicted has ``sum (p - y) > 0`` inside it; a split
isolating it lowers the loss by the squared sum over the Hessian, so the largest miscalibrated
segments (in the gradient's sense, exactly the calibration error of the segment in log-odds)
are corrected first, and shrinkage plus the early stop on held-out log loss keep the trees from
fitting noise. The score is itself a tree input, so a segment's miscalibration may also vary
along the score.

Early stopping: a seeded ``validation_fraction`` of the rows is held out; the held-out log loss
is computed after every tree and the trees after the best one are dropped once
``n_iter_no_change`` trees in a row have not improved it by more than ``tol``. With ``refit``
(the default) the number of trees so chosen is then grown again on all rows, so no row is
wasted on validation in the final map.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.exceptions import NotFittedError

from mlcal._safe_json import MAX_DOCUMENT_BYTES, dumps_safe
from mlcal._solvers.beta_fit import fit_logit_scaling
from mlcal._solvers.detmath import det_expit_array, det_log_array
from mlcal._validation import as_labels, as_weights
from mlcal.calibrators._params import Boolean, Integer, IsNone, Options, Real, validate_params
from mlcal.maps import MapFormatError
from mlcal.multicalibration._features import (as_numeric, as_text, category_vocabulary,
                                              encode_categories, feature_columns,
                                              is_categorical_column)
from mlcal.multicalibration._trees import (bin_numeric, grow_tree, numeric_cuts,
                                           route_binned)
from mlcal.multicalibration.map import (KIND, FeatureSpec, MulticalibrationMap, Tree,
                                        check_probability_scores, logit_of_scores)

METHOD = "multicalibration"


def log_loss_of_margin(z: np.ndarray, y: np.ndarray, w: np.ndarray) -> float:
    """Weighted mean of ``log(1 + e^z) - y z`` (computed stably, with detmath logs)."""
    # log(1 + e^z) = max(z, 0) + log(1 + e^-|z|) = max(z, 0) - log(expit(|z|))
    soft = np.maximum(z, 0.0) - det_log_array(det_expit_array(np.abs(z)))
    return float(np.sum(w * (soft - y * z)) / np.sum(w))


class Multicalibration(BaseEstimator):
    """Multicalibration by boosted Newton trees on the base score and segment features.

    Corrects a base model's probabilities where the miscalibration depends on segments that
    are not known in advance: the trees find them among the chosen features (numeric or
    categorical) and the score. See the module docstring for the derivation.

    Parameters
    ----------
    max_iter : int, default=300
        Most trees.
    learning_rate : float, default=0.1
        Shrinkage of each tree's Newton step.
    max_depth : int, default=5
        Depth of every tree (at most ``2**max_depth`` leaves). Deep enough for interactions
        of a few features (a cell of two categorical features within a score range).
    l2_regularization : float, default=1.0
        ``lam`` of the leaf values ``-G / (H + lam)`` (in units of the weighted Hessian).
    min_hessian_leaf : float, default=20.0
        Least Hessian sum ``sum w p (1 - p)`` in a leaf (a row at ``p = 0.5`` of weight 1
        counts 0.25).
    min_gain : float, default=0.0
        Least loss decrease (the gain in the module docstring) for a split.
    max_bins : int, default=255
        Most bins per numeric feature (2 to 255).
    max_categories : int, default=64
        Most categories kept per categorical feature (by weight); the rest share one code.
    initial : {"platt-logit", "logit"}, default="platt-logit"
        The start: the global Platt-on-logit fit ``a logit(s) + b``, or ``logit(s)`` itself.
    validation_fraction : float or None, default=0.2
        Share of rows held out for early stopping; None grows all ``max_iter`` trees on all
        rows.
    n_iter_no_change : int, default=10
        Stop after this many trees without a held-out improvement larger than ``tol``.
    tol : float, default=1e-7
        Least improvement of the held-out mean log loss that counts.
    refit : bool, default=True
        After the held-out split has chosen the number of trees, fit again on every row
        (bins, start and that many trees); False keeps the trees fitted without the
        held-out rows.
    random_state : int, default=0
        Seed of the held-out split.

    Attributes
    ----------
    map_ : MulticalibrationMap
        The canonical map (JSON, ONNX).
    n_iter_ : int
        Trees kept.
    validation_loss_ : ndarray
        Held-out mean log loss after 0, 1, 2, ... trees (empty without a held-out split).
    """

    method_name: ClassVar[str] = METHOD
    _parameter_constraints: ClassVar[dict] = {
        "max_iter": [Integer(0, 100_000)], "learning_rate": [Real(0.0, 1.0, closed="right")],
        "max_depth": [Integer(1, 12)], "l2_regularization": [Real(0.0)],
        "min_hessian_leaf": [Real(0.0)], "min_gain": [Real(0.0)],
        "max_bins": [Integer(2, 255)], "max_categories": [Integer(1, 255)],
        "initial": [Options(("platt-logit", "logit"))],
        "validation_fraction": [IsNone(), Real(0.0, 1.0, closed="neither")],
        "n_iter_no_change": [Integer(1)], "tol": [Real(0.0)], "refit": [Boolean()],
        "random_state": [Integer(0)]}

    def __init__(self, max_iter: int = 300, learning_rate: float = 0.1, max_depth: int = 5,
                 l2_regularization: float = 1.0, min_hessian_leaf: float = 20.0,
                 min_gain: float = 0.0, max_bins: int = 255, max_categories: int = 64,
                 initial: str = "platt-logit", validation_fraction: float | None = 0.2,
                 n_iter_no_change: int = 10, tol: float = 1e-7, refit: bool = True,
                 random_state: int = 0):
        self.max_iter = max_iter
        self.learning_rate = learning_rate
        self.max_depth = max_depth
        self.l2_regularization = l2_regularization
        self.min_hessian_leaf = min_hessian_leaf
        self.min_gain = min_gain
        self.max_bins = max_bins
        self.max_categories = max_categories
        self.initial = initial
        self.validation_fraction = validation_fraction
        self.n_iter_no_change = n_iter_no_change
        self.tol = tol
        self.refit = refit
        self.random_state = random_state

    def _validate_params(self) -> None:
        validate_params(type(self).__name__, self.get_params(deep=False),
                        self._parameter_constraints)

    # -- fitting ----------------------------------------------------------------------------
    def fit(self, scores, y, features=None, sample_weight=None) -> "Multicalibration":
        """Fit the corrections.

        Parameters
        ----------
        scores : array-like of shape (n,)
            The base model's probabilities, in [0, 1].
        y : array-like of shape (n,)
            Binary labels.
        features : DataFrame, dict of columns, 2-D array or None
            The segment features. Columns of text, object, boolean or category dtype are
            categorical; the others numeric (finite). None: corrections along the score only.
        sample_weight : array-like of shape (n,), optional
            Non-negative weights (a weight of k is the same as k copies of the row).
        """
        self._validate_params()
        s = check_probability_scores(scores)
        n = s.size
        yv = as_labels(y, n)
        w = as_weights(sample_weight, n)
        names, cols = feature_columns(features, n)
        held = self._held_out(n)
        specs, a, b, trees = self._fit_rows(s, yv, w, names, cols, held, self.max_iter)
        if self.refit and held.any():
            # the held-out split chose the number of trees; grow that many on every row
            losses = self.validation_loss_
            specs, a, b, trees = self._fit_rows(s, yv, w, names, cols, np.zeros_like(held),
                                                len(trees))
            self.validation_loss_ = losses
        self.map_ = MulticalibrationMap(float(a), float(b), tuple(specs), tuple(trees))
        self.n_iter_ = len(trees)
        return self

    def _fit_rows(self, s, y, w, names, cols, held, max_iter):
        fit_rows = ~held
        specs, binned, n_bins, is_cat, cuts = self._bin_features(s, names, cols, w, fit_rows)
        a, b = 1.0, 0.0
        if self.initial == "platt-logit":
            a, b = fit_logit_scaling(s[fit_rows], y[fit_rows], w[fit_rows], intercept=True,
                                     smooth=False, method=METHOD, on_logit=True)
        z = a * logit_of_scores(s) + b
        trees = self._boost(binned, n_bins, is_cat, cuts, z, y, w, held, max_iter)
        return specs, a, b, trees

    def _held_out(self, n: int) -> np.ndarray:
        held = np.zeros(n, dtype=bool)
        if self.validation_fraction is not None:
            n_held = int(round(self.validation_fraction * n))
            if n_held < 1 or n_held >= n:
                raise ValueError(f"{METHOD}: validation_fraction={self.validation_fraction} "
                                 f"of {n} rows leaves no rows to fit or to validate on; pass "
                                 "more rows or validation_fraction=None")
            held[np.random.default_rng(self.random_state).permutation(n)[:n_held]] = True
        return held

    def _bin_features(self, s, names, cols, w, fit_rows):
        specs = [FeatureSpec("score", "score")]
        columns = [s]
        kinds = [False]
        for name, col in zip(names, cols):
            if is_categorical_column(col):
                text = as_text(col)
                cats = category_vocabulary(text[fit_rows], w[fit_rows], self.max_categories)
                specs.append(FeatureSpec(name, "categorical", tuple(cats)))
                columns.append(encode_categories(text, cats))
                kinds.append(True)
            else:
                specs.append(FeatureSpec(name, "numeric"))
                columns.append(as_numeric(col, name))
                kinds.append(False)
        n = s.size
        binned = np.empty((n, len(columns)), dtype=np.uint8)
        n_bins = np.empty(len(columns), dtype=np.int64)
        cuts = []
        for j, (col, cat) in enumerate(zip(columns, kinds)):
            if cat:
                binned[:, j] = col
                n_bins[j] = len(specs[j].categories) + 1
                cuts.append(None)
            else:
                c = numeric_cuts(col[fit_rows], w[fit_rows], self.max_bins)
                binned[:, j] = bin_numeric(col, c)
                n_bins[j] = c.size + 1
                cuts.append(c)
        return specs, binned, n_bins, np.asarray(kinds, dtype=np.bool_), cuts

    def _boost(self, binned, n_bins, is_cat, cuts, z, y, w, held, max_iter) -> list[Tree]:
        fit_rows = ~held
        xb, zf, yf, wf = binned[fit_rows], z[fit_rows], y[fit_rows], w[fit_rows]
        xv, zv, yv, wv = binned[held], z[held], y[held], w[held]
        validate = bool(held.any())
        losses = [log_loss_of_margin(zv, yv, wv)] if validate else []
        best, since_best, trees = 0, 0, []
        for _ in range(max_iter):
            p = det_expit_array(zf)
            g = wf * (p - yf)
            h = wf * (p * (1.0 - p))
            feat, split_bin, cat_left, left, right, value, leaf_of = grow_tree(
                xb, g, h, n_bins, is_cat, self.max_depth, float(self.l2_regularization),
                float(self.min_hessian_leaf), float(self.min_gain))
            if feat.size == 1:   # no split qualifies: a constant step, which the start covers
                break
            value = self.learning_rate * value
            trees.append(_export_tree(feat, split_bin, cat_left, left, right, value, cuts,
                                      is_cat))
            zf = zf + value[leaf_of]
            if validate:
                zv = zv + value[route_binned(xv, feat, split_bin, cat_left, left, right,
                                             is_cat)]
                losses.append(log_loss_of_margin(zv, yv, wv))
                if losses[-1] < losses[best] - self.tol:
                    best, since_best = len(trees), 0
                else:
                    since_best += 1
                    if since_best >= self.n_iter_no_change:
                        break
        self.validation_loss_ = np.asarray(losses)
        return trees[:best] if validate else trees

    # -- prediction -------------------------------------------------------------------------
    def _check_fitted(self) -> None:
        if not hasattr(self, "map_"):
            raise NotFittedError(f"This {type(self).__name__} instance is not fitted yet; "
                                 "call fit(scores, y, features) first")

    def predict(self, scores, features=None) -> np.ndarray:
        """Calibrated probabilities of the positive class, shape (n,)."""
        self._check_fitted()
        return self.map_(scores, features)

    def predict_proba(self, scores, features=None) -> np.ndarray:
        """``[1 - p, p]`` as an (n, 2) array."""
        p = self.predict(scores, features)
        return np.column_stack([1.0 - p, p])

    # -- serialisation ----------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """The calibrator document: method, parameters and the canonical map."""
        from mlcal.calibrators.base import calibrator_document

        self._check_fitted()
        return calibrator_document(METHOD, self.get_params(deep=False), self.map_)

    def to_json(self, indent: int | None = None) -> str:
        """:meth:`to_dict` as strict JSON (floats round-trip bit for bit)."""
        return dumps_safe(self.to_dict(), indent=indent, nonfinite="error")

    @classmethod
    def from_dict(cls, doc: Any) -> "Multicalibration":
        """Rebuild from :meth:`to_dict` output, validating every field
        (:class:`~mlcal.calibrators.CalibratorFormatError`)."""
        from mlcal.calibrators.base import (CalibratorFormatError, build_from_params,
                                            read_document_header)
        from mlcal.calibrators.document_rules import ENVELOPE_FIELDS, check_fields

        method, params = read_document_header(doc)
        if method != METHOD:
            raise CalibratorFormatError(f"calibrator document: method {method[:40]!r} is not "
                                        f"{METHOD!r}")
        check_fields(doc, ENVELOPE_FIELDS, METHOD)
        obj = build_from_params(cls, params)
        raw = doc.get("map")
        if not isinstance(raw, dict) or raw.get("type") != KIND:
            raise CalibratorFormatError(f"calibrator document: a {METHOD!r} calibrator holds a "
                                        f"{KIND!r} map")
        try:
            obj.map_ = MulticalibrationMap.from_dict(raw)
        except MapFormatError as exc:
            raise CalibratorFormatError(f"calibrator document: {exc}") from None
        obj.n_iter_ = len(obj.map_.trees)
        return obj

    @classmethod
    def from_json(cls, text: str | bytes, *,
                  max_bytes: int = MAX_DOCUMENT_BYTES) -> "Multicalibration":
        """Rebuild from :meth:`to_json` output (bounded strict parsing, then
        :meth:`from_dict`)."""
        from mlcal.calibrators.base import parse_document

        return cls.from_dict(parse_document(text, max_bytes))


def _export_tree(feat, split_bin, cat_left, left, right, value, cuts, is_cat) -> Tree:
    """A grown tree in map form: bins become exact thresholds, masks become code sets."""
    n = feat.size
    threshold = np.zeros(n)
    sets: list[tuple[int, ...]] = []
    for k in range(n):
        f = int(feat[k])
        if f >= 0 and is_cat[f]:
            sets.append(tuple(int(c) for c in np.flatnonzero(cat_left[k])))
        else:
            sets.append(())
            if f >= 0:
                threshold[k] = cuts[f][split_bin[k]]
    leaf_value = np.where(feat < 0, value, 0.0)
    return Tree(feat.astype(np.int64), threshold, tuple(sets), left.astype(np.int64),
                right.astype(np.int64), leaf_value)
