"""Anytime-valid monitoring of a deployed model's calibration on matured, labelled batches.

The null hypothesis is that the forecasts are calibrated: every monitored row has
``y ~ Bernoulli(p)``. :class:`CalibrationMonitor` keeps an e-process ``E_t`` (a nonnegative
supermartingale under the null, started at 1); by Ville's inequality
``P(sup_t E_t >= 1/alpha) <= alpha``, so the alarm rule ``E_t >= 1/alpha`` keeps its type-I
error at ``alpha`` however often it is checked (after every batch, forever).

Construction (details and the validity argument: ``docs/monitoring.md``)

* Per row, the likelihood ratio of an alternative forecast ``q`` against ``p`` is
  ``q^y (1-q)^(1-y) / (p^y (1-p)^(1-y)) = 1 + lambda (y - p)`` with
  ``lambda = (q - p) / (p (1 - p))``: a bet on the zero-mean residual ``y - p`` that is never
  negative. Its expectation under the null is exactly 1 for any ``q`` fixed before ``y`` is seen.
* ``q`` is a *plug-in*: an alternative fitted on earlier batches only (predictable), so every
  batch multiplies the process by a factor of mean 1 under the null.
  - offset component: ``logit q = logit p + a`` (calibration-in-the-large);
  - shape component: ``logit q = logit p + b (logit p - c)``, a slope change about the window's
    centre ``c`` (orthogonal, to first order, to the offset).
* A change can start at any batch, and a plug-in fitted on all the history is diluted by the
  pre-change batches. So each component is a *mixture over start batches* ``k``: the process
  that ignores the data before ``k`` (factor 1) and bets from ``k`` on with plug-ins fitted on
  batches ``k..t-1``. Mixed with weights ``pi_k = 1 / ((k + 1)(k + 2))`` (``k = 0, 1, ...``, fixed
  in advance, summing to 1) it stays a test martingale. The alarm statistic is the average of
  the two components (an average of e-processes is an e-process).
* The start ``k`` whose process holds the most evidence is the change estimate (a CUSUM-style
  argmax; an estimate, not a test).
* The confidence sequence for the offset inverts, for each offset ``a0`` of a grid, the e-process
  of the null ``logit P(y=1) = logit p + a0`` against a plug-in offset fitted on all past
  batches; the grid points whose e-value stayed below ``1/alpha`` form a set that contains the
  true offset at every batch simultaneously with probability ``>= 1 - alpha``, *if the offset
  has been constant since monitoring started*. The reported interval is that set's hull.

Predictions are clipped into ``[eps, 1 - eps]`` (``eps = 1e-6``) before anything else, so a
forecast of exactly 0 or 1 met by the contradicting label costs a finite factor instead of an
infinite one; the guarantee is for the clipped forecasts. Sample weights are frequency weights:
a row of weight ``w`` counts as ``w`` rows with its label (integer weights give the same result
as repeated rows); the guarantee assumes that reading.

State is kept as per-batch sufficient statistics (five moments and a histogram of
``logit(p)`` with, per bin, the weight, the weighted label sum and the weighted logit sum),
so it survives between jobs as a small JSON document (:meth:`CalibrationMonitor.to_json`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.special import expit, logit

from mlcal._validation import as_labels, as_weights, check_probabilities

__all__ = ["CalibrationMonitor", "MonitorStep", "RECOMMENDATIONS", "MONITOR_FORMAT", "BetPlan",
           "BatchSums", "batch_sums"]

MONITOR_FORMAT = "mlcal.calibration_monitor"
MONITOR_VERSION = 1
RECOMMENDATIONS = ("none", "re-offset", "re-fit")

EPS = 1e-6                                   # forecast clipping (logit within +-13.8)
_BIN_EDGES = np.linspace(-14.0, 14.0, 113)   # 112 logit bins of width 0.25
_N_BINS = _BIN_EDGES.size - 1
_MOMENTS = ("weight", "events", "forecast", "resid", "resid_x", "var", "var_x", "var_xx")
_PRIOR_VAR = 1.0      # ridge on the plug-in fits: the weight of a row or so of prior evidence
_OFFSET_CLIP = 3.0    # plug-in offset bets stay within +-3 logits
_SLOPE_CLIP = (-0.8, 1.5)   # plug-in slope change b: the slope 1 + b stays within [0.2, 2.5]
_CS_GRID = np.linspace(-4.0, 4.0, 321)      # offset grid of the confidence sequence (step 0.025)
_REFIT_LR_CRITICAL = 6.634896601021214      # chi-square(1) 0.99 quantile: slope != 1 test
_Z95 = 1.959963984540054


def _start_log_weight(k: np.ndarray) -> np.ndarray:
    """log pi_k of the start-batch mixture, pi_k = 1 / ((k + 1)(k + 2)), k = 0, 1, ..."""
    k = np.asarray(k, dtype=np.float64)
    return -np.log(k + 1.0) - np.log(k + 2.0)


def _logsumexp(v: np.ndarray) -> float:
    top = float(np.max(v))
    return top + math.log(float(np.sum(np.exp(v - top))))


def _row_log_lr(eta_alt: np.ndarray, eta_null: np.ndarray, y: np.ndarray) -> np.ndarray:
    """log of Bernoulli(y; expit(eta_alt)) / Bernoulli(y; expit(eta_null)), elementwise with
    broadcasting; computed on the logit scale so it stays finite."""
    # log q = -log(1 + e^-eta), log(1 - q) = -log(1 + e^eta)
    sign = 2.0 * y - 1.0   # y=1: -softplus(-eta); y=0: -softplus(eta)
    return np.logaddexp(0.0, -sign * eta_null) - np.logaddexp(0.0, -sign * eta_alt)


@dataclass(frozen=True)
class MonitorStep:
    """What one :meth:`CalibrationMonitor.update` saw and concluded (JSON-ready via
    :meth:`as_dict`).

    Attributes
    ----------
    batch : int
        1-based batch number.
    n_rows : int
        Rows in the batch; ``weight`` is their total sample weight.
    positive_rate, mean_forecast : float
        Weighted label mean and forecast mean of the batch.
    ece, log_loss : float
        Weighted 10-bin (uniform) expected calibration error and mean log loss of the batch.
    e_value, e_offset, e_shape : float
        Running alarm statistic and its two components (the alarm statistic is their mean).
    alarm : bool
        Whether ``e_value`` has reached ``1/alpha`` at this or an earlier batch (sticky).
    change_batch : int
        Estimated first batch of the change (1-based).
    offset_estimate : float
        Logit offset fitted on the batches since ``change_batch``; ``offset_interval`` its 95 %
        Wald interval (pointwise, not time-uniform).
    offset_cs : tuple of float or None
        Time-uniform ``1 - alpha`` confidence sequence for a constant offset (``None`` when every
        offset of the grid has been rejected, i.e. the offset is not constant).
    recommendation : {"none", "re-offset", "re-fit"}
    """

    batch: int
    n_rows: int
    weight: float
    positive_rate: float
    mean_forecast: float
    ece: float
    log_loss: float
    e_value: float
    e_offset: float
    e_shape: float
    alarm: bool
    change_batch: int
    offset_estimate: float
    offset_interval: tuple[float, float]
    offset_cs: tuple[float, float] | None
    recommendation: str

    def as_dict(self) -> dict[str, Any]:
        """Plain-JSON form (pairs as lists)."""
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.__dict__.items()}


@dataclass(frozen=True)
class BetPlan:
    """The bets of the next batch (:meth:`CalibrationMonitor.bet_plan`), fixed before it.

    Attributes
    ----------
    batches : int
        Batches the monitor had seen when the plan was made.
    first : int
        First start batch still betting; the plan's arrays are for starts ``first..batches``.
    offset, slope, centre : ndarray
        Per start: the offset component's plug-in ``a`` (``logit q = logit p + a``) and the
        shape component's ``b`` and ``c`` (``logit q = logit p + b (logit p - c)``).
    cs_offset : float
        The confidence sequence's alternative offset (nan before the first batch: no bet).
    """

    batches: int
    first: int
    offset: np.ndarray
    slope: np.ndarray
    centre: np.ndarray
    cs_offset: float


@dataclass(frozen=True)
class BatchSums:
    """Everything :meth:`CalibrationMonitor.absorb` needs from a batch: sums over its rows.

    With ``p`` clipped to ``[EPS, 1 - EPS]``, ``x = logit(p)``, weights ``w``:

    Attributes
    ----------
    n_rows : int
    moments : ndarray of shape (8,)
        ``sum w``, ``sum w y``, ``sum w p``, ``sum w r``, ``sum w r x``, ``sum w v``,
        ``sum w v x``, ``sum w v x^2`` with ``r = y - p``, ``v = p (1 - p)``.
    bins : ndarray of shape (3, 112)
        Per logit bin (width 0.25 on [-14, 14]): ``sum w``, ``sum w y``, ``sum w x``.
    ece_gaps : ndarray of shape (10,)
        Per uniform probability bin ``min(floor(10 p), 9)``: ``sum w (y - p)``.
    loglik : float
        ``sum w (y log p + (1 - y) log(1 - p))``.
    log_lr_offset, log_lr_shape : ndarray
        Per betting start of the plan: ``sum w log(1 + lambda (y - p))`` of its bet.
    cs_log_lr : ndarray of shape (321,) or None
        Per offset of the confidence sequence's grid: the log bet against it (None: no bet).
    """

    n_rows: int
    moments: np.ndarray
    bins: np.ndarray
    ece_gaps: np.ndarray
    loglik: float
    log_lr_offset: np.ndarray
    log_lr_shape: np.ndarray
    cs_log_lr: np.ndarray | None


def batch_sums(plan: BetPlan, p: np.ndarray, y: np.ndarray, w: np.ndarray) -> BatchSums:
    """:class:`BatchSums` of validated in-memory rows (``p`` in [0, 1], ``y`` 0/1, ``w``)."""
    p = np.clip(p, EPS, 1.0 - EPS)
    x = logit(p)
    a, b, c = plan.offset, plan.slope, plan.centre
    eta_off = x[None, :] + a[:, None]
    eta_shape = x[None, :] + b[:, None] * (x[None, :] - c[:, None])
    log_off = _row_log_lr(eta_off, x[None, :], y[None, :]) @ w
    log_shape = _row_log_lr(eta_shape, x[None, :], y[None, :]) @ w
    cs = None
    if np.isfinite(plan.cs_offset):
        eta_null = x[None, :] + _CS_GRID[:, None]
        cs = _row_log_lr(x[None, :] + plan.cs_offset, eta_null, y[None, :]) @ w
    v = p * (1.0 - p)
    r = y - p
    moments = np.array([w.sum(), w @ y, w @ p, w @ r, w @ (r * x), w @ v, w @ (v * x),
                        w @ (v * x * x)])
    ids = np.clip(np.searchsorted(_BIN_EDGES, x, side="right") - 1, 0, _N_BINS - 1)
    bins = np.vstack([np.bincount(ids, weights=w, minlength=_N_BINS),
                      np.bincount(ids, weights=w * y, minlength=_N_BINS),
                      np.bincount(ids, weights=w * x, minlength=_N_BINS)])
    ece_ids = np.minimum((p * 10).astype(np.int64), 9)
    gaps = np.bincount(ece_ids, weights=w * (y - p), minlength=10)
    loglik = float(np.sum(w * (y * np.log(p) + (1.0 - y) * np.log1p(-p))))
    return BatchSums(int(p.shape[0]), moments, bins, gaps, loglik, log_off, log_shape, cs)


class CalibrationMonitor:
    """Sequential, anytime-valid test of calibration with a graded recommendation.

    Parameters
    ----------
    alpha : float, default=0.05
        Alarm level in (0, 0.5]: the probability of ever alarming on a calibrated stream is at
        most ``alpha``, however many batches are checked.
    active_starts : int or None, default=200
        How many of the most recent change starts keep betting; older ones are frozen at their
        value (still valid), which bounds the cost of a batch to ``active_starts`` bets per
        row. None: every start keeps betting.

    Attributes
    ----------
    alarm : bool
        Sticky: the alarm statistic has reached ``1/alpha``.
    alarm_batch : int or None
        1-based batch at which it first did.
    e_value : float
        Current alarm statistic (mean of the offset and shape e-processes).
    recommendation : {"none", "re-offset", "re-fit"}
        ``"none"`` until the alarm; then, on the batches since the estimated change, a
        likelihood-ratio test of slope 1 in ``logit P(y=1) = a + b logit(p)`` at level 1 %:
        ``"re-offset"`` (correct the intercept) when slope 1 is not rejected, ``"re-fit"``
        otherwise (Davis et al.'s graded response).
    offset_estimate, offset_interval
        Logit offset fitted on the batches since the estimated change and its 95 % Wald
        interval: the map ``logit p -> logit p + offset_estimate`` is the re-offset.
    offset_cs : tuple or None
        Time-uniform confidence sequence for a constant offset (see the module docstring).
    change_batch : int or None
        Estimated first batch of the change (None before any batch).

    Notes
    -----
    Batches must be fed in the order their outcomes matured, each once. A batch may hold a
    single class. The state is a few hundred numbers per batch; persist it between jobs with
    :meth:`to_json` / :meth:`from_json` (or :meth:`save` / :meth:`load`).
    """

    def __init__(self, alpha: float = 0.05, active_starts: int | None = 200) -> None:
        if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) \
                or not 0.0 < float(alpha) <= 0.5:
            raise ValueError(f"alpha must be a number in (0, 0.5], got {alpha!r}")
        if active_starts is not None and (isinstance(active_starts, bool) or not isinstance(
                active_starts, (int, np.integer)) or active_starts < 1):
            raise ValueError(f"active_starts must be None or an integer >= 1, "
                             f"got {active_starts!r}")
        self.alpha = float(alpha)
        self.active_starts = None if active_starts is None else int(active_starts)
        self._moments: list[np.ndarray] = []        # per batch, len(_MOMENTS)
        self._bins: list[np.ndarray] = []           # per batch, (3, _N_BINS): w, w*y, w*x
        self._log_e_offset: list[float] = []        # per start batch k
        self._log_e_shape: list[float] = []
        self._cs_log_e = np.zeros(_CS_GRID.size)
        self.alarm = False
        self.alarm_batch: int | None = None
        self._cache: dict[str, Any] = {}

    # ------------------------------------------------------------------ plug-ins (predictable)
    def _window_moments(self) -> np.ndarray:
        """Moments of the windows k..t-1 for every start k = 0..t (row k: window from k)."""
        t = len(self._moments)
        if t == 0:
            return np.zeros((1, len(_MOMENTS)))
        stack = np.vstack(self._moments)
        # suffix sums: window k..t-1 = sum of batches k..t-1; the last row (k = t) is empty
        suffix = np.cumsum(stack[::-1], axis=0)[::-1]
        return np.vstack([suffix, np.zeros((1, len(_MOMENTS)))])

    @staticmethod
    def _plugins(mom: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """One Newton step from the null (a score-test step, ridge-regularised) per window:
        offset ``a``, slope change ``b`` and centre ``c``. Empty windows give a = b = 0."""
        resid, resid_x = mom[:, 3], mom[:, 4]
        var, var_x, var_xx = mom[:, 5], mom[:, 6], mom[:, 7]
        a = np.clip(resid / (var + _PRIOR_VAR), -_OFFSET_CLIP, _OFFSET_CLIP)
        centre = np.divide(var_x, var, out=np.zeros_like(var), where=var > 0)
        spread = np.maximum(var_xx - centre * var_x, 0.0)   # sum v (x - c)^2
        b = np.clip((resid_x - centre * resid) / (spread + _PRIOR_VAR), *_SLOPE_CLIP)
        return a, b, centre

    def _cs_plugin(self) -> float:
        """Offset fitted on all past batches (the alternative of every CS null)."""
        if not self._bins:
            return float("nan")
        return self._fit_window(0, with_slope=False)[0]

    # ------------------------------------------------------------------ window fits
    def _window_bins(self, start: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        agg = np.sum(self._bins[start:], axis=0)
        keep = agg[0] > 0
        w = agg[0][keep]
        return agg[2][keep] / w, agg[1][keep] / w, w

    def _fit_window(self, start: int, with_slope: bool = True) -> tuple[float, float, float, bool]:
        """Offset MLE on batches ``start..t-1`` (binned), its standard error, the slope
        likelihood-ratio statistic, and whether the window holds a single class."""
        from mlcal.metrics.curves import _fit_joint, _fit_offset_intercept, _loglik

        agg = np.sum(self._bins[start:], axis=0)
        # one class, decided exactly: the label sums are the weight sums computed in the same
        # order (w * 1 == w), or all zero
        no_events, all_events = not np.any(agg[1] > 0), np.array_equal(agg[1], agg[0])
        if no_events or all_events:
            # the MLE is infinite; report the grid edge in that direction
            return (_CS_GRID[0] if no_events else _CS_GRID[-1]), float("inf"), 0.0, True
        z, r, w = self._window_bins(start)
        a = float(np.clip(_fit_offset_intercept(z, r, w), _CS_GRID[0], _CS_GRID[-1]))
        mu = expit(a + z)
        se = 1.0 / math.sqrt(float(np.sum(w * mu * (1.0 - mu))))
        lr = 0.0
        if with_slope and z.size >= 2:
            theta = _fit_joint(z, r, w)
            if np.all(np.isfinite(theta)):
                lr = max(0.0, 2.0 * (_loglik(theta[0] + theta[1] * z, r, w)
                                     - _loglik(a + z, r, w)))
        return a, se, lr, False

    # ------------------------------------------------------------------ update
    def update(self, p, y, sample_weight=None) -> MonitorStep:
        """Process one matured batch (in arrival order) and return its summary.

        Parameters
        ----------
        p : array-like of shape (n,)
            The probabilities the deployed model gave these rows, in [0, 1].
        y : array-like of shape (n,)
            Their outcomes in {0, 1}; one class only is fine.
        sample_weight : array-like of shape (n,), optional
            Nonnegative frequency weights (not all zero).

        Returns
        -------
        MonitorStep
        """
        p = check_probabilities(p, name="p")
        y = as_labels(y, p.shape[0])
        w = as_weights(sample_weight, p.shape[0])
        plan = self.bet_plan()
        return self.absorb(plan, batch_sums(plan, p, y, w))

    def bet_plan(self) -> BetPlan:
        """The bets on the next batch, fixed from the earlier batches only (predictable).

        Starts older than ``active_starts`` batches stop betting (a stopped martingale stays
        one). Every per-row quantity :meth:`absorb` needs is a sum over the batch's rows given
        this plan, so it can be computed where the rows are (:func:`batch_sums` in memory,
        ``mlcal.spark.monitor_batches`` in Spark)."""
        t = len(self._moments)
        first = 0 if self.active_starts is None else max(0, t + 1 - self.active_starts)
        a, b, c = self._plugins(self._window_moments()[first:])        # k = first..t
        return BetPlan(batches=t, first=first, offset=a, slope=b, centre=c,
                       cs_offset=self._cs_plugin())

    def absorb(self, plan: BetPlan, sums: BatchSums) -> MonitorStep:
        """Add a batch given by its sums under ``plan`` (from :meth:`bet_plan` on this state)."""
        t = len(self._moments)
        if plan.batches != t or sums.log_lr_offset.shape != plan.offset.shape:
            raise ValueError(f"the bet plan was made for batch {plan.batches + 1}, the monitor "
                             f"is at batch {t + 1}")
        if not sums.moments[0] > 0:
            raise ValueError("the batch's total weight is 0; nothing to monitor")
        self._cache.clear()
        first = plan.first
        log_off = np.append(self._log_e_offset, 0.0)
        log_shape = np.append(self._log_e_shape, 0.0)
        log_off[first:] += sums.log_lr_offset
        log_shape[first:] += sums.log_lr_shape
        self._log_e_offset, self._log_e_shape = log_off.tolist(), log_shape.tolist()
        if sums.cs_log_lr is not None:           # confidence sequence for a constant offset
            self._cs_log_e += sums.cs_log_lr
        self._moments.append(np.asarray(sums.moments, dtype=np.float64))
        self._bins.append(np.asarray(sums.bins, dtype=np.float64))
        if not self.alarm and self.log_e_value >= math.log(1.0 / self.alpha):
            self.alarm, self.alarm_batch = True, t + 1
        return self._step(sums)

    def _step(self, sums: BatchSums) -> MonitorStep:
        total = float(sums.moments[0])
        start = self._change_index()
        a, se, _, _ = self._fit_window(start, with_slope=False)
        return MonitorStep(
            batch=len(self._moments), n_rows=int(sums.n_rows), weight=total,
            positive_rate=float(sums.moments[1]) / total,
            mean_forecast=float(sums.moments[2]) / total,
            ece=float(np.sum(np.abs(sums.ece_gaps)) / total), log_loss=-sums.loglik / total,
            e_value=math.exp(min(self.log_e_value, 700.0)),
            e_offset=self.e_offset, e_shape=self.e_shape, alarm=self.alarm,
            change_batch=start + 1, offset_estimate=a,
            offset_interval=(a - _Z95 * se, a + _Z95 * se), offset_cs=self.offset_cs,
            recommendation=self.recommendation)

    # ------------------------------------------------------------------ read-outs
    def _mixture(self, log_e: list[float]) -> float:
        """log of sum_k pi_k E_k over every start k: the started processes (k < len(log_e))
        plus the not-yet-started ones, still at 1, whose weights sum to 1 / (len + 1). With
        that tail the mixture is a martingale (without it, a supermartingale)."""
        started = np.asarray(log_e) + _start_log_weight(np.arange(len(log_e)))
        return _logsumexp(np.append(started, -math.log(len(log_e) + 1.0)))

    @property
    def n_batches(self) -> int:
        """Number of batches processed."""
        return len(self._moments)

    @property
    def log_e_value(self) -> float:
        """log of the alarm statistic (mean of the two component e-processes)."""
        if not self._moments:
            return 0.0
        return _logsumexp(np.array([self._mixture(self._log_e_offset),
                                    self._mixture(self._log_e_shape)])) - math.log(2.0)

    @property
    def e_value(self) -> float:
        """The alarm statistic ``E_t`` (capped at exp(700) for display)."""
        return math.exp(min(self.log_e_value, 700.0))

    @property
    def e_offset(self) -> float:
        """Offset (calibration-in-the-large) e-process."""
        return math.exp(min(self._mixture(self._log_e_offset), 700.0))

    @property
    def e_shape(self) -> float:
        """Shape (logit-slope) e-process."""
        return math.exp(min(self._mixture(self._log_e_shape), 700.0))

    def _change_index(self) -> int:
        """0-based estimate of the first changed batch (cached per batch count).

        Two steps: the start ``k0`` whose process holds the most evidence gives a window with
        the change; the logistic recalibration ``a + b logit(p)`` fitted on batches ``k0..``
        is the post-change alternative; the change is the start of the suffix of batches with
        the largest summed log-likelihood ratio of that alternative against the forecasts
        (a backward CUSUM argmax; first on ties). An estimate, not a test.
        """
        t = len(self._moments)
        if t == 0:
            return 0
        if self._cache.get("change", (None,))[0] == t:
            return self._cache["change"][1]
        best = np.maximum(np.asarray(self._log_e_offset), np.asarray(self._log_e_shape))
        k0 = int(np.argmax(best[:t]))
        theta = self._window_alternative(k0)
        bins = np.asarray(self._bins)                       # (t, 3, K)
        w, wy = bins[:, 0], bins[:, 1]
        z = np.divide(bins[:, 2], w, out=np.zeros_like(w), where=w > 0)
        eta = theta[0] + theta[1] * z
        ell = np.sum(wy * (eta - z) - w * (np.logaddexp(0.0, eta) - np.logaddexp(0.0, z)),
                     axis=1)
        suffix = np.cumsum(ell[::-1])[::-1]
        change = int(np.argmax(suffix))
        self._cache["change"] = (t, change)
        return change

    def _window_alternative(self, start: int) -> np.ndarray:
        """(a, b) of logit P(y=1) = a + b logit(p) on batches ``start..`` (binned); the
        offset-only fit (b = 1) when the slope is not identifiable."""
        from mlcal.metrics.curves import _fit_joint

        z, r, w = self._window_bins(start)
        a, _, _, one_class = self._fit_window(start, with_slope=False)
        if not one_class and z.size >= 2:
            theta = _fit_joint(z, r, w)
            if np.all(np.isfinite(theta)) and np.all(np.abs(theta) < 50):
                return np.asarray(theta, dtype=np.float64)
        return np.array([a, 1.0])

    @property
    def change_batch(self) -> int | None:
        """Estimated first batch (1-based) of the change."""
        return self._change_index() + 1 if self._moments else None

    @property
    def offset_estimate(self) -> float:
        """Logit offset fitted on the batches since the estimated change (nan before data)."""
        return self._fit_window(self._change_index())[0] if self._moments else float("nan")

    @property
    def offset_interval(self) -> tuple[float, float]:
        """95 % Wald interval of :attr:`offset_estimate` (pointwise)."""
        if not self._moments:
            return (float("nan"), float("nan"))
        a, se, _, _ = self._fit_window(self._change_index())
        return (a - _Z95 * se, a + _Z95 * se)

    @property
    def offset_cs(self) -> tuple[float, float] | None:
        """Hull of the offsets not rejected by the confidence sequence (None: all rejected)."""
        alive = _CS_GRID[self._cs_log_e < math.log(1.0 / self.alpha)]
        if alive.size == 0:
            return None
        return (float(alive[0]), float(alive[-1]))

    @property
    def recommendation(self) -> str:
        """``"none"``, ``"re-offset"`` or ``"re-fit"`` (see the class docstring)."""
        if not self.alarm:
            return "none"
        _, _, lr, _ = self._fit_window(self._change_index())
        return "re-fit" if lr > _REFIT_LR_CRITICAL else "re-offset"

    # ------------------------------------------------------------------ persistence
    def to_dict(self) -> dict[str, Any]:
        """The full state as plain JSON data."""
        return {
            "format": MONITOR_FORMAT, "version": MONITOR_VERSION, "alpha": self.alpha,
            "active_starts": self.active_starts,
            "eps": EPS, "bin_edges": [float(_BIN_EDGES[0]), float(_BIN_EDGES[-1]), _N_BINS],
            "batches": [{"moments": m.tolist(), "bins": bn.tolist()}
                        for m, bn in zip(self._moments, self._bins)],
            "log_e_offset": [float(v) for v in self._log_e_offset],
            "log_e_shape": [float(v) for v in self._log_e_shape],
            "cs_log_e": self._cs_log_e.tolist(),
            "alarm_batch": self.alarm_batch,
        }

    def to_json(self) -> str:
        """Strict JSON text of :meth:`to_dict` (round-trips bit-exactly)."""
        from mlcal._safe_json import dumps_safe

        return dumps_safe(self.to_dict(), nonfinite="error")

    def save(self, path, *, overwrite: bool = False) -> str:
        """Write the state to ``path`` atomically; returns the absolute path."""
        from mlcal._atomic import write_json

        return write_json(path, self.to_dict(), overwrite=overwrite, indent=None,
                          nonfinite="error")

    @classmethod
    def load(cls, path) -> "CalibrationMonitor":
        """Read a state written by :meth:`save` (validated; loading runs no code)."""
        with open(path, "rb") as fh:
            return cls.from_json(fh.read())

    @classmethod
    def from_json(cls, text: str | bytes) -> "CalibrationMonitor":
        """Rebuild a monitor from :meth:`to_json` output; anything else raises ``ValueError``."""
        from mlcal._safe_json import loads_strict

        return cls.from_dict(loads_strict(text))

    @classmethod
    def from_dict(cls, doc: Any) -> "CalibrationMonitor":
        """Rebuild a monitor from :meth:`to_dict` data, checking every field."""
        return _state_from_dict(cls, doc)


# ---------------------------------------------------------------------- state validation

_FIELDS = {"format", "version", "alpha", "active_starts", "eps", "bin_edges", "batches", "log_e_offset",
           "log_e_shape", "cs_log_e", "alarm_batch"}


def _bad(msg: str) -> ValueError:
    return ValueError(f"invalid calibration monitor state: {msg}")


def _float_list(value: Any, length: int, what: str) -> np.ndarray:
    if not isinstance(value, list) or len(value) != length:
        raise _bad(f"{what} must be a list of {length} numbers")
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
        raise _bad(f"{what} must hold numbers only")
    arr = np.asarray(value, dtype=np.float64)
    if not np.isfinite(arr).all():
        raise _bad(f"{what} holds a non-finite number")
    return arr


def _check_batch(i: int, entry: Any) -> tuple[np.ndarray, np.ndarray]:
    if not isinstance(entry, dict) or set(entry) != {"moments", "bins"}:
        raise _bad(f"batches[{i}] must be an object with exactly 'moments' and 'bins'")
    mom = _float_list(entry["moments"], len(_MOMENTS), f"batches[{i}].moments")
    rows = entry["bins"]
    if not isinstance(rows, list) or len(rows) != 3:
        raise _bad(f"batches[{i}].bins must be 3 lists of {_N_BINS} numbers")
    bins = np.vstack([_float_list(r, _N_BINS, f"batches[{i}].bins[{j}]")
                      for j, r in enumerate(rows)])
    weight, events, forecast = mom[0], mom[1], mom[2]
    if not (weight > 0 and 0 <= events <= weight and 0 <= forecast <= weight):
        raise _bad(f"batches[{i}] has an impossible weight / event / forecast total")
    if (bins[0] < 0).any() or (bins[1] < 0).any() or (bins[1] > bins[0] * (1 + 1e-9)).any():
        raise _bad(f"batches[{i}].bins has negative weights or more events than weight")
    if mom[5] < 0 or mom[7] < 0:
        raise _bad(f"batches[{i}] has a negative variance moment")
    if not math.isclose(float(bins[0].sum()), float(weight), rel_tol=1e-9, abs_tol=1e-12):
        raise _bad(f"batches[{i}]: the bin weights do not add up to the batch weight")
    return mom, bins


def _state_from_dict(cls, doc: Any) -> CalibrationMonitor:
    if not isinstance(doc, dict):
        raise _bad(f"expected a JSON object, got {type(doc).__name__}")
    if doc.get("format") != MONITOR_FORMAT:
        raise _bad(f"format must be {MONITOR_FORMAT!r}")
    if doc.get("version") != MONITOR_VERSION or isinstance(doc.get("version"), bool):
        raise _bad(f"unsupported version {str(doc.get('version'))[:20]!r} "
                   f"(this mlcal reads version {MONITOR_VERSION})")
    unknown, missing = set(doc) - _FIELDS, _FIELDS - set(doc)
    if unknown:
        raise _bad(f"unknown field(s) {sorted(k[:40] for k in unknown)}")
    if missing:
        raise _bad(f"missing field(s) {sorted(missing)}")
    alpha = doc["alpha"]
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0 < alpha <= 0.5:
        raise _bad("alpha must be a number in (0, 0.5]")
    if doc["eps"] != EPS or doc["bin_edges"] != [float(_BIN_EDGES[0]), float(_BIN_EDGES[-1]),
                                                 _N_BINS]:
        raise _bad("eps / bin_edges differ from this mlcal's (the state was made by another "
                   "version)")
    batches = doc["batches"]
    if not isinstance(batches, list):
        raise _bad("batches must be a list")
    t = len(batches)
    checked = [_check_batch(i, e) for i, e in enumerate(batches)]
    log_off = _float_list(doc["log_e_offset"], t, "log_e_offset")
    log_shape = _float_list(doc["log_e_shape"], t, "log_e_shape")
    cs = _float_list(doc["cs_log_e"], _CS_GRID.size, "cs_log_e")
    alarm_batch = doc["alarm_batch"]
    if alarm_batch is not None and (isinstance(alarm_batch, bool) or not isinstance(
            alarm_batch, int) or not 1 <= alarm_batch <= t):
        raise _bad(f"alarm_batch must be null or an integer in [1, {t}]")
    active = doc["active_starts"]
    if active is not None and (isinstance(active, bool) or not isinstance(active, int)
                               or not 1 <= active <= 10**6):
        raise _bad("active_starts must be null or an integer in [1, 1000000]")
    monitor = cls(alpha=float(alpha), active_starts=active)
    monitor._moments = [m for m, _ in checked]
    monitor._bins = [b for _, b in checked]
    monitor._log_e_offset = [float(v) for v in log_off]
    monitor._log_e_shape = [float(v) for v in log_shape]
    monitor._cs_log_e = cs
    monitor.alarm_batch = alarm_batch
    monitor.alarm = alarm_batch is not None
    if not monitor.alarm and t and monitor.log_e_value >= math.log(1.0 / monitor.alpha):
        raise _bad("the e-value is above 1/alpha but no alarm is recorded")
    return monitor
