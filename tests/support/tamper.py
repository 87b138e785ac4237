"""Edit a saved mlcal model the way a careful attacker would: change something, then recompute
every digest the flavour records, so that what a test exercises is the check behind the
digests (format allowlist, field validation, classes), not the digest check itself."""

from pathlib import Path

import yaml


def reseal(model_dir) -> str:
    """Recompute MLmodel's recorded file digests and overall digest for ``model_dir`` as it
    now is; returns the new digest."""
    from mlcal.mlflow.integrity import seal

    mlmodel = Path(model_dir) / "MLmodel"
    doc = yaml.safe_load(mlmodel.read_text())
    digest = seal(str(model_dir), doc["flavors"])
    mlmodel.write_text(yaml.safe_dump(doc))
    return digest


def edit_mlmodel(path, edit) -> None:
    """Apply ``edit(doc)`` to the YAML file ``path`` (an MLmodel)."""
    path = Path(path)
    doc = yaml.safe_load(path.read_text())
    edit(doc)
    path.write_text(yaml.safe_dump(doc))
