"""``embed --ray``: encode a dataset fragment by fragment on a Ray cluster, and commit the column once.

Why it is built this way:

- **A fragment is the unit of work.** Ray Data hands each pending Lance fragment to an actor pool (one
  model per actor, one GPU each when the cluster has GPUs). The actor reads the fragment's images,
  decodes them in threads a block ahead of the model, encodes them in the same blocks the
  single-process path uses (a model's output can depend on which images share its batch), and writes
  the new column for that fragment with Lance's ``merge_columns``: a data file beside the fragment's
  own, *not* committed. Only the fragment's metadata, its failures and its norm statistics travel back.
- **Committed once, on the driver.** When every fragment is done, the driver commits one Lance
  ``Merge`` of all fragments, so readers see no column or the whole column. A task retried after its
  worker died (Ray restarts the actor and reruns the task) writes a new data file; only the metadata of
  the attempt that returned is committed, so no row is ever there twice. Files of killed attempts are
  never referenced; ``lance``'s ``cleanup_old_versions(delete_unverified=True)`` removes them.
  The field's run statistics (valid and failed rows, norm statistics) are only known at the end, and a
  Merge cannot change them, so they follow in a second, metadata-only version.
  A Merge lists every fragment, so one appended by another process meanwhile makes Lance refuse it: the
  driver says how many rows arrived, encodes the new fragments too and commits again.
- **Resumable.** The driver stages each fragment's result as it arrives (JSON, written atomically)
  under ``<dataset>/_cladebench/staging/<column>.fragments/`` (for an ``s3://`` dataset, in the driver's
  cache folder, so resume from the same machine or a shared ``CLADEBENCH_CACHE_DIR``); a rerun skips the
  fragments staged by the same model, revision, preprocessing and precision, provided the fragment and the
  dataset's schema are unchanged since. Fragments whose run key cannot be proven (no ``state.json``, or
  another run's) are discarded, and the run says so. At most the fragments in flight are lost to a kill.
- **One run at a time, checked first.** The same lock per dataset and column as without Ray, held by the
  driver from before staging until the commit, and the same checks before anything is written (column
  name, types, uuids non-null and without newlines; a uuid twice is found per fragment by the actors).
- **The same column as without Ray**: the same field metadata, failures table, sidecar and summary.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import pickle
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from cladebench import console, errors, store
from cladebench.embed.config import EmbedSummary
from cladebench.embed.core import (
    NormSums,
    all_failed,
    check_no_other_staging,
    check_uuids_streamed,
    column_metadata,
    commit_conflict,
    exclusive_run,
    read_state,
    remove_staging,
    run_key,
    staging_dir,
    unproven_note,
    write_failures,
    write_sidecar,
)
from cladebench.embed.ray_actor import FragmentEncoder
from cladebench.errors import CladebenchError
from cladebench.paths import atomic_write
from cladebench.raycluster import cluster_cpus, cluster_gpus, ray_session

if TYPE_CHECKING:
    from types import ModuleType

    import lance
    from lance.fragment import LanceFragment

    from cladebench.embed.config import EmbedConfig
    from cladebench.models import Encoder

_STABLE_KEYS = ("model", "revision", "preprocessing", "precision", "normalized")
"""Field metadata every fragment's column file is written with: what the run key fixes, so that fragments
staged by an interrupted run and by its rerun agree. The rest (run statistics, devices, software, time)
is only known at the end and comes with the metadata-only version."""


# --- staging on the driver ------------------------------------------------------------------------


def _source_of(fragment: LanceFragment) -> dict[str, object]:
    """What a staged result was computed from: the fragment's data files and deletions."""
    meta = fragment.metadata
    deletion = meta.deletion_file
    return {"files": sorted(f.path for f in meta.files),
            "deletion": None if deletion is None else json.dumps(deletion.asdict(), sort_keys=True, default=str)}


def _schema_without(dataset: lance.LanceDataset, column: str) -> str:
    return str(pa.schema([f for f in dataset.schema if f.name != column]))


