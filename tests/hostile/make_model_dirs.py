"""Generate a corpus of tampered copies of one saved mlcal model.

``make_corpus(src, out, marker)`` copies the model directory ``src`` once per case into
``out/<case>`` and damages the copy; it returns ``{case: expected}`` where ``expected`` is the
error class ``mlcal.mlflow.load_model`` must raise (``"ModelIntegrityError"``,
``"UnsafeModelFormatError"``, ``"CalibratorFormatError"``) or ``"loads"`` (the damage is in a
place the loader never reads, and the model must load and predict as the original).

"Sealed" cases recompute every recorded digest after the damage, as an attacker who can
rewrite MLmodel would: they exercise the checks behind the digests. Every planted pickle or
module writes ``marker`` when executed. Run as a script to write the corpus somewhere:
``python tests/hostile/make_model_dirs.py SRC_MODEL_DIR OUT_DIR``.
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
import sys
import zipfile
from pathlib import Path

import yaml

INTEGRITY, UNSAFE, FORMAT, LOADS = ("ModelIntegrityError", "UnsafeModelFormatError",
                                    "CalibratorFormatError", "loads")


class _Planted:
    def __init__(self, marker: str):
        self.marker = marker

    def __reduce__(self):
        return (exec, (f"open({self.marker!r}, 'w').write('pwned')",))


def _pickle_bytes(marker) -> bytes:
    return pickle.dumps(_Planted(str(marker)))


def _yaml_edit(path: Path, edit) -> None:
    doc = yaml.safe_load(path.read_text())
    edit(doc)
    path.write_text(yaml.safe_dump(doc))


def _mlcal(edit):
    return lambda m, _: _yaml_edit(m / "MLmodel", lambda d: edit(d["flavors"]["mlcal"]))


def _nested(edit):
    return lambda m, _: _yaml_edit(m / "base_model" / "MLmodel",
                                   lambda d: edit(d["flavors"]["sklearn"]))


def _flavors(edit):
    return lambda m, _: _yaml_edit(m / "MLmodel", lambda d: edit(d["flavors"]))


def _pickle_instead_of_skops(m, marker, fmt="pickle"):
    (m / "base_model" / "model.skops").unlink()
    (m / "base_model" / "model.pkl").write_bytes(_pickle_bytes(marker))
    _nested(lambda s: s.update(serialization_format=fmt, pickled_model="model.pkl"))(m, marker)


def _symlink(rel: str, target):
    def make(m, _):
        (m / rel).unlink()
        (m / rel).symlink_to(target(m) if callable(target) else target)
    return make


def _fifo(rel: str):
    def make(m, _):
        if (m / rel).exists():
            (m / rel).unlink()
        os.mkfifo(m / rel)
    return make


def _write(rel: str, data):
    def make(m, marker):
        payload = data(m, marker) if callable(data) else data
        (m / rel).parent.mkdir(parents=True, exist_ok=True)
        (m / rel).write_bytes(payload if isinstance(payload, bytes) else payload.encode())
    return make


def _yaml_bomb() -> str:
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for i in range(1, 12):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]")
    return "\n".join(lines) + "\nflavors: {mlcal: *a11, python_function: {loader_module: " \
                              "mlcal.mlflow}}\n"


def _truncate(rel: str):
    def make(m, _):
        data = (m / rel).read_bytes()
        (m / rel).write_bytes(data[: len(data) // 2])
    return make


def _planted_code(m, marker):
    (m / "code").mkdir()
    (m / "code" / "skops_helpers.py").write_text(f"open({str(marker)!r}, 'w').write('x')\n")
    _flavors(lambda f: (f["python_function"].update(code="code"),
                        f["mlcal"].update(code="code")))(m, marker)


def _fake_zip_bomb(m, _):
    # a skops-looking archive whose one member declares 3 GiB; it is never expanded
    path = m / "base_model" / "model.skops"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("schema.json", "{}")
    data = bytearray(path.read_bytes())
    cd = data.rfind(b"PK\x01\x02")   # central directory entry: uncompressed size at +24
    data[cd + 24: cd + 28] = (3 << 30).to_bytes(4, "little")
    path.write_bytes(bytes(data))


# name -> (damage(model_dir, marker), reseal afterwards?, expected outcome of load_model)
CASES = {
    "pickle_declared_unsealed": (_pickle_instead_of_skops, False, INTEGRITY),
    "pickle_declared_sealed": (_pickle_instead_of_skops, True, UNSAFE),
    "cloudpickle_declared_sealed": (lambda m, k: _pickle_instead_of_skops(m, k, "cloudpickle"),
                                    True, UNSAFE),
    "pickle_bytes_named_skops_sealed": (_write("base_model/model.skops",
                                               lambda m, k: _pickle_bytes(k)), True, UNSAFE),
    "pickle_bytes_named_skops_unsealed": (_write("base_model/model.skops",
                                                 lambda m, k: _pickle_bytes(k)), False,
                                          INTEGRITY),
    "base_flavor_python_function_sealed": (_mlcal(lambda c: c.update(
        base_flavor="python_function")), True, UNSAFE),
    "base_flavor_unknown_sealed": (_mlcal(lambda c: c.update(base_flavor="evil")), True, FORMAT),
    "base_flavor_mismatch_sealed": (_mlcal(lambda c: c.update(base_flavor="xgboost")), True,
                                    FORMAT),
    "base_format_field_says_pickle_sealed": (_mlcal(lambda c: c.update(base_format="pickle")),
                                             True, LOADS),
    "trusted_types_exec_sealed": (_mlcal(lambda c: c.update(
        base_trusted_types=["builtins.exec"])), True, UNSAFE),
    "trusted_types_wrong_type_sealed": (_mlcal(lambda c: c.update(base_trusted_types="all")),
                                        True, UNSAFE),
    "nested_path_escapes_sealed": (_nested(lambda s: s.update(
        pickled_model="../../../../etc/passwd")), True, FORMAT),
    "nested_path_absolute_sealed": (_nested(lambda s: s.update(pickled_model="/etc/passwd")),
                                    True, FORMAT),
    "nested_sklearn_section_missing_sealed": (
        lambda m, k: _yaml_edit(m / "base_model" / "MLmodel",
                                lambda d: d["flavors"].pop("sklearn")), True, FORMAT),
    "nested_mlmodel_yaml_bomb_sealed": (_write("base_model/MLmodel", _yaml_bomb()), True,
                                        FORMAT),
    "skops_truncated_sealed": (_truncate("base_model/model.skops"), True, UNSAFE),
    "skops_zip_bomb_sealed": (_fake_zip_bomb, True, UNSAFE),
    "calibrator_changed": (_write("calibrator.json", "{}"), False, INTEGRITY),
    "calibrator_removed": (lambda m, k: (m / "calibrator.json").unlink(), False, INTEGRITY),
    "calibrator_deep_json_sealed": (_write("calibrator.json", "[" * 100_000 + "]" * 100_000),
                                    True, FORMAT),
    "requirements_changed": (_write("requirements.txt", "evil-package\n"), False, INTEGRITY),
    "extra_file_root": (_write("payload.pkl", lambda m, k: _pickle_bytes(k)), False, INTEGRITY),
    "extra_file_base": (_write("base_model/model.pkl", lambda m, k: _pickle_bytes(k)), False,
                        INTEGRITY),
    "symlink_inside": (_symlink("requirements.txt", lambda m: m / "conda.yaml"), False,
                       INTEGRITY),
    "symlink_outside": (_symlink("base_model/model.skops", "/etc/passwd"), False, INTEGRITY),
    "symlinked_base_dir": (lambda m, k: (shutil.move(m / "base_model", m.parent / (m.name + "_b")),
                                         (m / "base_model").symlink_to(m.parent / (m.name + "_b"))),
                           False, INTEGRITY),
    "fifo_extra": (_fifo("pipe"), False, INTEGRITY),
    "fifo_as_calibrator": (_fifo("calibrator.json"), False, INTEGRITY),
    "classes_swapped_sealed": (_mlcal(lambda c: c.update(classes=[1, 0])), True, FORMAT),
    "classes_swapped_unsealed": (_mlcal(lambda c: c.update(classes=[1, 0])), False, INTEGRITY),
    "classes_strings_sealed": (_mlcal(lambda c: c.update(classes=["0", "1"])), True, FORMAT),
    "section_list": (_flavors(lambda f: f.update(mlcal=["calibrator.json"])), False, FORMAT),
    "section_str": (_flavors(lambda f: f.update(mlcal="mlcal")), False, FORMAT),
    "section_empty": (_flavors(lambda f: f.update(mlcal={})), False, INTEGRITY),
    "classes_missing_sealed": (_mlcal(lambda c: c.pop("classes")), True, FORMAT),
    "score_source_missing_sealed": (_mlcal(lambda c: c.pop("score_source")), True, FORMAT),
    "threshold_string_sealed": (_mlcal(lambda c: c.update(threshold="0.5")), True, FORMAT),
    "digest_int": (_mlcal(lambda c: c.update(digest=7)), False, INTEGRITY),
    "digest_wrong": (_mlcal(lambda c: c.update(digest="0" * 64)), False, INTEGRITY),
    "files_list": (_mlcal(lambda c: c.update(files=["calibrator.json"])), False, INTEGRITY),
    "files_not_hex": (_mlcal(lambda c: c["files"].update({"calibrator.json": "x" * 64})), False,
                      INTEGRITY),
    "files_entry_dropped": (_mlcal(lambda c: c["files"].pop("conda.yaml")), False, INTEGRITY),
    "mlmodel_yaml_bomb": (_write("MLmodel", _yaml_bomb()), False, FORMAT),
    "mlmodel_huge": (_write("MLmodel", lambda m, k: (m / "MLmodel").read_text()
                            + "#" * (5 << 20) + "\n"), False, FORMAT),
    "mlmodel_not_yaml": (_write("MLmodel", "flavors: [unclosed\n"), False, FORMAT),
    "mlmodel_list": (_write("MLmodel", "- 1\n- 2\n"), False, FORMAT),
    "mlmodel_removed": (lambda m, k: (m / "MLmodel").unlink(), False, INTEGRITY),
    "loader_module_changed": (_flavors(lambda f: f["python_function"].update(
        loader_module="mlflow.sklearn")), False, INTEGRITY),
    "code_path_planted_sealed": (_planted_code, True, UNSAFE),
    "base_model_is_a_file_sealed": (_mlcal(lambda c: c.update(base_model="calibrator.json")),
                                    True, INTEGRITY),
    # MLflow's own unrecorded files: never read by the loader, so the model still loads
    "mlflow_env_vars_file": (_write("environment_variables.txt", "# names\nHOME\n"), False,
                             LOADS),
    "metadata_copy_with_pickle": (_write("metadata/model.pkl", lambda m, k: _pickle_bytes(k)),
                                  False, LOADS),
}


def make_corpus(src, out, marker) -> dict[str, str]:
    """Write every case of :data:`CASES` under ``out``; returns ``{case: expected}``."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from support.tamper import reseal

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    expected = {}
    for name, (damage, sealed, outcome) in CASES.items():
        dst = out / name
        shutil.copytree(src, dst)
        damage(dst, str(marker))
        if sealed:
            reseal(dst)
        expected[name] = outcome
    return expected


if __name__ == "__main__":
    print(json.dumps(make_corpus(sys.argv[1], sys.argv[2], Path(sys.argv[2]) / "MARKER"),
                     indent=1))
