"""Reading calibration data for CLI commands."""

from __future__ import annotations

import numpy as np


def read_columns(path: str, columns: list[str]) -> dict[str, np.ndarray]:
    """Read the named columns of a CSV file; ``ValueError`` names any missing column."""
    import pandas as pd

    try:
        frame = pd.read_csv(path)
    except FileNotFoundError:
        raise FileNotFoundError(f"data file not found: {path}") from None
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise ValueError(f"{path} has no column(s) {missing}; columns are {list(frame.columns)}")
    return {c: frame[c].to_numpy() for c in columns}


def add_data_arguments(parser, *, score: bool = True) -> None:
    """The --data/--score-column/--label-column options shared by several commands."""
    parser.add_argument("--data", required=True, help="CSV file with a header row")
    if score:
        parser.add_argument("--score-column", default="score",
                            help="column with the uncalibrated scores (default: score)")
    parser.add_argument("--label-column", default="y",
                        help="column with the 0/1 labels (default: y)")
