"""The pipeline's files as typed records, each with a kind and a schema version.

One direction's data on its way to the update:

    DirectionResult   gen{t}/directions/{i:03d}.parquet   its episodes + what the worker measured
    RewardRow         gen{t}/rewards.parquet              one row per direction: its fitness
    UpdateManifest    gen{t+1}/update.json, manifest.json the update's lineage and weights
    EvalRecord        eval/gen{t}.parquet                 held-out episodes + their summary

Every Parquet record carries, in its schema metadata, its kind and version
(`esopt.record`), the resolved config (`config`) and the hash of the run's identity
(`esopt.identity`: the spec without its runtime settings), so a stage that resumes can
tell a file of this run from a file left by another configuration. Stages read and write
these files only through the classes here.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from esopt.pipeline.diagnostics import (
    components_json,
    episode_components,
    mean_components,
    trajectory_digest,
)
from esopt.pipeline.objective import fitness
from esopt.runtime.atomic import write_json_atomic, write_parquet_atomic

RECORD_KEY = "esopt.record"
IDENTITY_KEY = "esopt.identity"
CONFIG_KEY = "config"


class RecordError(ValueError):
    """A file that is not the record it should be: missing, truncated, of another kind or
    version, or made by another configuration. The message names the file."""


def identity_hash(identity_json: str) -> str:
    """The hash that names a run's identity (RunSpec.identity_json())."""
    return hashlib.sha256(identity_json.encode()).hexdigest()[:16]


def _metadata(kind: str, version: int, spec) -> dict[str, str]:
    """A record's metadata; without a spec (a file made outside a run), no config or identity."""
    meta = {RECORD_KEY: f"{kind}/{version}"}
    if spec is not None:
        meta.update({CONFIG_KEY: spec.to_json(), IDENTITY_KEY: identity_hash(spec.identity_json())})
    return meta


def read_parquet_record(path: str | Path, kind: str, versions: Sequence[int] = (),
                        columns: Sequence[str] | None = None) -> tuple[pa.Table, dict[str, str]]:
    """(table, metadata) of a Parquet record of `kind`; RecordError if it cannot be read
    (missing, empty, truncated) or is another kind. Files from before records carried a
    kind (no `esopt.record`) are read as version 1."""
    path = Path(path)
    try:
        table = pq.read_table(path, columns=list(columns) if columns else None)
    except FileNotFoundError:
        raise RecordError(f"{path}: no such {kind} file") from None
    except (pa.ArrowInvalid, OSError) as e:
        raise RecordError(f"{path}: not a readable {kind} file (truncated or empty?): {e}") \
            from None
    meta = {k.decode(): v.decode() for k, v in (table.schema.metadata or {}).items()}
    found = meta.get(RECORD_KEY, f"{kind}/1")
    found_kind, _, version = found.partition("/")
    if found_kind != kind or (versions and int(version) not in versions):
        raise RecordError(f"{path}: a {found} record, expected {kind} "
                          f"(versions {list(versions) or 'any'})")
    return table, meta


def check_identity(path: str | Path, meta: dict[str, str], spec) -> None:
    """RecordError unless the file was made under `spec`'s identity."""
    want = identity_hash(spec.identity_json())
    have = meta.get(IDENTITY_KEY)
    if have != want:
        raise RecordError(f"{path}: made under run identity {have or 'unknown (older esopt)'}, "
                          f"but this run's is {want}: the config changed since it was written")


