"""Each extra installs what its integration imports (``pip install 'mlcal[onnx]'`` must be
able to export the XGBoost/LightGBM models mlcal.onnx claims to)."""

import ast
import importlib.metadata
import importlib.util
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _extra_distributions(extra: str) -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return {re.split(r"[<>=!~\[; ]", req, maxsplit=1)[0].lower().replace("_", "-")
            for req in project["optional-dependencies"][extra]}


def _third_party_modules(package: Path) -> set[str]:
    """Top-level modules a package imports: import statements, and dotted paths in string
    constants (the converters mlcal.onnx imports by name, e.g. onnxmltools')."""
    stdlib = set(__import__("sys").stdlib_module_names)
    found = set()
    for path in package.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found.update(a.name.split(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.add(node.module.split(".")[0])
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and \
                    re.fullmatch(r"[a-z_][a-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*){2,}", node.value):
                found.add(node.value.split(".")[0])
    return {m for m in found if m not in stdlib and m != "mlcal"}


def test_the_onnx_extra_installs_every_package_mlcal_onnx_imports():
    core = {"numpy", "scipy", "sklearn", "pandas"}
    # the models being exported come with the user's own training stack, not with the extra
    model_libraries = {"xgboost", "lightgbm", "catboost"}
    # (a dotted string that is no installed module, e.g. the domain "ai.onnx.ml", is no import)
    modules = {m for m in _third_party_modules(ROOT / "mlcal" / "onnx")
               if importlib.util.find_spec(m) is not None} - core - model_libraries
    assert {"onnx", "skl2onnx", "onnxmltools"} <= modules
    owners = importlib.metadata.packages_distributions()
    extra = _extra_distributions("onnx")
    for module in sorted(modules):
        dists = {d.lower().replace("_", "-") for d in owners.get(module, [])}
        assert dists & extra, f"mlcal.onnx imports {module} ({dists}) but the onnx extra " \
                              f"installs only {sorted(extra)}"
