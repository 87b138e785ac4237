"""``mlcal verify MODEL_URI``: check an mlcal model directory against the digests recorded
when it was saved (and, for a registered version, against its ``mlcal.digest`` tag).

Exit codes: 0 every file matches, 1 something differs, 2 error (no such model, ...).
"""

from __future__ import annotations

import sys


def run(args) -> int:
    import tempfile

    if args.model_uri and not _is_local_uri(args.model_uri):
        with tempfile.TemporaryDirectory(prefix="mlcal-verify-") as tmp:
            return _run(args, tmp)
    return _run(args, None)


def _is_local_uri(uri: str) -> bool:
    from mlcal.mlflow.flavor import _is_local

    return _is_local(uri)


def _run(args, download_dir: str | None) -> int:
    import mlflow
    from mlflow.exceptions import MlflowException
    from mlflow.tracking.artifact_utils import _download_artifact_from_uri

    from mlcal.mlflow.integrity import (FLAVOR_NAME, ModelIntegrityError, check_directory,
                                        check_registered_version, read_mlmodel)

    if args.tracking_uri:
        mlflow.set_tracking_uri(args.tracking_uri)
    uri = args.model_uri
    try:
        local = _download_artifact_from_uri(uri, output_path=download_dir)
        flavors = read_mlmodel(local)["flavors"]
        conf = flavors.get(FLAVOR_NAME)
        if not isinstance(conf, dict):
            raise ValueError(f"{uri} is not an mlcal model (no mlcal flavour mapping in MLmodel)")
        try:
            checks = check_directory(local, conf, flavors)
        except ModelIntegrityError as exc:
            print(f"FAILED  {exc}")
            return 1
        for c in checks:
            print(f"{c.status:<8}{c.path}")
        failed = any(c.status != "OK" for c in checks)
        if uri.startswith("models:/"):
            try:
                digest = check_registered_version(uri, local_path=local)
            except ModelIntegrityError as exc:
                print(f"CHANGED registry tag: {exc}")
                failed = True
            else:
                print("OK      registry tag mlcal.digest" if digest else
                      "NOTAG   registry tag mlcal.digest (not registered by mlcal)")
    except MlflowException as exc:
        print(f"mlcal verify: error: {exc.message}", file=sys.stderr)
        return 2
    print(f"{uri}: {'FAILED' if failed else 'OK'}")
    return 1 if failed else 0


def register(sub) -> None:
    p = sub.add_parser("verify", help="check an mlcal model against its recorded digests",
                       description="Check every file of an mlcal MLflow model against the "
                                   "SHA-256 digests recorded when it was saved (and a "
                                   "registered version against its mlcal.digest tag). Prints "
                                   "one line per file (OK, CHANGED, MISSING, EXTRA). Exit "
                                   "code 0 all OK, 1 something differs, 2 error.")
    p.add_argument("model_uri", metavar="MODEL_URI",
                   help="a local model directory, runs:/..., models:/NAME/VERSION, ...")
    p.add_argument("--tracking-uri", default=None,
                   help="MLflow tracking/registry URI (default: MLFLOW_TRACKING_URI or MLflow's)")
    p.set_defaults(handler=run)
