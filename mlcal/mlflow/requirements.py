"""The pip requirements of a saved ``mlcal`` model, known without MLflow's inference.

MLflow's default (``mlflow.models.infer_pip_requirements``) loads the saved model in a
subprocess and records every module it imports: 10-40 s per save, and it still misses mlcal
itself (the loader module is imported before capturing starts). mlcal knows what its models
need, so it lists it directly, every entry pinned to the installed version:

* mlcal and its runtime dependencies (numpy, scipy, scikit-learn, numba, pandas, matplotlib,
  read from mlcal's own package metadata) and mlflow;
* the nested base model's flavour requirements (``base_model/requirements.txt``: scikit-learn
  and skops, xgboost, lightgbm, catboost, ... as that flavour pins them);
* the distributions providing any other class or function found inside the base estimator
  (a pipeline step from a third-party library, say), found by walking its parameters.
"""

from __future__ import annotations

import functools
import importlib.metadata
import re
import sys
from typing import Any, Iterable

# runtime dependencies of mlcal, used when its package metadata is not available (a source tree)
_MLCAL_CORE = ("numpy", "scipy", "scikit-learn", "numba", "matplotlib", "pandas")
# top-level module -> distribution for the usual suspects (skips a scan of every installed
# distribution's file list, which costs a few hundred milliseconds)
_KNOWN_DISTRIBUTIONS = {"sklearn": "scikit-learn", "numpy": "numpy", "scipy": "scipy",
                        "pandas": "pandas", "xgboost": "xgboost", "lightgbm": "lightgbm",
                        "catboost": "catboost", "numba": "numba", "skops": "skops",
                        "cloudpickle": "cloudpickle", "mlflow": "mlflow"}
# modules that are not separate distributions of the user's environment (mlcal itself is
# required by name or bundled wheel; the others come with Python)
_NOT_REQUIRED = {"mlcal", "builtins", "__main__", "functools", "typing"}


def _name(requirement: str) -> str:
    """The canonical distribution name of a requirement line (``scikit_learn==1`` ->
    ``scikit-learn``); a path or URL line is its own name."""
    match = re.match(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
    if match is None or "/" in requirement.split("==")[0]:
        return requirement.strip()
    return re.sub(r"[-_.]+", "-", match.group(1)).lower()


def pinned(distribution: str) -> str:
    """``distribution==<installed version>`` (mlflow's pinning: local version labels dropped),
    or the bare name when it is not installed."""
    from mlflow.utils.requirements_utils import _get_pinned_requirement

    try:
        return _get_pinned_requirement(distribution)
    except (importlib.metadata.PackageNotFoundError, ImportError, AttributeError):
        return distribution


def mlcal_requirements() -> list[str]:
    """mlcal, its runtime dependencies and mlflow, each pinned to the installed version."""
    try:
        declared = importlib.metadata.distribution("mlcal").requires or []
        core = [_name(r) for r in declared if "extra ==" not in r]
    except importlib.metadata.PackageNotFoundError:   # running from a source tree
        core = list(_MLCAL_CORE)
    from mlcal import __version__

    # mlcal's own version, not the metadata's (an editable install may lag behind)
    return [f"mlcal=={__version__}", pinned("mlflow"), *(pinned(d) for d in core or _MLCAL_CORE)]


def _objects(value: Any, seen: set[int]) -> Iterable[Any]:
    """``value`` and every object reachable through estimator parameters and containers."""
    if id(value) in seen or value is None or isinstance(value, (str, bytes, int, float, bool)):
        return
    seen.add(id(value))
    yield value
    if isinstance(value, dict):
        children = list(value.values())
    elif isinstance(value, (list, tuple, set, frozenset)):
        children = list(value)
    elif hasattr(value, "get_params") and not isinstance(value, type):
        try:
            children = list(value.get_params(deep=False).values())
        except Exception:   # a half-compatible estimator: its own type is still recorded
            children = []
    else:
        children = []
    for child in children:
        yield from _objects(child, seen)


def estimator_modules(estimator: Any) -> set[str]:
    """Top-level modules of the classes and functions inside ``estimator`` (itself, pipeline
    steps, nested estimators, callables passed as parameters), standard library excluded."""
    modules = set()
    for obj in _objects(estimator, set()):
        owner = obj if callable(obj) and not hasattr(obj, "get_params") else type(obj)
        module = getattr(owner, "__module__", None) or ""
        top = module.split(".")[0]
        if top and top not in _NOT_REQUIRED and top not in sys.stdlib_module_names:
            modules.add(top)
    return modules


@functools.lru_cache(maxsize=1)
def _all_distributions() -> dict[str, list[str]]:
    return importlib.metadata.packages_distributions()


def distributions_for(modules: Iterable[str]) -> list[str]:
    """The installed distributions providing these top-level modules, pinned. A module no
    distribution provides (a local file) is left out: it cannot be pip-installed."""
    names = set()
    for module in modules:
        if module in _KNOWN_DISTRIBUTIONS:
            names.add(_KNOWN_DISTRIBUTIONS[module])
        else:
            names.update(_all_distributions().get(module, []))
    return [pinned(d) for d in sorted(names)]


def merge(*groups: Iterable[str]) -> list[str]:
    """One line per distribution, sorted; a pinned line wins over a bare name of the same
    distribution, otherwise the first seen."""
    chosen: dict[str, str] = {}
    for group in groups:
        for line in group:
            key = _name(line)
            if key not in chosen or ("==" in line and "==" not in chosen[key]):
                chosen[key] = line.strip()
    return sorted(chosen.values(), key=_name)


def model_requirements(estimator: Any, base_requirements: Iterable[str]) -> list[str]:
    """Everything an environment needs to load and serve an mlcal model whose base is
    ``estimator`` and whose nested base model lists ``base_requirements``: pinned, with no
    requirement inference.

    Parameters
    ----------
    estimator : object
        The in-memory base estimator (scikit-learn compatible classifier, booster wrapper or
        :class:`~mlcal.mlflow.PyfuncScorer`).
    base_requirements : iterable of str
        The nested base model's ``requirements.txt`` lines.
    """
    from mlcal.mlflow.base_models import PyfuncScorer

    own = [] if isinstance(estimator, PyfuncScorer) else \
        distributions_for(estimator_modules(estimator))
    return merge(mlcal_requirements(), base_requirements, own)
