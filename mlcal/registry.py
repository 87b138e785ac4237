"""Model-registry promotion gated on calibration error (MLflow 3 aliases, not stages).

:func:`promote` moves an alias (default ``champion``) to a model version only when its ECE is at
most ``max_ece`` and it is not worse than the current alias holder by more than ``margin``. The
decision, promoted or refused, is recorded as ``mlcal.gate.*`` tags on the candidate version.
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mlcal.metrics import BIN_STRATEGIES, ece

GATE_TAG_PREFIX = "mlcal.gate."
DEFAULT_METRIC_KEY = "ece_after"


@dataclass
class GateDecision:
    """Outcome of :func:`promote`; ``explain()`` gives the one-screen summary."""

    model_name: str
    version: str
    alias: str
    promoted: bool
    candidate_ece: float
    max_ece: float
    margin: float
    source: str
    champion_version: str | None = None
    champion_ece: float | None = None
    reasons: list[str] = field(default_factory=list)

    def explain(self) -> str:
        """A short human-readable account of the decision."""
        verdict = "PROMOTED" if self.promoted else "REFUSED"
        lines = [f"ECE gate for {self.model_name} version {self.version} -> alias "
                 f"'{self.alias}': {verdict}",
                 f"  ECE source          : {self.source}",
                 f"  candidate ECE       : {self.candidate_ece:.5f} (threshold {self.max_ece:.5f})"]
        if self.champion_version is None:
            lines.append(f"  current '{self.alias}'   : none")
        else:
            champ = "n/a" if self.champion_ece is None else f"{self.champion_ece:.5f}"
            lines.append(f"  current '{self.alias}'   : version {self.champion_version}, ECE {champ} "
                         f"(margin {self.margin:.5f})")
        lines += [f"  - {r}" for r in self.reasons]
        if self.promoted:
            lines.append(f"  alias '{self.alias}' now points to version {self.version}")
        else:
            lines.append(f"  alias '{self.alias}' left unchanged")
        return "\n".join(lines)

    def tags(self) -> dict[str, str]:
        """The ``mlcal.gate.*`` model-version tags that record this decision."""
        t = {"result": "promoted" if self.promoted else "refused",
             "ece": repr(self.candidate_ece), "max_ece": repr(self.max_ece),
             "margin": repr(self.margin), "alias": self.alias, "source": self.source,
             "compared_to": self.champion_version or "none",
             "champion_ece": "n/a" if self.champion_ece is None else repr(self.champion_ece),
             "reason": "; ".join(self.reasons),
             "decided_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")}
        return {GATE_TAG_PREFIX + k: v for k, v in t.items()}


def positive_probability(model_uri: str, X) -> np.ndarray:
    """P(positive class) from a registered model: mlcal models through the flavour, scikit-learn
    classifiers through ``predict_proba``, other pyfunc models from a single numeric output."""
    import mlflow
    from mlflow.models import get_model_info

    flavors = get_model_info(model_uri).flavors
    if "mlcal" in flavors:
        from mlcal.mlflow import load_model

        return load_model(model_uri).predict_proba(X)[:, 1]
    if "sklearn" in flavors:
        est = mlflow.sklearn.load_model(model_uri)
        if hasattr(est, "predict_proba"):
            return np.asarray(est.predict_proba(X))[:, 1]
    out = mlflow.pyfunc.load_model(model_uri).predict(X)
    arr = np.asarray(out, dtype=np.float64)
    if arr.ndim == 2 and arr.shape[1] == 1:
        arr = arr[:, 0]
    if arr.ndim != 1:
        raise ValueError(f"cannot read a probability from {model_uri}: its output has shape "
                         f"{arr.shape}; register an mlcal or scikit-learn classifier")
    return arr


def _load_data(data, label_column: str):
    import pandas as pd

    frame = pd.read_csv(data) if isinstance(data, (str, bytes)) or hasattr(data, "__fspath__") \
        else data
    if not isinstance(frame, pd.DataFrame):
        raise ValueError("data must be a pandas DataFrame or the path of a CSV file")
    if label_column not in frame.columns:
        raise ValueError(f"data has no label column {label_column!r}; columns are "
                         f"{list(frame.columns)}")
    return frame.drop(columns=[label_column]), frame[label_column].to_numpy()


def _labels01(model_uri: str, y) -> np.ndarray:
    """Labels as 0/1; class names are mapped with the model's positive class when needed."""
    y = np.asarray(y)
    if np.isin(y, (0, 1)).all():
        return y.astype(np.float64)
    from mlcal.mlflow import load_model

    positive = load_model(model_uri).classes_[1]
    return (y == positive).astype(np.float64)


def _logged_ece(client, run_id: str | None, key: str, who: str) -> float:
    if not run_id:
        raise ValueError(f"{who} has no source run, so it has no logged {key!r}; pass data to "
                         "recompute ECE")
    metrics = client.get_run(run_id).data.metrics
    if key not in metrics:
        raise ValueError(f"{who}'s run {run_id} has no metric {key!r}; pass data to recompute "
                         "ECE, or metric_key= to use another logged metric")
    return float(metrics[key])