# --------------------------------------------------------------------- direction file
@dataclass(frozen=True)
class DirectionResult:
    """One perturbed direction's episodes on its generation's shared tasks, with what the
    worker measured. The file is the unit the fan-out writes atomically and resumes by."""

    KIND = "direction"
    VERSION = 2

    generation: int
    direction: int
    direction_seed: int
    sign: int
    sigma: float
    checkpoint_sha256: str
    """The weights that were perturbed (checkpoint t): a file scored on other weights is stale."""
    noise_spec: str
    noise_fingerprint: str
    """What the update checks before applying this direction's noise."""
    worker: str
    worker_shard: tuple[int, ...]
    worker_load_s: float
    direction_wall_s: float
    generate_s: float
    flops: float
    peak_rss_mb: float
    peak_memory_mb: float
    episodes: pa.Table = field(repr=False, compare=False)
    """One row per episode (esopt.agent.trajectories.episodes_table)."""

    def to_table(self) -> pa.Table:
        constants = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "episodes"}
        table = self.episodes
        for name, value in constants.items():
            value = list(value) if isinstance(value, tuple) else value
            table = table.append_column(name, pa.array([value] * table.num_rows))
        return table

    def write(self, path: str | Path, spec) -> Path:
        return write_parquet_atomic(self.to_table(), path,
                                    _metadata(self.KIND, self.VERSION, spec))

    @classmethod
    def from_table(cls, table: pa.Table) -> DirectionResult:
        if not table.num_rows:
            raise ValueError("a direction file without episodes")
        first = table.slice(0, 1).to_pylist()[0]
        constants = {f.name: first[f.name] for f in fields(cls) if f.name != "episodes"}
        constants["worker_shard"] = tuple(constants["worker_shard"])
        keep = [c for c in table.column_names if c not in constants]
        return cls(**constants, episodes=table.select(keep))

    @classmethod
    def read(cls, path: str | Path, spec=None) -> DirectionResult:
        """The record at `path`; with `spec`, RecordError unless it was made under it."""
        table, meta = read_parquet_record(path, cls.KIND, (cls.VERSION,))
        if spec is not None:
            check_identity(path, meta, spec)
        try:
            return cls.from_table(table)
        except (KeyError, ValueError) as e:
            raise RecordError(f"{path}: not a complete direction record: {e}") from None

    # What the reduce stage needs of the episodes.
    @property
    def task_rewards(self) -> list[float]:
        return [float(r) for r in self.episodes.column("reward").to_pylist()]

    @property
    def task_failed(self) -> list[bool]:
        if "failed" not in self.episodes.column_names:
            return [False] * self.episodes.num_rows
        return [bool(f) for f in self.episodes.column("failed").to_pylist()]


# --------------------------------------------------------------------- reward table
@dataclass(frozen=True)
class RewardRow:
    """One direction of a generation's reward table: its fitness (mean episode reward, NaN
    when an episode failed) and accounting. (Files before version 2 called the fitness
    `reward`; they are still read.)"""

    generation: int
    direction: int
    direction_seed: int
    sign: int
    sigma: float
    fitness: float
    failed: bool
    failed_episodes: int
    success: float
    task_seeds: list[int]
    task_rewards: list[float]
    task_failed: list[bool]
    turns: float
    prompt_tokens: int
    completion_tokens: int
    wall_s: float
    worker: str
    worker_load_s: float
    worker_shard: list[int]
    peak_rss_mb: float
    peak_memory_mb: float
    generate_s: float
    flops: float
    noise_fingerprint: str | None
    reward_components: str = "{}"
    """The mean over its episodes of each named part of the reward (the environments'
    step info `reward_components`), a JSON object; {} where the environment has none."""
    completion_digests: list[str] = field(default_factory=list)
    """Per task (task_seeds order), a hash of the episode's completions: directions with
    equal digests on a task wrote the same text (the ledger's output diversity)."""

    @classmethod
    def of(cls, d: DirectionResult, failed_reward: float | None = None) -> RewardRow:
        """The reward-table row of a direction's record."""
        e = d.episodes.to_pydict()
        rewards, failed = d.task_rewards, d.task_failed
        turns = e.get("turns") or [[] for _ in rewards]
        components = [episode_components(json.loads(t["info"]) for t in ts) for ts in turns]
        return cls(
            generation=d.generation, direction=d.direction, direction_seed=d.direction_seed,
            sign=d.sign, sigma=d.sigma, fitness=fitness(rewards, failed, failed_reward),
            failed=any(failed), failed_episodes=int(sum(failed)),
            success=float(np.mean(e["success"])), task_seeds=[int(s) for s in e["task_seed"]],
            task_rewards=rewards, task_failed=failed, turns=float(np.mean(e["num_turns"])),
            prompt_tokens=int(np.sum(e["prompt_tokens"])),
            completion_tokens=int(np.sum(e["completion_tokens"])),
            wall_s=d.direction_wall_s, worker=d.worker, worker_load_s=d.worker_load_s,
            worker_shard=list(d.worker_shard), peak_rss_mb=d.peak_rss_mb,
            peak_memory_mb=d.peak_memory_mb, generate_s=d.generate_s, flops=d.flops,
            noise_fingerprint=d.noise_fingerprint,
            reward_components=components_json(mean_components(components)),
            completion_digests=[trajectory_digest([t["completion"] for t in ts])
                                for ts in turns])


