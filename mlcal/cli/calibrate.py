"""``mlcal calibrate``: calibrate an MLflow model on a CSV file and log the result to MLflow."""

from __future__ import annotations

import numpy as np

from mlcal.base_models.scores import SCORE_SOURCES
from mlcal.calibrators.catalog import available_calibrators, get_calibrator
from mlcal.base_models.scores import classes_of
from mlcal.cli._io import parse_columns, parse_pos_label, read_frame
from mlcal.holdout import DEFAULT_HOLDOUT
from mlcal.labels import describe_labels, same_label
from mlcal.cli.fit import _parse_params
from mlcal.mlflow.base_models import BASE_FORMATS


def _feature_columns(frame, label: str, info, base, exclude=()) -> list[str]:
    """The base model's input columns: its signature, else ``feature_names_in_``, else all
    columns but the label and ``exclude`` (the segment columns)."""
    names = None
    if info.signature is not None and info.signature.inputs.has_input_names():
        names = info.signature.inputs.input_names()
    elif hasattr(base, "feature_names_in_"):
        names = [str(c) for c in base.feature_names_in_]
    if names is None:
        return [c for c in frame.columns if c != label and c not in exclude]
    missing = [c for c in names if c not in frame.columns]
    if missing:
        raise ValueError(f"the data has no column(s) {missing} that the base model needs")
    return list(names)


def load_base_model(uri: str, *, output_column=None, kind: str = "probability", classes=(0, 1)):
    """Returns (base estimator, ModelInfo); see :func:`mlcal.mlflow.load_base_estimator`."""
    from mlcal.mlflow.base_models import load_base_estimator

    return load_base_estimator(uri, output_column=output_column, kind=kind, classes=classes)


def _order_classes(labels: np.ndarray, args, y) -> np.ndarray:
    """The two labels as (negative, positive): ``--pos-label`` second, else sorted order."""
    if args.pos_label is None:
        return labels
    pos = parse_pos_label(args.pos_label, y)
    match = [i for i, v in enumerate(labels) if same_label(v, pos)]
    if not match:
        raise ValueError(f"--pos-label {args.pos_label!r} is not one of the labels found in "
                         f"label column {args.label_column!r} of {args.data}: "
                         f"{describe_labels(y)}")
    return labels[[1 - match[0], match[0]]]


