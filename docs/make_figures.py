"""Draw the README's picture, docs/img/reliability.png, with mlcal's own plotting.

Gaussian naive Bayes on scikit-learn's breast-cancer data is over-confident; the reliability
diagram shows its held-out probabilities before and after ``CalibratedModel`` (method ``auto``).
Run from the repository root: ``python docs/make_figures.py``.
"""

from pathlib import Path

import matplotlib

matplotlib.use("Agg")

from sklearn.datasets import load_breast_cancer  # noqa: E402
from sklearn.model_selection import train_test_split  # noqa: E402
from sklearn.naive_bayes import GaussianNB  # noqa: E402

import mlcal  # noqa: E402
from mlcal.plotting import reliability_diagram  # noqa: E402

OUT = Path(__file__).resolve().parent / "img" / "reliability.png"


def main() -> None:
    X, y = load_breast_cancer(return_X_y=True)
    X_fit, X_rest, y_fit, y_rest = train_test_split(X, y, test_size=0.6, random_state=0,
                                                    stratify=y)
    X_cal, X_test, y_cal, y_test = train_test_split(X_rest, y_rest, test_size=0.5,
                                                    random_state=0, stratify=y_rest)
    base = GaussianNB().fit(X_fit, y_fit)
    model = mlcal.CalibratedModel(base).fit(X_cal, y_cal)
    OUT.parent.mkdir(exist_ok=True)
    reliability_diagram(y_test, base.predict_proba(X_test)[:, 1],
                        model.predict_proba(X_test)[:, 1], n_bins=10,
                        labels=("Gaussian naive Bayes",
                                f"calibrated (auto chose {model.calibrator_.chosen_})"),
                        title="Held-out reliability, breast-cancer data", path=str(OUT))
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
