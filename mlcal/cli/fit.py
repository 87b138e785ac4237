"""``mlcal fit``: fit a calibrator on a CSV file and save it as JSON."""

from __future__ import annotations

import json

from mlcal.calibrators.base import save_calibrator
from mlcal.calibrators.catalog import available_calibrators, get_calibrator
from mlcal.cli._io import add_data_arguments, read_columns


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


def run(args) -> int:
    cols = [args.score_column, args.label_column] + ([args.weight_column] if args.weight_column else [])
    data = read_columns(args.data, cols)
    cal = get_calibrator(args.method, **_parse_params(args.param))
    weights = data[args.weight_column] if args.weight_column else None
    cal.fit(data[args.score_column], data[args.label_column], sample_weight=weights)
    save_calibrator(cal, args.out, overwrite=args.force)
    m = cal.map_
    print(f"fitted {type(cal).__name__} on {len(data[args.label_column])} rows: {m.kind} map "
          f"of size {m.size}, input transform {m.input_transform}")
    print(f"saved {args.out}")
    return 0


def register(sub) -> None:
    p = sub.add_parser("fit", help="fit a calibrator on scores and labels from a CSV file",
                       description="Fit a calibrator and write it as JSON.")
    p.add_argument("--method", required=True,
                   help=f"calibration method: {', '.join(available_calibrators())}")
    add_data_arguments(p)
    p.add_argument("--weight-column", default=None, help="optional column of sample weights")
    p.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                   help="calibrator parameter (JSON value), repeatable, e.g. --param interpolate=false")
    p.add_argument("--out", required=True, help="where to write the calibrator JSON")
    p.add_argument("--force", action="store_true", help="overwrite --out if it exists")
    p.set_defaults(handler=run)