def run(args) -> int:
    from mlcal.mlflow import calibrate_and_log  # first: names the missing extra
    import mlflow
    from mlflow.exceptions import MlflowException

    from mlcal.metrics import format_report

    if args.tracking_uri:
        mlflow.set_tracking_uri(args.tracking_uri)
    try:
        if args.experiment:
            mlflow.set_experiment(args.experiment)
        frame = read_frame(args.data)
        if args.label_column not in frame.columns:
            raise ValueError(f"{args.data} has no label column {args.label_column!r}; columns "
                             f"are {list(frame.columns)}")
        y = frame[args.label_column].to_numpy()
        labels = np.unique(y)
        if labels.size != 2:
            raise ValueError(f"label column {args.label_column!r} of {args.data} must hold "
                             f"two classes; found {describe_labels(y)} in {len(y)} rows")
        labels = _order_classes(labels, args, y)
        base, info = load_base_model(args.model_uri, output_column=args.output_column,
                                     kind=args.output_kind, classes=labels)
        if args.pos_label is not None:
            model_classes = np.asarray(classes_of(base)).tolist()
            if not same_label(model_classes[1], labels[1]):
                raise ValueError(f"--pos-label {args.pos_label!r}: the base model's positive "
                                 f"class is {model_classes[1]!r} (its classes "
                                 f"{model_classes}); mlcal calibrates the probability of the "
                                 "model's second class")
        seg_cols = parse_columns(args.segment_columns)
        if args.segmented and not seg_cols:
            raise ValueError("--segmented needs --segment-columns: the columns that name each "
                             "row's segment")
        feat_cols = parse_columns(args.feature_columns)
        if feat_cols and args.segmented:
            raise ValueError("give --segmented or --feature-columns, not both: a segmented "
                             "calibrator reads segment keys, multicalibration reads features")
        cols = _feature_columns(frame, args.label_column, info, base,
                                exclude=[*(seg_cols or ()), *(feat_cols or ())])
        # the model reads these columns from its input besides the base model's own
        read_by_map = seg_cols if args.segmented else feat_cols
        if read_by_map:
            missing = [c for c in read_by_map if c not in frame.columns]
            if missing:
                raise ValueError(f"{args.data} has no column(s) {missing} named by "
                                 f"{'--segment-columns' if args.segmented else '--feature-columns'}")
            cols = [*cols, *(c for c in read_by_map if c not in cols)]
        evaluation = {}
        if args.eval_data:
            ev = read_frame(args.eval_data)
            missing = [c for c in [*cols, args.label_column] if c not in ev.columns]
            if missing:
                raise ValueError(f"{args.eval_data} has no column(s) {missing}")
            evaluation = {"X_eval": ev[cols], "y_eval": ev[args.label_column].to_numpy()}
        if args.segmented:
            evaluation["model_segment_columns"] = seg_cols
        if feat_cols:
            evaluation["model_feature_columns"] = feat_cols
        if seg_cols:
            from mlcal.metrics.segments import segment_keys

            source, name = (ev, args.eval_data) if args.eval_data else (frame, args.data)
            evaluation["segments"] = segment_keys(source, seg_cols, what=name)
            evaluation["min_segment_rows"] = args.min_segment_rows
        if feat_cols:
            if args.method not in ("auto", "multicalibration"):
                raise ValueError(f"--feature-columns fits a multicalibration model; --method "
                                 f"{args.method!r} maps the score alone (leave --method out "
                                 "or give --method multicalibration)")
            from mlcal.multicalibration import Multicalibration

            cal = Multicalibration(**_parse_params(args.param))
        else:
            cal = get_calibrator(args.method, **_parse_params(args.param))
        if args.segmented:
            from mlcal.calibrators.segmented import SegmentedCalibrator

            slope = {} if args.min_rows_for_slope is None else \
                {"min_rows_for_slope": args.min_rows_for_slope}
            cal = SegmentedCalibrator(cal, unseen=args.unseen_segments, **slope)
        holdout = 0.0 if args.eval_data else args.holdout
        result = calibrate_and_log(base, frame[cols], y, calibrator=cal, score=args.score,
                                   holdout=holdout, holdout_seed=args.holdout_seed,
                                   threshold=args.threshold, name=args.name,
                                   registered_model_name=args.register, run_name=args.run_name,
                                   input_example=frame[cols].iloc[:5],
                                   base_format=args.base_format,
                                   html_report=args.html_report, **evaluation)
    except MlflowException as exc:
        raise ValueError(exc.message) from None
    cal_ = result.model.calibrator_
    rows = result.report["n_rows"]
    print(f"calibrated {args.model_uri} with {type(cal_).__name__} ({cal_.map_.kind} map of "
          f"size {cal_.map_.size}) on {rows['fit']} rows; metrics on the "
          f"{result.report['evaluated_on']} ({rows['metrics']} rows, "
          f"{result.report['metrics_source']}):")
    if holdout > 0:
        print(f"(no --eval-data: {rows['metrics']} of the {rows['given']} rows of {args.data} "
              f"were held out, stratified by label, seed {args.holdout_seed}; the logged model "
              f"is the calibrator fitted on the other {rows['fit']}, so the metrics are its own)")
    elif not args.eval_data:
        print("(--holdout 0: metrics computed on the calibration rows themselves, optimistic; "
              "the run is tagged mlcal.metrics_source=in-sample, which the promotion gate refuses by "
              "default)")
    print(format_report(result.report))
    seg = result.report.get("segments")
    if seg:
        w = seg["worst"]
        print(f"segments by {', '.join(seg['columns'])}: {seg['settings']['n_segments']} "
              f"({seg['settings']['n_eligible']} with >= {args.min_segment_rows} rows); worst "
              f"{w['label']}: observed - predicted {w['citl']:+.4f} [{w['citl_lower']:+.4f}, "
              f"{w['citl_upper']:+.4f}], ECE {w['ece']:.4f} (table: calibration/"
              "segment_report.csv)")
    print(f"run id: {result.run_id}")
    print(f"model URI: {result.model_uri}")
    version = getattr(result.model_info, "registered_model_version", None)
    if args.register:
        print(f"registered model: models:/{args.register}/{version}")
    return 0