class _FragmentStaging:
    """Finished fragments of one Ray run: one JSON file each, written atomically; the resume point."""

    def __init__(self, directory: Path, key: dict[str, Any]) -> None:
        self.directory = directory
        self.key = key

    def open(self, restart: bool, dataset: lance.LanceDataset, column: str) -> tuple[dict[int, dict[str, Any]], str]:
        """Start or resume: the staged results still valid for the dataset as it is, and why others were not.

        Fragments are resumed only when ``state.json`` holds this run's key; without it, or with another
        run's, they are discarded (said in the note), never resumed.
        """
        if restart and self.directory.exists():
            remove_staging(self.directory)
        state = read_state(self.directory) if self.directory.exists() else None
        if state is None or state.get("run_key") != self.key:
            unproven = list(self.directory.glob("fragment-*.json")) if self.directory.exists() else []
            remove_staging(self.directory)
            note = unproven_note(len(unproven), "fragment(s)", state, self.key) if unproven else ""
            return self._start(dataset, column), note
        if state.get("schema") != _schema_without(dataset, column):
            remove_staging(self.directory)
            return self._start(dataset, column), "the dataset's columns changed since they were staged"
        current = {f.fragment_id: f for f in dataset.get_fragments()}
        staged: dict[int, dict[str, object]] = {}
        stale = 0
        for path in sorted(self.directory.glob("fragment-*.json")):
            result = json.loads(path.read_text())
            fragment = current.get(result["fragment_id"])
            if fragment is None or _source_of(fragment) != result["source"] or not self._files_exist(dataset, result):
                path.unlink()
                stale += 1
                continue
            staged[result["fragment_id"]] = result
        return staged, (f"{stale} staged fragment(s) no longer match the dataset and are encoded again"
                        if stale else "")

    def _start(self, dataset: lance.LanceDataset, column: str) -> dict[int, dict[str, object]]:
        self.directory.mkdir(parents=True, exist_ok=True)
        state = {"run_key": self.key, "schema": _schema_without(dataset, column)}
        atomic_write(self.directory / "state.json", json.dumps(state).encode())
        return {}

    @staticmethod
    def _files_exist(dataset: lance.LanceDataset, result: dict[str, Any]) -> bool:
        """The uncommitted column file is still there (a cleanup of unverified files would have removed it)."""
        if store.is_remote(dataset.uri):
            return True  # an object store keeps what was written; nothing cheap to check it with here
        new = {f["path"] for f in json.loads(result["fragment"])["files"]} - set(result["source"]["files"])
        data = Path(dataset.uri.removeprefix("file://")) / "data"
        return all((data / name).is_file() for name in new)

    def write(self, result: dict[str, object]) -> None:
        atomic_write(self.directory / f"fragment-{result['fragment_id']:08d}.json", json.dumps(result).encode())

    def remove(self) -> None:
        remove_staging(self.directory)


# --- the run ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ActorPlan:
    """How the actor pool is sized on the connected cluster."""

    actors: int
    cpus: int
    """CPUs each actor reserves: its decoding threads (and the model's threads on CPU)."""
    gpus: int
    """GPUs each actor reserves (0 or 1)."""


