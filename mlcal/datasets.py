"""Data sets that need no download: the papers' simulated circular data and scikit-learn's
bundled breast-cancer set."""

from __future__ import annotations

import numpy as np


def make_circular(n: int = 1000, seed: int | None = 0) -> tuple[np.ndarray, np.ndarray]:
    """The "circular configuration" of the ENIR/ELiTE/BBQ papers (Naeini et al.).

    Half the points are class 0 with radius uniform on [0, 2], half class 1 with radius uniform
    on [2, 4]; angles are uniform on [0, 2 pi). The classes are separated by the circle r = 2, so
    a linear model cannot separate them and a quadratic one nearly can.

    Returns
    -------
    X : ndarray of shape (n, 2)
    y : ndarray of shape (n,), 0/1 integers (class 0 first, then class 1)
    """
    if n < 2:
        raise ValueError("n must be at least 2")
    rng = np.random.default_rng(seed)
    n0 = n // 2
    n1 = n - n0
    r = np.concatenate((rng.uniform(0.0, 2.0, n0), rng.uniform(2.0, 4.0, n1)))
    theta = rng.uniform(0.0, 2.0 * np.pi, n)
    X = np.column_stack((r * np.cos(theta), r * np.sin(theta)))
    y = np.concatenate((np.zeros(n0, dtype=np.int64), np.ones(n1, dtype=np.int64)))
    return X, y


def load_breast_cancer_binary() -> tuple[np.ndarray, np.ndarray, list[str]]:
    """scikit-learn's bundled Wisconsin breast-cancer set (569 rows, 30 features).

    Returns ``(X, y, feature_names)`` with y = 1 for malignant, so the positive class is the one
    a screening model is asked to find.
    """
    from sklearn.datasets import load_breast_cancer

    data = load_breast_cancer()
    y = (data.target == 0).astype(np.int64)  # sklearn codes malignant as 0
    return data.data, y, [str(f) for f in data.feature_names]