def register(sub) -> None:
    p = sub.add_parser(
        "calibrate", help="calibrate an MLflow model and log the calibrated model to MLflow",
        description="Load a base model from MLflow, fit a calibrator on a CSV file of features "
                    "and labels, and log the calibrated model (mlcal flavour) with its "
                    "calibration metrics and plots in one run. Prints the run id and model URI.")
    p.add_argument("--model-uri", required=True,
                   help="base model URI (runs:/..., models:/..., or a local model directory)")
    p.add_argument("--data", required=True,
                   help="calibration CSV: the base model's feature columns plus the label")
    p.add_argument("--label-column", default="y", help="label column (default: y)")
    p.add_argument("--method", default="auto",
                   help=f"calibration method: {', '.join(available_calibrators())} "
                        "(default: auto, chosen by cross-validated log loss)")
    p.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                   help="calibrator parameter (JSON value), repeatable")
    p.add_argument("--eval-data", default=None,
                   help="separate evaluation CSV for the logged metrics (then every row of "
                        "--data calibrates)")
    p.add_argument("--holdout", type=float, default=DEFAULT_HOLDOUT, metavar="SHARE",
                   help="without --eval-data: the share of --data rows held out (stratified "
                        "by label, seeded) for the logged metrics; the model is fitted on the "
                        "rest (default 0.25). 0 logs metrics on the calibration rows, tagged "
                        "in-sample, which the promotion gate refuses")
    p.add_argument("--segment-columns", default=None, metavar="A,B",
                   help="also log per-segment calibration metrics of the evaluation rows, "
                        "segments keyed by these columns of the evaluation data (they need not "
                        "be model features): calibration/segment_report.json and .csv and the "
                        "segment_worst_* run metrics")
    p.add_argument("--segmented", action="store_true",
                   help="fit a segmented calibrator (mlcal.SegmentedCalibrator): the --method "
                        "map shared by all rows plus a per-segment logit offset, shrunk by "
                        "empirical Bayes, with segments keyed by --segment-columns (read from "
                        "the model's input when it predicts, so they join its signature)")
    p.add_argument("--feature-columns", default=None, metavar="A,B",
                   help="fit a multicalibration model (mlcal.Multicalibration: boosted logit "
                        "corrections over the score and these columns, for when segments are "
                        "not known in advance); the columns join the model's signature, and "
                        "--param sets Multicalibration's parameters")
    p.add_argument("--unseen-segments", choices=("shared", "raise"), default="shared",
                   help="with --segmented: a segment not seen in fitting gets the shared map "
                        "(default) or is an error")
    p.add_argument("--min-rows-for-slope", type=int, default=None, metavar="N",
                   help="with --segmented: segments of at least N rows also get a shrunk "
                        "per-segment slope, kept only when Cochran's test finds the slopes "
                        "unequal at 0.05 (default: SegmentedCalibrator's, 2)")
    p.add_argument("--min-segment-rows", type=int, default=100,
                   help="with --segment-columns: smaller segments are reported but never the "
                        "worst (default 100)")
    p.add_argument("--holdout-seed", type=int, default=0, help="seed of the hold-out draw")
    p.add_argument("--pos-label", default=None, metavar="LABEL",
                   help="the positive class (default: the base model's second class, or for "
                        "a pyfunc-scored model the second of the two sorted labels)")
    p.add_argument("--register", default=None, metavar="NAME",
                   help="also register the calibrated model under this name")
    p.add_argument("--tracking-uri", default=None, help="MLflow tracking URI")
    p.add_argument("--experiment", default=None, help="MLflow experiment name")
    p.add_argument("--run-name", default=None, help="name of the new run")
    p.add_argument("--name", default="model", help="model name within the run (default: model)")
    p.add_argument("--threshold", type=float, default=0.5,
                   help="label threshold on the calibrated probability (default 0.5)")
    p.add_argument("--score", choices=SCORE_SOURCES, default="auto",
                   help="which base-model output to calibrate: auto (the positive-class "
                        "probability), predict_proba, decision_function, or margin (raw "
                        "log-odds of XGBoost/LightGBM/CatBoost, decision_function otherwise)")
    p.add_argument("--base-format", choices=BASE_FORMATS, default="auto",
                   help="how the base model is stored inside the calibrated model: auto "
                        "(XGBoost/LightGBM/CatBoost in their own MLflow flavour, scikit-learn "
                        "models as skops trusting their own types), native, skops, "
                        "cloudpickle or pickle (default auto)")
    p.add_argument("--no-html-report", dest="html_report", action="store_false",
                   help="log the metrics, the JSON report, the reliability diagram and map "
                        "plots and the model, but not the CORP diagram and the HTML "
                        "calibration report (they take a few seconds to draw)")
    p.add_argument("--output-column", default=None,
                   help="for non-scikit-learn base models: the pyfunc output column holding "
                        "the score")
    p.add_argument("--output-kind", choices=("probability", "score"), default="probability",
                   help="whether --output-column holds probabilities or raw scores")
    p.set_defaults(handler=run)