@dataclass(frozen=True)
class RewardTable:
    """A generation's reward table: one RewardRow per direction, in direction order."""

    KIND = "rewards"
    VERSION = 2

    rows: tuple[RewardRow, ...]

    def __post_init__(self) -> None:
        if [r.direction for r in self.rows] != list(range(len(self.rows))):
            raise ValueError(f"reward rows out of order: {[r.direction for r in self.rows]}")

    @property
    def fitness(self) -> list[float]:
        return [r.fitness for r in self.rows]

    def column(self, name: str) -> list:
        return [getattr(r, name) for r in self.rows]

    def to_table(self) -> pa.Table:
        return pa.Table.from_pylist([asdict(r) for r in self.rows])

    def write(self, path: str | Path, spec) -> Path:
        return write_parquet_atomic(self.to_table(), path,
                                    _metadata(self.KIND, self.VERSION, spec))

    @classmethod
    def from_table(cls, table: pa.Table) -> RewardTable:
        d = table.sort_by("direction").to_pydict()
        if "fitness" not in d:  # version 1 named the fitness `reward`
            d["fitness"] = d.pop("reward")
        d.setdefault("noise_fingerprint", [None] * table.num_rows)
        for name, default in (("failed", False), ("failed_episodes", 0)):
            d.setdefault(name, [default] * table.num_rows)
        d.setdefault("task_failed", [[False] * len(s) for s in d["task_seeds"]])
        d.setdefault("reward_components", ["{}"] * table.num_rows)
        d.setdefault("completion_digests", [[] for _ in range(table.num_rows)])
        names = [f.name for f in fields(RewardRow)]
        return cls(tuple(RewardRow(**{n: d[n][i] for n in names})
                         for i in range(table.num_rows)))

    @classmethod
    def read(cls, path: str | Path, spec=None) -> RewardTable:
        table, meta = read_parquet_record(path, cls.KIND, (1, cls.VERSION))
        if spec is not None and IDENTITY_KEY in meta:
            check_identity(path, meta, spec)
        try:
            return cls.from_table(table)
        except (KeyError, ValueError) as e:
            raise RecordError(f"{path}: not a complete reward table: {e}") from None


# --------------------------------------------------------------------- update manifest
@dataclass(frozen=True)
class UpdateManifest:
    """Checkpoint t+1's lineage: the update of generation t, enough to replay it from seeds
    (`manifest.json` in the checkpoint, `update.json` beside it). `sha256`,
    `num_parameters` and `noise_spec` are filled in by the checkpoint writer."""

    KIND = "update"
    VERSION = 2

    generation: int
    parent_sha256: str | None
    seeds: list[int]
    signs: list[int]
    weights: list[float]
    excluded: list[int]
    sigma: float
    alpha: float
    scale: float
    subspaces: list[dict]
    rank: int | None
    rewards: list[float | None]
    """Each direction's fitness; null for a failed (NaN) one."""
    failed_directions: list[int]
    config: dict
    identity: str
    update_wall_s: float
    load_s: float
    peak_rss_mb: float
    peak_memory_mb: float
    sha256: str = ""
    num_parameters: int = 0
    noise_spec: str = ""
    full_rank_vectors: bool = False
    """Low-rank ES: the non-matrix tensors got full-rank noise (False before the option)."""
    intended_norm: float | None = None
    """L2 norm of the float32 update (esopt.es.apply.UpdateStats; None in older records)."""
    realised_norm: float | None = None
    """L2 norm of what the update changed in the weights as served (serving_dtype)."""
    realised_cosine: float | None = None
    """Cosine of the realised with the intended update (None for a zero update)."""
    unchanged_fraction: float | None = None
    """Fraction of the weights whose served value the update left unchanged."""
    record: str = f"{KIND}/{VERSION}"

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> UpdateManifest:
        d = dict(d)
        d.setdefault("identity", "")
        d.setdefault("record", f"{cls.KIND}/1")
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})

    def write(self, path: str | Path) -> Path:
        return write_json_atomic(path, self.to_dict())

    @classmethod
    def read(cls, path: str | Path) -> UpdateManifest:
        return cls.from_dict(read_json(path, "update record"))


