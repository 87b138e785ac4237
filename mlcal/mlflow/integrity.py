"""What an ``mlcal`` model directory must prove before anything in it is read.

At save time the flavour records, in MLmodel's ``mlcal`` section, the SHA-256 of every file of
the model directory (``files``) and one ``digest`` over that listing and every flavour section
of MLmodel (the ``digest`` entry itself excluded). The loader recomputes both and refuses a
directory whose files were changed, removed or added, that holds a symlink or anything but
regular files and directories, or whose MLmodel flavour sections were edited after saving.

The recorded digests are self-attested: someone who rewrites every file and MLmodel can
recompute them. A registered model version therefore also carries the digest as the tag
``mlcal.digest`` (set by :func:`mlcal.mlflow.log_model`); :func:`check_registered_version`
compares a ``models:/`` URI's directory with that tag, and the promotion gate calls it.

MLflow writes a few files of its own after the flavour's ``save_model`` (``MLmodel`` itself,
``environment_variables.txt``, ``registered_model_meta``, a ``metadata/`` copy for Unity
Catalog, ``__pycache__`` of code it imported); they are not recorded and the loader never
reads them, but they too must be regular files.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from dataclasses import dataclass
from typing import Any

FLAVOR_NAME = "mlcal"
MLMODEL = "MLmodel"
FILES_KEY = "files"
DIGEST_KEY = "digest"
#: the registry tag holding a registered version's digest
DIGEST_TAG = "mlcal.digest"
# written or rewritten by MLflow after the flavour saved; never read by the loader
_UNRECORDED_TOP = frozenset({MLMODEL, "environment_variables.txt", "registered_model_meta",
                             "metadata"})
_UNRECORDED_ANYWHERE = frozenset({"__pycache__"})
MAX_MLMODEL_BYTES = 4 << 20
MAX_ENTRIES = 100_000
_HEX = frozenset("0123456789abcdef")


class ModelIntegrityError(ValueError):
    """The model directory differs from what was saved (a changed, missing or extra file, a
    symlink or special file, an edited MLmodel) or lacks the records to prove it does not."""


class UnsafeModelFormatError(ValueError):
    """The model holds something that can only be loaded by running code from the artifact
    (pickle, cloudpickle, arbitrary pyfunc models, code paths, untrusted skops types)."""


def _is_digest(value: Any) -> bool:
    return isinstance(value, str) and len(value) == 64 and set(value) <= _HEX


def _recorded(name: str) -> bool:
    parts = name.split("/")
    if any(p in _UNRECORDED_ANYWHERE for p in parts[:-1]):
        return False
    return parts[0] not in _UNRECORDED_TOP


def file_sha256(path: str) -> str:
    """SHA-256 of a regular file, read without following a symlink at its last component."""
    h = hashlib.sha256()
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
            raise ModelIntegrityError(f"{path} is not a regular file")
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def scan_directory(root: str) -> dict[str, str]:
    """``{relative path: sha256}`` of every recorded file under ``root`` ('/'-separated).

    Raises
    ------
    ModelIntegrityError
        A symlink, a FIFO, socket or device anywhere in the tree (unrecorded places
        included), or more than ``MAX_ENTRIES`` entries.
    """
    out: dict[str, str] = {}
    count = 0
    stack = [""]
    while stack:
        rel_dir = stack.pop()
        with os.scandir(os.path.join(root, rel_dir) if rel_dir else root) as it:
            entries = sorted(it, key=lambda e: e.name)
        for entry in entries:
            count += 1
            if count > MAX_ENTRIES:
                raise ModelIntegrityError(f"mlcal model at {root}: more than {MAX_ENTRIES} "
                                          "entries; refusing to scan it")
            rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
            mode = entry.stat(follow_symlinks=False).st_mode
            if stat.S_ISLNK(mode):
                raise ModelIntegrityError(f"mlcal model at {root}: {rel} is a symlink; a model "
                                          "directory holds regular files only")
            if stat.S_ISDIR(mode):
                stack.append(rel)
            elif not stat.S_ISREG(mode):
                raise ModelIntegrityError(f"mlcal model at {root}: {rel} is not a regular file "
                                          f"(mode {stat.filemode(mode)})")
            elif _recorded(rel):
                out[rel] = file_sha256(entry.path)
    return dict(sorted(out.items()))


def _canonical(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True,
                      allow_nan=False).encode("ascii")


def overall_digest(flavors: dict[str, Any]) -> str:
    """The digest over every flavour section of MLmodel (which holds the file listing) with
    the mlcal ``digest`` entry left out."""
    body = dict(flavors)
    body[FLAVOR_NAME] = {k: v for k, v in flavors[FLAVOR_NAME].items() if k != DIGEST_KEY}
    try:
        return hashlib.sha256(_canonical(body)).hexdigest()
    except (TypeError, ValueError) as exc:
        raise ModelIntegrityError(f"MLmodel's flavour sections cannot be digested: {exc}") \
            from None


def read_mlmodel(root: str) -> dict[str, Any]:
    """MLmodel of ``root`` as a dict, parsed safely: at most ``MAX_MLMODEL_BYTES``, no YAML
    anchors or aliases (their expansion is a memory bomb), a mapping at the top."""
    import yaml

    from mlcal.calibrators.base import CalibratorFormatError

    path = os.path.join(root, MLMODEL)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0)
                     | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        raise ModelIntegrityError(f"mlcal model at {root}: cannot open MLmodel ({exc.strerror})"
                                  ) from None
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
            raise ModelIntegrityError(f"mlcal model at {root}: MLmodel is not a regular file")
        data = fh.read(MAX_MLMODEL_BYTES + 1)
    if len(data) > MAX_MLMODEL_BYTES:
        raise CalibratorFormatError(f"mlcal model at {root}: MLmodel is larger than "
                                    f"{MAX_MLMODEL_BYTES} bytes; refusing to parse it")
    try:
        text = data.decode("utf-8")
        for event in yaml.parse(text, Loader=yaml.SafeLoader):
            if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
                raise CalibratorFormatError(f"mlcal model at {root}: MLmodel uses YAML "
                                            "anchors/aliases, which MLflow never writes")
        doc = yaml.safe_load(text)
    except (UnicodeDecodeError, yaml.YAMLError) as exc:
        raise CalibratorFormatError(f"mlcal model at {root}: MLmodel is not valid YAML: "
                                    f"{str(exc)[:200]}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("flavors"), dict):
        raise CalibratorFormatError(f"mlcal model at {root}: MLmodel has no 'flavors' mapping")
    return doc


@dataclass(frozen=True)
class FileCheck:
    """One line of a directory check: ``status`` is OK, CHANGED, MISSING or EXTRA."""

    path: str
    status: str


def check_directory(root: str, conf: dict[str, Any], flavors: dict[str, Any]
                    ) -> list[FileCheck]:
    """Compare ``root`` with the listing recorded in the mlcal flavour ``conf``; one
    :class:`FileCheck` per file (sorted), plus ``MLmodel`` (CHANGED when its flavour sections
    no longer match the recorded digest).

    Raises
    ------
    ModelIntegrityError
        No or malformed records, a symlink or special file (see :func:`scan_directory`).
    """
    files, digest = conf.get(FILES_KEY), conf.get(DIGEST_KEY)
    if files is None or digest is None:
        raise ModelIntegrityError(f"mlcal model at {root}: MLmodel records no file digests "
                                  f"('{FILES_KEY}', '{DIGEST_KEY}'); it was saved by an older "
                                  "mlcal or edited; re-save it to load it")
    if (not isinstance(files, dict) or not _is_digest(digest)
            or not all(isinstance(k, str) and _is_digest(v) for k, v in files.items())):
        raise ModelIntegrityError(f"mlcal model at {root}: MLmodel's '{FILES_KEY}' must map "
                                  f"file names to SHA-256 hex digests and '{DIGEST_KEY}' be one")
    actual = scan_directory(root)
    checks = [FileCheck(MLMODEL, "OK" if overall_digest(flavors) == digest else "CHANGED")]
    for name in sorted(set(files) | set(actual)):
        if name not in actual:
            checks.append(FileCheck(name, "MISSING"))
        elif name not in files:
            checks.append(FileCheck(name, "EXTRA"))
        else:
            checks.append(FileCheck(name, "OK" if files[name] == actual[name] else "CHANGED"))
    return checks


def verify_directory(root: str, conf: dict[str, Any], flavors: dict[str, Any]) -> None:
    """Raise :class:`ModelIntegrityError` naming the first file that differs from the record."""
    for c in check_directory(root, conf, flavors):
        if c.status != "OK":
            what = {"CHANGED": "was changed after saving", "MISSING": "is missing",
                    "EXTRA": "was added after saving"}[c.status]
            if c.path == MLMODEL:
                what = "flavour sections were edited after saving (digest mismatch)"
            raise ModelIntegrityError(f"mlcal model at {root}: {c.path} {what}; refusing to "
                                      "load it")


def seal(root: str, flavors: dict[str, Any]) -> str:
    """Record the digests of ``root`` in ``flavors['mlcal']`` (in place); return the digest."""
    conf = flavors[FLAVOR_NAME]
    conf.pop(DIGEST_KEY, None)
    conf[FILES_KEY] = scan_directory(root)
    conf[DIGEST_KEY] = overall_digest(flavors)
    return conf[DIGEST_KEY]


def directory_digest(root: str) -> str:
    """The digest ``root`` actually has: its files as they are and its MLmodel's flavour
    sections with the listing replaced by the real one (what a registry tag is compared to)."""
    flavors = read_mlmodel(root)["flavors"]
    if not isinstance(flavors.get(FLAVOR_NAME), dict):
        raise ModelIntegrityError(f"{root} is not an mlcal model (no mlcal flavour mapping)")
    flavors = dict(flavors)
    flavors[FLAVOR_NAME] = dict(flavors[FLAVOR_NAME], **{FILES_KEY: scan_directory(root)})
    return overall_digest(flavors)


# -- registered versions -----------------------------------------------------------------------
def registered_version(model_uri: str):
    """The ``ModelVersion`` a ``models:/name/version`` or ``models:/name@alias`` URI names,
    else None (not a registry URI)."""
    if not model_uri.startswith("models:/"):
        return None
    from mlflow import MlflowClient
    from mlflow.store.artifact.utils.models import get_model_name_and_version

    client = MlflowClient()
    resolved = get_model_name_and_version(client, model_uri)
    if len(resolved) != 2:      # models:/<model_id>: a logged model, not a registered version
        return None
    return client.get_model_version(*resolved)


def tag_registered_version(name: str, version: str | int, digest: str) -> None:
    """Record ``digest`` as the ``mlcal.digest`` tag of a registered version."""
    from mlflow import MlflowClient

    MlflowClient().set_model_version_tag(name, str(version), DIGEST_TAG, digest)


def check_registered_version(model_uri: str, local_path: str | None = None) -> str | None:
    """Compare the directory of a registered version with its ``mlcal.digest`` tag.

    Parameters
    ----------
    model_uri : str
        Any URI; only ``models:/name/version`` and ``models:/name@alias`` are checked.
    local_path : str, optional
        The version's already downloaded directory (downloaded here otherwise).

    Returns
    -------
    str or None
        The verified digest; None when the URI is not a registered version or the version has
        no tag (registered without mlcal, e.g. by ``mlflow.register_model``).

    Raises
    ------
    ModelIntegrityError
        The directory's digest differs from the tag: it changed after registration.
    """
    version = registered_version(model_uri)
    if version is None or DIGEST_TAG not in (version.tags or {}):
        return None
    expected = version.tags[DIGEST_TAG]
    if local_path is None:
        import tempfile

        from mlflow.tracking.artifact_utils import _download_artifact_from_uri

        with tempfile.TemporaryDirectory(prefix="mlcal-verify-") as tmp:
            actual = directory_digest(_download_artifact_from_uri(model_uri, output_path=tmp))
    else:
        actual = directory_digest(local_path)
    if actual != expected:
        raise ModelIntegrityError(
            f"{model_uri} (version {version.version} of {version.name!r}) changed after it was "
            f"registered: its digest is {actual[:16]}..., the {DIGEST_TAG} tag says "
            f"{str(expected)[:16]}...; refusing to use it")
    return actual