def _resolve_version(client, model_name: str, version) -> Any:
    if version is not None:
        return client.get_model_version(model_name, str(version))
    versions = client.search_model_versions(f"name='{model_name}'")
    if not versions:
        raise ValueError(f"registered model {model_name!r} has no versions")
    latest = max(versions, key=lambda v: int(v.version))
    return client.get_model_version(model_name, latest.version)


def _current_holder(client, model_name: str, alias: str):
    from mlflow.exceptions import MlflowException

    try:
        return client.get_model_version_by_alias(model_name, alias)
    except MlflowException:
        return None  # the alias is not set yet


def promote(model_name: str, version: int | str | None = None, *, max_ece: float,
            alias: str = "champion", data=None, label_column: str = "y", margin: float = 0.0,
            metric_key: str = DEFAULT_METRIC_KEY, n_bins: int = 10, strategy: str = "uniform",
            client=None) -> GateDecision:
    """Promote a model version to ``alias`` if it passes the ECE gate.

    Parameters
    ----------
    model_name : str
        Registered model name.
    version : int or str, optional
        Candidate version; default the newest.
    max_ece : float
        The candidate's ECE must be <= this.
    alias : str, default="champion"
        The alias to move. Its current holder is the comparison baseline.
    data : DataFrame or path to CSV, optional
        Hold-out data (features plus ``label_column``). When given, ECE is recomputed on it for
        both the candidate and the current alias holder, a fair comparison on the same rows;
        otherwise the ECE logged on each version's run (``metric_key``) is used.
    label_column : str, default="y"
    margin : float, default=0.0
        The candidate may be worse than the current holder by at most this much ECE.
    metric_key : str, default="ece_after"
        Run metric read when ``data`` is None (what :func:`mlcal.mlflow.log_calibration` logs).
    n_bins, strategy
        ECE binning when ``data`` is given (see :func:`mlcal.metrics.ece`).
    client : mlflow.MlflowClient, optional
        Defaults to a client on the current tracking/registry URI.

    Returns
    -------
    GateDecision
        Also recorded as ``mlcal.gate.*`` tags on the candidate version.

    Raises
    ------
    ValueError
        Bad arguments, unknown version, missing metric or unusable data (nothing is changed).
    """
    from mlflow import MlflowClient

    if not np.isfinite(max_ece) or max_ece < 0:
        raise ValueError(f"max_ece must be a finite number >= 0, got {max_ece!r}")
    if not np.isfinite(margin) or margin < 0:
        raise ValueError(f"margin must be a finite number >= 0, got {margin!r}")
    if strategy not in BIN_STRATEGIES:
        raise ValueError(f"strategy must be one of {BIN_STRATEGIES}, got {strategy!r}")
    client = client or MlflowClient()
    cand = _resolve_version(client, model_name, version)
    holder = _current_holder(client, model_name, alias)
    rival = holder if holder is not None and holder.version != cand.version else None

    if data is not None:
        X, y = _load_data(data, label_column)
        source = f"recomputed on {len(y)} rows ({n_bins} {strategy} bins)"

        def ece_of(mv) -> float:
            uri = f"models:/{model_name}/{mv.version}"
            return ece(_labels01(uri, y), positive_probability(uri, X), n_bins, strategy)
    else:
        source = f"logged run metric '{metric_key}'"

        def ece_of(mv) -> float:
            return _logged_ece(client, mv.run_id, metric_key, f"version {mv.version}")

    cand_ece = ece_of(cand)
    rival_ece = ece_of(rival) if rival is not None else None
    reasons = []
    ok_threshold = cand_ece <= max_ece
    reasons.append(f"ECE {cand_ece:.5f} {'<=' if ok_threshold else '>'} threshold {max_ece:.5f}")
    ok_rival = True
    if rival is not None:
        ok_rival = cand_ece <= rival_ece + margin
        relation = "not worse" if ok_rival else "worse"
        reasons.append(f"{relation} than version {rival.version} (ECE {rival_ece:.5f}) by more "
                       f"than margin {margin:.5f}")
        if data is None:
            reasons.append("logged ECEs may come from different evaluation data; pass data "
                           "for a like-for-like comparison")
    elif holder is not None:
        reasons.append(f"version {cand.version} already holds '{alias}'")
    decision = GateDecision(model_name, str(cand.version), alias, ok_threshold and ok_rival,
                            cand_ece, float(max_ece), float(margin), source,
                            None if holder is None else str(holder.version), rival_ece, reasons)
    if decision.promoted:
        client.set_registered_model_alias(model_name, alias, str(cand.version))
    for key, value in decision.tags().items():
        client.set_model_version_tag(model_name, str(cand.version), key, value)
    return decision
