"""Reading calibration data for CLI commands."""

from __future__ import annotations

import numpy as np


def read_frame(path: str):
    """The CSV file at ``path`` as a DataFrame; errors name the file (missing, empty, no
    data rows)."""
    import pandas as pd

    try:
        frame = pd.read_csv(path)
    except FileNotFoundError:
        raise FileNotFoundError(f"data file not found: {path}") from None
    except pd.errors.EmptyDataError:
        raise ValueError(f"{path} is empty: expected a CSV file with a header row and data "
                         "rows") from None
    if frame.shape[0] == 0:
        raise ValueError(f"{path} has a header ({list(frame.columns)[:10]}) but no data rows")
    return frame


def read_columns(path: str, columns: list[str]) -> dict[str, np.ndarray]:
    """Read the named columns of a CSV file; ``ValueError`` names any missing column."""
    frame = read_frame(path)
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise ValueError(f"{path} has no column(s) {missing}; columns are {list(frame.columns)}")
    return {c: frame[c].to_numpy() for c in columns}


def parse_pos_label(text: str | None, column: np.ndarray):
    """``--pos-label`` as a value of the label column's type: a number for a numeric column
    ("1" matches 1 and 1.0), True/False for a boolean one, else the text itself."""
    if text is None:
        return None
    kind = np.asarray(column).dtype.kind
    if kind == "b":
        lowered = text.strip().lower()
        if lowered not in ("true", "false"):
            raise ValueError(f"--pos-label {text!r}: the label column holds booleans; give "
                             "true or false")
        return lowered == "true"
    if kind in "iuf":
        try:
            return float(text)
        except ValueError:
            raise ValueError(f"--pos-label {text!r}: the label column is numeric") from None
    return text


def binary_label_column(data: dict, args) -> np.ndarray:
    """The label column as 0/1 (:func:`mlcal.labels.to_binary`): 0/1 or booleans as they
    are, any other two labels with ``--pos-label``; errors name the labels, column and file."""
    from mlcal.labels import to_binary

    column = data[args.label_column]
    return to_binary(column, parse_pos_label(getattr(args, "pos_label", None), column),
                     name=f"label column {args.label_column!r} of {args.data}")


def add_data_arguments(parser, *, score: bool = True) -> None:
    """The --data/--score-column/--label-column/--pos-label options shared by several
    commands."""
    parser.add_argument("--data", required=True, help="CSV file with a header row")
    if score:
        parser.add_argument("--score-column", default="score",
                            help="column with the uncalibrated scores (default: score)")
    parser.add_argument("--label-column", default="y",
                        help="column with the binary labels: 0/1, true/false, or any two "
                             "labels with --pos-label (default: y)")
    parser.add_argument("--pos-label", default=None, metavar="LABEL",
                        help="binary labels: the positive class (e.g. yes); needed unless "
                             "the labels are 0/1 or booleans")


def parse_columns(text: str | None, option: str = "--segment-columns") -> list[str] | None:
    """``"a,b"`` -> ``["a", "b"]`` (None when not given); empty names are an error."""
    if text is None:
        return None
    cols = [c.strip() for c in text.split(",")]
    if not all(cols):
        raise ValueError(f"{option} must be comma-separated column names, got {text!r}")
    return cols
