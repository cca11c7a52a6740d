"""The verbs on datasets themselves: ``info``, ``subset``, ``embed`` and ``search``.

Heavy modules (Lance readers, torch, the models) are imported inside each verb, so ``cladebench --help``
starts in a fraction of a second.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from cladebench.cli.verbs import verb
from cladebench.config import OPTION, POSITIONAL, at_least, at_most
from cladebench.errors import CladebenchError, UsageError

if TYPE_CHECKING:
    import lance

    from cladebench.embed.config import EmbedConfig
    from cladebench.models import Encoder

# --- info ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class InfoConfig:
    """Describe a dataset."""

    dataset: str
    """Path or URI (local, hf://, s3://) of a Lance dataset."""
    json: bool = False
    """Print JSON instead of text."""
    version: str | None = None
    """A version number or tag to describe instead of the latest."""
    fingerprint: bool = True
    """Compute the fingerprint (reads the uuid column)."""


@verb("info", InfoConfig, "rows, schema, groups, licenses, embeddings, fingerprint, versions and tags")
def _info(config: InfoConfig) -> int:
    from cladebench import store
    from cladebench.store import info

    dataset = store.open_dataset(config.dataset, version=config.version)  # digits a version, else a tag
    description = info.describe(dataset, config.dataset, with_fingerprint=config.fingerprint)
    print(json.dumps(description, indent=2, default=str) if config.json else info.format_description(description))
    return 0


# --- subset --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SubsetConfig:
    """Materialise part of a dataset locally."""

    dataset: str
    """Path or URI (local, hf://, s3://) of the source Lance dataset."""
    out: Path = field(metadata=OPTION)
    """Directory of the new local Lance dataset (must not exist yet)."""
    where: str | None = None
    """SQL filter pushed down to Lance, e.g. "challenge_group = 'camera_trap'"."""
    columns: tuple[str, ...] | None = None
    """Columns to keep (uuid is always kept); all when omitted."""


@verb("subset", SubsetConfig, "copy the rows matching --where (and only --columns) into a new local dataset")
def _subset(config: SubsetConfig) -> int:
    from cladebench import store

    result = store.subset(config.dataset, config.out, where=config.where, columns=config.columns)
    print(f"wrote {result.count_rows():,} rows to {config.out} (fingerprint {store.fingerprint(result)})")
    return 0


# --- embed ---------------------------------------------------------------------------------------

@verb("embed", "cladebench.embed.config:EmbedConfig", "encode every image once into an emb_<model> column (resumable)")
def _embed(config: EmbedConfig) -> int:
    from cladebench.embed import embed_dataset

    try:
        summary = embed_dataset(config)
    except KeyboardInterrupt:
        print("cladebench embed: interrupted; finished rows are staged, rerun the same command to resume",
              file=sys.stderr)
        raise
    print(
        f"{summary.column}: {summary.valid:,} of {summary.rows:,} rows embedded "
        f"({summary.encoded_now:,} encoded now at {summary.rows_per_second:,.1f} images/s of embedding, "
        f"{summary.resumed:,} resumed), "
        f"{summary.failed:,} failed"
        + (f" (see {summary.failures_path})" if summary.failures_path else "")
        + f"; dataset version {summary.version}"
        + (f"; {summary.arrived:,} row(s) added meanwhile without a vector (run embed again to encode them)"
           if summary.arrived else "")
        + (f"; on Ray: {summary.runner['actors']} actor(s) x {summary.runner['cpus_per_actor']} CPU"
           f"{' + 1 GPU' if summary.runner['gpus_per_actor'] else ''}, {summary.runner['fragments']} fragments "
           f"({summary.runner['fragments_resumed']} resumed)" if summary.runner.get("kind") == "ray" else "")
    )
    return 0


# --- search --------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class SearchCommand:
    """Search a dataset's images by text through the IVF index of the model's emb_* column; with --queries and
    --annotations, evaluate the search as INQUIRE's fullrank task and write a run record."""

    dataset: str
    """Path or URI of the Lance dataset (embedded with the model)."""
    text: str | None = field(default=None, metadata=POSITIONAL)
    """What to look for (e.g. "a mongoose standing upright alert")."""
    model: str = field(metadata=OPTION)
    """The model whose text tower encodes the query (same forms as for `embed`)."""
    k: int | None = None
    """Hits to show (default 20); with --queries, the cutoff of the fullrank evaluation (default 50, as INQUIRE)."""
    where: str | None = None
    """SQL filter applied before the top-k."""
    column: str | None = None
    """Embedding column; by default the one whose metadata names the model."""
    templates: str = "raw"
    """Query templates: 'raw' (the text as written, as INQUIRE) or a template set."""
    queries: Path | None = None
    """INQUIRE query CSV (query_id, query_text, ...) for a fullrank evaluation."""
    annotations: Path | None = None
    """INQUIRE annotation CSV (query_id, image_id, image_path): every row a positive."""
    match_column: str = "inat24_file_name"
    """Dataset column holding the key that annotations name (INQUIRE: the iNat24 file name)."""
    out: Path | None = None
    """Directory for the fullrank run record."""
    revision: str | None = None
    """Model revision instead of the pinned one."""
    device: Literal["auto", "cpu", "cuda", "mps"] = "auto"
    """Where the text tower runs."""

    def __post_init__(self) -> None:
        if self.k is not None:
            at_least("-k", self.k, 1)
            at_most("-k", self.k, MAX_SEARCH_K, "every hit is held in memory; Lance aborts on a far larger k")
        from cladebench.store import check_filter
        from cladebench.templates import get_templates

        check_filter(self.where)  # its form; its columns are checked on the dataset's schema before the model
        try:
            get_templates(self.templates)  # an unknown set is a usage error before the text tower loads
        except ValueError as exc:
            raise UsageError(f"--templates: {exc}") from None


MAX_SEARCH_K = 1_000_000
"""Largest -k of ``search``: the hits are read into memory, and Lance aborts the process (no error to catch) on a
k in the billions."""


@verb("search", SearchCommand, "text-to-image search through the vector index; INQUIRE fullrank with annotations")
def _search(command: SearchCommand) -> int:
    from cladebench import store
    from cladebench.models import load_encoder

    fullrank = command.queries is not None or command.annotations is not None
    if not fullrank and not (command.text or "").strip():
        raise UsageError("give the text to search for, or --queries and --annotations for a fullrank evaluation")
    if fullrank and (command.queries is None or command.annotations is None or command.out is None):
        raise UsageError("a fullrank evaluation needs --queries, --annotations and --out")
    dataset = store.open_dataset(command.dataset)
    _check_search(dataset, command)  # before the text tower loads
    encoder = load_encoder(command.model, revision=command.revision, device=command.device, texts="text search")
    if not fullrank:
        return _print_search(dataset, encoder, command)
    from cladebench.evaluate.fullrank import write_fullrank_record

    record, path = write_fullrank_record(dataset, encoder, command)
    for name, estimate in record.metrics.items():
        if "=" not in name:
            print(f"  {name:<16} {estimate['value']:8.2f}  [{estimate['low']:.2f}, {estimate['high']:.2f}]  "
                  f"n={estimate['n']}")
    print(f"run record: {path}")
    return 0


def _check_search(dataset: lance.LanceDataset, command: SearchCommand) -> None:
    """What a search can be refused for without a model: the filter and the columns it names."""
    from cladebench.evaluate.checks import check_embedding_column, check_filter_on_schema

    check_filter_on_schema(dataset, command.where)
    check_embedding_column(dataset, command.column)
    if command.queries is not None and command.match_column not in dataset.schema.names:
        raise CladebenchError(f"--match-column {command.match_column!r} is not a column of {dataset.uri}")


def _print_search(dataset: lance.LanceDataset, encoder: Encoder, command: SearchCommand) -> int:
    from cladebench.tasks.text_search import SEARCH_K, search_text

    names = dataset.schema.names
    shown = [c for c in ("uuid", "scientific_name", "common_name", "source_url") if c in names]
    assert command.text is not None  # a search without --queries was refused without text
    result = search_text(dataset, encoder, [command.text], k=SEARCH_K if command.k is None else command.k,
                         where=command.where, column=command.column,
                         templates=command.templates, columns=shown)
    if result.index_built:
        from cladebench.console import note

        note(f"built an IVF_FLAT index on {result.column}: new version {result.version} of the dataset "
             "(later searches reuse it)")
    if result.hits.num_rows == 0:
        scope = f"matching {command.where!r}" if command.where else "in the dataset"
        print(f"no hits: no row {scope} has an embedding in {result.column}", file=sys.stderr)
        return 0
    for row in result.hits.to_pylist():
        details = "  ".join(str(row[c]) for c in shown[1:] if row.get(c) is not None)
        print(f"{row['rank']:>3}  {row['cosine_similarity']:.4f}  {row['uuid']}  {details}")
    return 0
