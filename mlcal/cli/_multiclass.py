"""Multiclass options shared by ``mlcal fit`` and ``mlcal evaluate``: one score column per
class (``--score-columns``) and labels as class indices or names (``--classes``)."""

from __future__ import annotations

import numpy as np

from mlcal.calibrators.multiclass import TooFewClassesError
from mlcal.cli._io import read_columns
from mlcal.labels import class_indices

LABELS_HELP = ("multiclass labels: without --classes the label column holds class indices "
               "0..K-1 (index k = the k-th of --score-columns); with --classes it holds the "
               "class names, given in the order of --score-columns")


def add_multiclass_arguments(parser) -> None:
    """The --score-columns/--classes options."""
    parser.add_argument("--score-columns", default=None, metavar="C1,C2,...",
                        help="multiclass: one score column per class, comma-separated, in class "
                             "order: probabilities (rows summing to 1) or logits; replaces "
                             "--score-column. " + LABELS_HELP)
    parser.add_argument("--classes", default=None, metavar="NAME1,NAME2,...",
                        help="multiclass: the class names in the order of --score-columns, when "
                             "the label column holds names instead of indices")


def split_names(text: str, option: str) -> list[str]:
    """A comma-separated option as a list of distinct, non-empty names."""
    names = [t.strip() for t in str(text).split(",")]
    if any(not n for n in names):
        raise ValueError(f"{option} has an empty name in {text!r}; separate names with commas")
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ValueError(f"{option} names {dup} more than once")
    return names


def reject_pos_label(args) -> None:
    """``--pos-label`` names the positive class of binary labels; multiclass labels have none."""
    if getattr(args, "pos_label", None) is not None:
        raise ValueError("--pos-label is for binary labels; with --score-columns the labels "
                         "are class indices, or names given with --classes")


def read_multiclass(args, extra: list[str] | None = None):
    """``(scores (n, K), class indices (n,), columns)`` from ``args.data``.

    Raises ``TooFewClassesError`` for fewer than two score columns and ``ValueError`` naming a
    missing or non-numeric column or labels that are not the expected indices/names.
    """
    cols = split_names(args.score_columns, "--score-columns")
    if len(cols) < 2:
        raise TooFewClassesError(f"--score-columns needs at least 2 columns (one per class), "
                                 f"got {len(cols)}: {cols}")
    data = read_columns(args.data, cols + [args.label_column] + list(extra or []))
    parts = []
    for c in cols:
        try:
            parts.append(np.asarray(data[c], dtype=np.float64))
        except (TypeError, ValueError):
            raise ValueError(f"score column {c!r} is not numeric") from None
    scores = np.column_stack(parts)
    labels = data[args.label_column]
    if args.classes is not None:
        names = split_names(args.classes, "--classes")
        if len(names) != len(cols):
            raise ValueError(f"--classes names {len(names)} classes but --score-columns has "
                             f"{len(cols)} columns; give one name per score column")
        y = class_indices(np.asarray(labels).astype(str), names,
                          name=f"label column {args.label_column!r}")
    else:
        y = np.asarray(labels)
        integral = y.dtype.kind in "iub" or (y.dtype.kind == "f" and np.all(y == np.round(y)))
        if not integral:
            example = next(iter(y.tolist()), None)
            raise ValueError(f"label column {args.label_column!r} does not hold class indices "
                             f"0..{len(cols) - 1} (e.g. {example!r}); pass --classes "
                             "NAME1,NAME2,... in the order of --score-columns for named classes")
    return scores, y, data
