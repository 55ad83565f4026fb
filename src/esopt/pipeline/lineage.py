"""Where a run's files live, and the check that a checkpoint descends from the run's last update.

An ES run's checkpoint t+1 is written by the update of generation t; its manifest names
the sha256 of checkpoint t (`parent_sha256`), which `gen{t:03d}/update.json` (or, for
t = 0, the base model) records. Before anything is scored on checkpoint t, the chain is
checked: a checkpoint from another run, another configuration or a replaced parent is
refused, naming the files.
"""

from __future__ import annotations

from pathlib import Path

from esopt.pipeline.records import RecordError, UpdateManifest, identity_hash
from esopt.runtime.checkpoint import checkpoint_sha256, read_manifest


def generation_dir(spec, generation: int) -> Path:
    return Path(spec.run_dir) / f"gen{generation:03d}"


def update_record_path(spec, generation: int) -> Path:
    """The update record of checkpoint `generation` (>= 1) of an ES run."""
    return generation_dir(spec, generation) / "update.json"


def direction_path(out_dir: str | Path, index: int) -> Path:
    return Path(out_dir) / f"{index:03d}.parquet"


def lineage_sha256(spec, generation: int) -> str | None:
    """sha256 of checkpoint `generation` of an ES run as its lineage records it: the base
    model's (hashed) for 0, else the update record's."""
    if generation == 0:
        return checkpoint_sha256(spec.model)
    return UpdateManifest.read(update_record_path(spec, generation)).sha256


def check_lineage(spec, generation: int, checkpoint: str | Path) -> str | None:
    """The sha256 that checkpoint `generation` of the run's lineage must have (its
    manifest's), after checking that it is that checkpoint: generation, run identity and
    parent_sha256 chaining to the previous update. Generation 0 is the base model: its
    weights are verified when loaded. The weights' bytes are verified by whoever loads
    them (esopt.backends.factory.load_policy, esopt.runtime.checkpoint.read_master)."""
    if generation == 0:
        try:
            return read_manifest(checkpoint)["sha256"]
        except FileNotFoundError:  # a plain model directory or a Hub id
            return checkpoint_sha256(checkpoint)
    manifest = read_manifest(checkpoint)
    where = Path(checkpoint) / "manifest.json"
    if manifest.get("generation") != generation:
        raise RecordError(f"{where}: generation {manifest.get('generation')}, expected "
                          f"{generation}")
    identity = manifest.get("identity")
    if identity and identity != identity_hash(spec.identity_json()):
        raise RecordError(f"{where}: made under run identity {identity}, not this run's "
                          f"{identity_hash(spec.identity_json())}: the config changed")
    parent = lineage_sha256(spec, generation - 1)
    if manifest.get("parent_sha256") != parent:
        source = ("the base model " + str(spec.model) if generation == 1
                  else str(update_record_path(spec, generation - 1)))
        raise RecordError(f"{where}: parent_sha256 {manifest.get('parent_sha256')} does not "
                          f"chain to checkpoint {generation - 1} ({parent}, from {source})")
    return manifest["sha256"]
