"""``mlcal demo``: every available calibrator on bundled data, one metric table."""

from __future__ import annotations

from mlcal.experiment import compare_calibrators, format_comparison
from mlcal.metrics import BIN_STRATEGIES


def _prepare(dataset: str, seed: int):
    """Train a visibly miscalibrated base model; return it with calibration and test splits."""
    from sklearn.model_selection import train_test_split

    if dataset == "breast_cancer":
        from sklearn.naive_bayes import GaussianNB

        from mlcal.datasets import load_breast_cancer_binary

        X, y, _ = load_breast_cancer_binary()
        base = GaussianNB()  # naive Bayes is notoriously over-confident
    else:
        from sklearn.pipeline import make_pipeline
        from sklearn.preprocessing import StandardScaler
        from sklearn.svm import LinearSVC

        from mlcal.datasets import make_circular

        X, y = make_circular(6000, seed)
        base = make_pipeline(StandardScaler(), LinearSVC())  # a margin, not a probability
    X_tr, X_rest, y_tr, y_rest = train_test_split(X, y, test_size=0.6, stratify=y, random_state=seed)
    X_cal, X_te, y_cal, y_te = train_test_split(X_rest, y_rest, test_size=0.5, stratify=y_rest,
                                                random_state=seed)
    return base.fit(X_tr, y_tr), X_cal, y_cal, X_te, y_te


def run(args) -> int:
    base, X_cal, y_cal, X_te, y_te = _prepare(args.dataset, args.seed)
    print(f"dataset {args.dataset}: base model {type(base).__name__}, "
          f"{len(y_cal)} calibration rows, {len(y_te)} test rows")
    rows = compare_calibrators(base, X_cal, y_cal, X_te, y_te, args.methods,
                               n_bins=args.n_bins, strategy=args.strategy)
    print(format_comparison(rows))
    print(f"(test-set metrics; ECE/MCE with {args.n_bins} {args.strategy} bins)")
    return 0


def register(sub) -> None:
    p = sub.add_parser("demo", help="fit every calibrator on bundled data and print a table",
                       description="Train a base classifier on bundled data, calibrate it with "
                                   "every available method and compare test-set metrics.")
    p.add_argument("--dataset", choices=("breast_cancer", "circular"), default="breast_cancer",
                   help="breast_cancer (scikit-learn's bundled set, Gaussian naive Bayes) or "
                        "circular (the papers' simulated data, linear SVM margin)")
    p.add_argument("--methods", nargs="+", default=None, help="methods to compare (default: all)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--n-bins", type=int, default=10)
    p.add_argument("--strategy", choices=BIN_STRATEGIES, default="uniform")
    p.set_defaults(handler=run)