def read_json(path: str | Path, what: str) -> dict:
    """A JSON object from `path`; RecordError naming the file if missing or truncated."""
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise RecordError(f"{path}: no such {what}") from None
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as e:
        raise RecordError(f"{path}: {what} is truncated or not JSON ({e})") from None
    if not isinstance(obj, dict):
        raise RecordError(f"{path}: {what} is not a JSON object")
    return obj


def finite_or_none(values) -> list[float | None]:
    """NaN as None: JSON records stay strict JSON."""
    return [float(v) if math.isfinite(v) else None for v in values]


# --------------------------------------------------------------------- evaluation
@dataclass(frozen=True)
class EvalSummary:
    """What an evaluation file's metadata says of its episodes (`summary`)."""

    experiment: str
    horizon: int
    method: str
    seed: int
    generation: int
    success_mean: float
    success_std: float
    failed: int
    reward_mean: float
    per_repeat: list[float]
    peak_rss_mb: float
    peak_memory_mb: float
    wall_s: float
    load_s: float
    checkpoint_sha256: str | None

    @classmethod
    def from_dict(cls, d: dict) -> EvalSummary:
        names = {f.name for f in fields(cls)}
        d = {k: v for k, v in d.items() if k in names}
        d.setdefault("failed", 0)
        return cls(**d)


@dataclass(frozen=True)
class EvalRecord:
    """A held-out evaluation of one checkpoint: one row per episode (with the run's
    experiment, horizon, method, seed and generation as columns) and its summary."""

    KIND = "eval"
    VERSION = 2

    summary: EvalSummary
    episodes: pa.Table = field(repr=False, compare=False)

    INFO = ("experiment", "horizon", "method", "seed", "generation")

    def to_table(self) -> pa.Table:
        table = self.episodes
        for k in self.INFO:
            table = table.append_column(k, pa.array([getattr(self.summary, k)] * table.num_rows))
        return table

    def write(self, path: str | Path, spec=None) -> Path:
        meta = _metadata(self.KIND, self.VERSION, spec)
        meta["summary"] = json.dumps(asdict(self.summary))
        return write_parquet_atomic(self.to_table(), path, meta)

    @classmethod
    def read_summary(cls, path: str | Path) -> EvalSummary:
        """The summary alone (the schema's metadata; no episode is read)."""
        try:
            meta = pq.read_schema(path).metadata or {}
        except FileNotFoundError:
            raise RecordError(f"{path}: no such evaluation file") from None
        except (pa.ArrowInvalid, OSError) as e:
            raise RecordError(f"{path}: not a readable evaluation file: {e}") from None
        if b"summary" not in meta:
            raise RecordError(f"{path}: an evaluation file without its summary")
        return EvalSummary.from_dict(json.loads(meta[b"summary"]))

    @classmethod
    def read_columns(cls, path: str | Path, columns: Sequence[str]) -> dict[str, list]:
        """Some episode columns of an evaluation file."""
        table, _ = read_parquet_record(path, cls.KIND, (), columns)
        return table.to_pydict()