def plan_actors(cluster_cpu: float, cluster_gpu: float, config: EmbedConfig, fragments: int) -> ActorPlan:
    """One actor per GPU on a GPU cluster (with that GPU's share of CPUs, at most 8, to decode); on a CPU
    cluster one actor per ``ray_cpus_per_actor`` CPUs. Never more actors than fragments to encode."""
    use_gpu = cluster_gpu >= 1 and config.device in ("auto", "cuda")
    if config.device == "cuda" and not use_gpu:
        raise CladebenchError("--device cuda on Ray, but the cluster has no GPU")
    if use_gpu:
        cpus = config.ray_cpus_per_actor or max(1, min(8, int(cluster_cpu // cluster_gpu)))
        actors = config.ray_actors or int(cluster_gpu)
    else:
        cpus = config.ray_cpus_per_actor or 1
        actors = config.ray_actors or max(1, int(cluster_cpu // cpus))
    if cpus > cluster_cpu:
        raise CladebenchError(f"each Ray actor asks for {cpus} CPUs; the cluster has {cluster_cpu:g}")
    return ActorPlan(actors=max(1, min(actors, fragments)), cpus=cpus, gpus=1 if use_gpu else 0)


def embed_on_ray(config: EmbedConfig, *, encoder: Encoder | None = None,
                 storage_options: dict[str, str] | None = None) -> EmbedSummary:
    """Run ``embed --ray`` (see the module docstring); ``encoder`` (on the driver) only describes the model."""
    started = time.perf_counter()
    with exclusive_run(config, storage_options) as (uri, dataset, column, fill):
        if fill:
            raise CladebenchError(f"{len(fill):,} row(s) of {column!r} have no vector yet; embed without --ray encodes "
                                  "only them (on Ray, --overwrite recomputes the whole column)")
        check_uuids_streamed(dataset, uri)
        check_no_other_staging(uri, column, ray=True, restart=config.restart)
        return _run(config, encoder, storage_options, uri, dataset, column, started)


def _run(config: EmbedConfig, encoder: Encoder | None, storage_options: dict[str, str] | None, uri: str,
         dataset: lance.LanceDataset, column: str, started: float) -> EmbedSummary:
    from cladebench.models import load_encoder

    if encoder is None:  # the driver only describes the model; the actors load their own on their devices
        encoder = load_encoder(config.model, revision=config.revision, preprocessing=config.preprocessing,
                               device="cpu")
    described = encoder.describe()
    key = run_key(described, config)
    runner: dict[str, object] = {"kind": "ray", "address": config.ray}
    with ray_session(config.ray) as ray:  # connected before anything changes: a cluster out of reach drops nothing
        if column in dataset.schema.names:  # --overwrite (else refused): a Merge cannot replace a field
            dataset.drop_columns([column])
            dataset = store.open_dataset(uri, storage_options=storage_options)
        staging = _FragmentStaging(staging_dir(uri, column, fragments=True), key)
        staged, note = staging.open(config.restart, dataset, column)
        if note:
            console.note(f"cladebench embed: {note}")
        resumed = sum(r["rows"] for r in staged.values())
        runner.update(fragments_resumed=len(staged))
        embedding_seconds = 0.0
        for _ in range(_COMMIT_ROUNDS):
            encoding = time.perf_counter()
            _encode_pending(ray, config, encoder, described, storage_options, uri, dataset, column, staging, staged,
                            runner)
            embedding_seconds += time.perf_counter() - encoding
            results = list(staged.values())
            if len(results) == len(dataset.get_fragments()) and all(
                    r["rows"] == len(r["failed_uuids"]) for r in results):
                # Every image failed: no column of nulls is committed; the failures table says why. (--overwrite
                # dropped the old column already, so the table is the column's own.)
                error = all_failed(uri, column, _failures_of(results), described.get("model_id", config.model),
                                   column_exists=False)
                staging.remove()  # nothing worth resuming: a rerun after the images are fixed decodes them again
                raise error
            try:
                summary = _commit(uri, dataset, column, staged, described, config, encoder.dim, storage_options)
                break
            except OSError as exc:
                if not commit_conflict(exc):
                    raise
                dataset = _grown(uri, dataset, staged, storage_options)
        else:
            raise CladebenchError(f"rows kept arriving in {uri} while this run encoded ({_COMMIT_ROUNDS} rounds); "
                                  "every fragment encoded is staged: rerun when the writes settle to commit them")
    staging.remove()
    seconds = time.perf_counter() - started
    total_rows = dataset.count_rows()
    encoded_now = total_rows - resumed
    return EmbedSummary(
        column=column, rows=total_rows, valid=summary["valid"], failed=summary["failed"],
        encoded_now=encoded_now, resumed=resumed, seconds=round(seconds, 3),
        embedding_seconds=round(embedding_seconds, 3),
        rows_per_second=round(encoded_now / embedding_seconds, 2) if embedding_seconds > 0 else 0.0,
        version=summary["version"], failures_path=summary["failures_path"], metadata=summary["metadata"],
        runner=runner,
    )


_COMMIT_ROUNDS = 5
"""Times the run encodes fragments appended by others while it ran, and tries the commit again."""


def _encode_pending(ray: ModuleType, config: EmbedConfig, encoder: Encoder, described: dict[str, object],
                    storage_options: dict[str, str] | None, uri: str, dataset: lance.LanceDataset, column: str,
                    staging: _FragmentStaging, staged: dict[int, dict[str, Any]], runner: dict[str, object]) -> None:
    """Encode the fragments of ``dataset`` not yet in ``staged`` on the actor pool, staging each as it arrives."""
    from cladebench.progress import progress_bar

    fragments = dataset.get_fragments()
    pending = [f.fragment_id for f in fragments if f.fragment_id not in staged]
    provisional = {k: v for k, v in column_metadata(
        uri, described, config, norm_stats={}, valid=0, failed=0, failures_path=None,
        source_version=dataset.version).items() if k in _STABLE_KEYS}
    plan = plan_actors(cluster_cpus(ray), cluster_gpus(ray), config, len(pending))
    runner.update(fragments=len(fragments), actors=plan.actors, cpus_per_actor=plan.cpus, gpus_per_actor=plan.gpus)
    if not pending:
        return
    bar = progress_bar(total=dataset.count_rows(), initial=sum(r["rows"] for r in staged.values()),
                       desc=f"embed {column} on Ray", unit="img", enabled=config.progress, smoothing=0.1)
    with bar:
        source = {f.fragment_id: _source_of(f) for f in fragments}
        for result in _run_pool(ray, plan, pending, uri=_absolute(uri), version=dataset.version,
                                config=dataclasses.replace(config, model=_absolute_model(config.model)),
                                column=column, dim=encoder.dim, field_metadata=provisional,
                                revision=described.get("revision"), storage_options=storage_options):
            if result["fragment_id"] in staged:
                continue  # a result delivered twice is committed once
            result["source"] = source[result["fragment_id"]]
            staging.write(result)
            staged[result["fragment_id"]] = result
            bar.update(result["rows"])


def _grown(uri: str, dataset: lance.LanceDataset, staged: dict[int, dict[str, object]],
           storage_options: dict[str, str] | None) -> lance.LanceDataset:
    """The dataset after a commit conflict, when others only appended to it (its new fragments are then encoded
    too, and the one Merge lists them all); said on the console. Any other change (a fragment staged here
    rewritten or deleted) ends the run: what still matches stays staged for the rerun."""
    latest = store.open_dataset(uri, storage_options=storage_options)
    current = {f.fragment_id: f for f in latest.get_fragments()}
    changed = [i for i, r in staged.items() if i not in current or _source_of(current[i]) != r["source"]]
    if changed or _schema_without(latest, "") != _schema_without(dataset, ""):
        raise CladebenchError(f"{uri} changed while this run encoded (fragments {changed[:5]} or the columns); "
                              "rerun to encode what changed: fragments that still match are resumed")
    arrived = latest.count_rows() - dataset.count_rows()
    console.note(f"cladebench embed: {arrived:,} row(s) were added to {uri} while this run encoded version "
                 f"{dataset.version}; encoding them too")
    return latest


def _absolute(uri: str) -> str:
    """A local dataset path as the workers must see it: absolute (their working folder need not be ours)."""
    if store.is_remote(uri):
        return uri
    return str(Path(uri.removeprefix("file://")).resolve())


def _absolute_model(model: str) -> str:
    """``local-dir:`` with an absolute path, for the same reason; other model ids are left as they are."""
    prefix = "local-dir:"
    return prefix + str(Path(model[len(prefix):]).resolve()) if model.startswith(prefix) else model


def _run_pool(ray: ModuleType, plan: ActorPlan, pending: list[int], **actor_args: object) -> Iterator[dict[str, Any]]:
    """Fragments through a Ray Data actor pool; results as they finish."""
    context = ray.data.DataContext.get_current()
    bars = context.enable_progress_bars
    context.enable_progress_bars = False  # one bar, the driver's, counts rows
    try:
        items = ray.data.from_items([{"fragment_id": f} for f in pending], override_num_blocks=len(pending))
        encoded = items.map_batches(
            FragmentEncoder, fn_constructor_kwargs={**actor_args, "threads": plan.cpus}, batch_size=1,
            concurrency=plan.actors, num_cpus=plan.cpus, num_gpus=plan.gpus,
            # Ray Data's own defaults restart an actor whose worker died (killed, preempted, out of memory) and
            # rerun its fragment, without a limit; an exception raised by the code is not retried.
        )
        for row in encoded.iter_rows():
            result = {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in row.items()}
            kind = result.pop("error_type")
            if result.pop("error"):
                error = getattr(errors, kind, None)
                raise (error if isinstance(error, type) and issubclass(error, CladebenchError)
                       else CladebenchError)(row["error"])
            yield result
    finally:
        context.enable_progress_bars = bars


def _failures_of(results: list[dict[str, Any]]) -> pa.Table:
    return pa.table({"uuid": pa.array([u for r in results for u in r["failed_uuids"]], pa.string()),
                     "reason": pa.array([m for r in results for m in r["failed_reasons"]], pa.string())})


def _commit(uri: str, dataset: lance.LanceDataset, column: str, staged: dict[int, dict[str, Any]],
            described: dict[str, Any], config: EmbedConfig, dim: int,
            storage_options: dict[str, str] | None) -> dict[str, Any]:
    """One Merge of every fragment's column file, then the run statistics, failures and sidecar."""
    import lance
    from lance.fragment import FragmentMetadata

    fragments = dataset.get_fragments()
    missing = [f.fragment_id for f in fragments if f.fragment_id not in staged]
    if missing:
        raise CladebenchError(f"{uri}: fragments {missing[:5]} have no staged result; rerun to finish")
    results = [staged[f.fragment_id] for f in fragments]
    schemas = [pickle.loads(base64.b64decode(r["schema"])) for r in results]
    lance_schema = schemas[0]
    if any(other != lance_schema for other in schemas[1:]):  # compared as schemas: their pickles may differ
        raise CladebenchError(f"{uri}: the fragments were encoded against different schemas; pass --restart")
    operation = lance.LanceOperation.Merge([FragmentMetadata.from_json(r["fragment"]) for r in results],
                                           lance_schema)
    merged = lance.LanceDataset.commit(uri, operation, read_version=dataset.version,
                                       storage_options=store.lance_storage_options(uri, storage_options))

    sums = NormSums()
    for r in results:
        sums.merge(NormSums(**json.loads(r["norms"])))
    failed = _failures_of(results)
    model = described.get("model_id", config.model)
    failures_path = write_failures(uri, column, failed, model)
    devices = sorted({r["device"] for r in results if r.get("device")})
    metadata = column_metadata(uri, {**described, "device": ",".join(devices)}, config,
                               norm_stats=sums.to_stats(), valid=sums.n, failed=failed.num_rows,
                               failures_path=failures_path, source_version=dataset.version)
    field = store.embedding_field(column, dim, metadata)
    merged.update_field_metadata({column: {k.decode(): v.decode() for k, v in field.metadata.items()}},
                                 replace=True)
    current = store.open_dataset(uri, storage_options=storage_options)
    write_sidecar(uri, column, dim, metadata)
    return {"valid": sums.n, "failed": failed.num_rows, "version": current.version,
            "failures_path": str(failures_path) if failures_path else None, "metadata": metadata}


__all__ = ["ActorPlan", "embed_on_ray", "plan_actors"]
