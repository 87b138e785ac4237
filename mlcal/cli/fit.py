"""``mlcal fit``: fit a calibrator on a CSV file and save it as JSON."""

from __future__ import annotations

import json

from mlcal.calibrators.base import save_calibrator
from mlcal.calibrators.catalog import available_calibrators, get_calibrator
from mlcal.cli._io import add_data_arguments, binary_label_column, read_columns
from mlcal.cli._multiclass import add_multiclass_arguments, read_multiclass, reject_pos_label


def _parse_params(items: list[str]) -> dict:
    params = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep:
            raise ValueError(f"--param expects KEY=VALUE, got {item!r}")
        try:
            params[key] = json.loads(raw)
        except json.JSONDecodeError:
            params[key] = raw  # plain strings need no quotes
    return params


def run_multiclass(args) -> int:
    """Fit a multiclass calibrator on --score-columns."""
    from mlcal._atomic import check_new_path
    from mlcal.calibrators.multiclass import OneVsRest
    from mlcal.calibrators.multiclass_catalog import MULTICLASS_METHODS

    check_new_path(args.out, overwrite=args.force)   # fail before doing any work
    reject_pos_label(args)
    scores, y, data = read_multiclass(args, [args.weight_column] if args.weight_column else [])
    params = _parse_params(args.param)
    key = args.method.lower()
    if key in MULTICLASS_METHODS:
        cal = MULTICLASS_METHODS[key](**params)
    else:   # a binary method, applied one-vs-rest (its parameters go to each class's copy)
        try:
            binary = get_calibrator(key, **params)
        except ValueError as exc:
            raise ValueError(f"{exc}; multiclass methods: {', '.join(MULTICLASS_METHODS)}") \
                from None
        cal = OneVsRest(binary if params else key)   # a plain name stays a name in the JSON
    return _fit_and_save(cal, scores, y, data, args,
                         f"{scores.shape[0]} rows and {scores.shape[1]} classes")


def run(args) -> int:
    if args.score_columns is not None:
        return run_multiclass(args)
    if args.classes is not None:
        raise ValueError("--classes applies to multiclass data; pass --score-columns too")
    cols = [args.score_column, args.label_column] + ([args.weight_column] if args.weight_column else [])
    data = read_columns(args.data, cols)
    y = binary_label_column(data, args)
    cal = get_calibrator(args.method, **_parse_params(args.param))
    return _fit_and_save(cal, data[args.score_column], y, data, args, f"{len(y)} rows",
                         show_transform=True)


def _fit_and_save(cal, scores, y, data, args, what: str, show_transform: bool = False) -> int:
    """Fit (with the weight column if given), save without overwriting unless --force, and
    print a one-line summary of the fitted map."""
    weights = data[args.weight_column] if args.weight_column else None
    cal.fit(scores, y, sample_weight=weights)
    save_calibrator(cal, args.out, overwrite=args.force)
    m = cal.map_
    extra = f", input transform {m.input_transform}" if show_transform else ""
    print(f"fitted {type(cal).__name__} on {what}: {m.kind} map of size {m.size}{extra}")
    selection = getattr(cal, "selection_", None)   # auto: what it chose and why
    if selection is not None:
        print(f"auto chose {selection['chosen']}: {selection['reason']}")
    print(f"saved {args.out}")
    return 0


def register(sub) -> None:
    from mlcal.calibrators.multiclass_catalog import MULTICLASS_METHODS

    p = sub.add_parser("fit", help="fit a calibrator on scores and labels from a CSV file",
                       description="Fit a calibrator and write it as JSON. Multiclass: give "
                                   "one score column per class with --score-columns.")
    p.add_argument("--method", default="auto",
                   help=f"calibration method: {', '.join(available_calibrators())}; with "
                        f"--score-columns also {', '.join(MULTICLASS_METHODS)} (another "
                        "binary method is then fitted one-vs-rest, one map per class). "
                        "Default: auto, chosen by cross-validated log loss (multiclass: "
                        "among temperature, vector, matrix scaling and one-vs-rest auto)")
    add_data_arguments(p)
    add_multiclass_arguments(p)
    p.add_argument("--weight-column", default=None, help="optional column of sample weights")
    p.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                   help="calibrator parameter (JSON value), repeatable, e.g. --param interpolate=false")
    p.add_argument("--out", required=True, help="where to write the calibrator JSON")
    p.add_argument("--force", action="store_true", help="overwrite --out if it exists")
    p.set_defaults(handler=run)
