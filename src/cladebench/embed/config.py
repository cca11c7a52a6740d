"""The shapes of an ``embed`` run: its config (the CLI's options) and its summary.

Both paths (this process, :mod:`cladebench.embed.local`; a Ray cluster, :mod:`cladebench.embed.ray`) take the
same :class:`EmbedConfig` and return the same :class:`EmbedSummary`; they live here, below both and below the
dispatcher in ``cladebench.embed``, so that neither path imports the package that chooses between them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from cladebench.config import OPTION, at_least, bare_value


@dataclass(frozen=True)
class EmbedConfig:
    """Encode every image of a dataset once into an ``emb_<key>`` column."""

    dataset: str
    """Path or URI of the Lance dataset to add the column to."""
    model: str = field(metadata=OPTION)
    """Model: an alias (bioclip, bioclip-2, bioclip-2.5, clip-vit-b-16, ...), hf-hub:ORG/NAME, local-dir:PATH,
    timm:ARCH[.TAG] (an image-only backbone, as are timm and transformers folders) or NAME/PRETRAINED."""
    column: str | None = None
    """Name of the new column: emb_ followed by lower-case letters, digits and underscores (emb_[a-z0-9_]+, so
    that filters and SQL need no quoting); derived from the model when omitted (bioclip-2.5 -> emb_bioclip2p5)."""
    revision: str | None = None
    """Model revision to load instead of the pinned one."""
    preprocessing: Literal["openclip", "tol"] = "openclip"
    """openclip: the model's own resize + centre crop (a timm or transformers model: its library's own transform);
    tol: resize to a square without crop, as pybioclip does."""
    batch_size: int = 64
    """Images per forward pass."""
    device: Literal["auto", "cpu", "cuda", "mps"] = "auto"
    """Where the model runs; auto picks cuda, then mps, then cpu."""
    workers: int | None = None
    """Decoding worker processes; 0 decodes in the main process. Default: chosen from the measured cost of
    decoding and of the model on the first block (every core for decoding on a GPU)."""
    precision: Literal["fp32", "fp16", "bf16"] = "fp32"
    """Autocast precision of the forward pass; stored embeddings are always float32."""
    checkpoint_rows: int = 1024
    """Stage finished rows to disk at least this often, so an interrupted run loses at most this many."""
    overwrite: bool = False
    """Recompute the column when the dataset already has it."""
    restart: bool = False
    """Discard rows staged by an earlier interrupted run instead of resuming from them. (Rows staged with other
    settings, or whose settings cannot be proven, are discarded anyway.)"""
    progress: bool = True
    """Show a progress bar with rows/s and ETA."""
    ray: str | None = field(default=None, metadata=bare_value("default"))
    """Run on Ray: --ray alone finds the cluster as ray.init does (RAY_ADDRESS, then the latest cluster started on
    this machine, else a new local one); --ray ADDRESS connects to one (ray://head:10001, auto, local). Fragments
    are encoded by an actor pool (one model per actor, one GPU each when the cluster has GPUs) and the column is
    committed once by this process."""
    ray_actors: int | None = None
    """Model replicas on Ray. Default: one per GPU on a GPU cluster, else one per ray_cpus_per_actor CPUs."""
    ray_cpus_per_actor: int | None = None
    """CPUs each Ray actor reserves (its decoding threads and, on CPU, the model's threads). Default: 1 on a CPU
    cluster; on a GPU cluster the CPUs per GPU, at most 8."""

    def __post_init__(self) -> None:
        # Out-of-range counts are the user's mistake: refused here, naming the option, before a model is built
        # (a batch size of 0 would otherwise fail deep in the block planner as a bug).
        at_least("--batch-size", self.batch_size, 1)
        at_least("--checkpoint-rows", self.checkpoint_rows, 1)
        for option, value, minimum in (("--workers", self.workers, 0), ("--ray-actors", self.ray_actors, 1),
                                       ("--ray-cpus-per-actor", self.ray_cpus_per_actor, 1)):
            if value is not None:
                at_least(option, value, minimum)


@dataclass(frozen=True)
class EmbedSummary:
    """What one ``embed`` run did."""

    column: str
    rows: int
    """Rows in the dataset."""
    valid: int
    """Rows with an embedding."""
    failed: int
    """Rows whose image could not be decoded (null embedding, listed in the failures table)."""
    encoded_now: int
    """Rows encoded by this run (the rest were resumed from staging)."""
    resumed: int
    """Rows taken from an earlier interrupted run."""
    seconds: float
    """The whole run: loading the model, reading, encoding and committing."""
    embedding_seconds: float
    """The part spent decoding and encoding images (from the first batch to the last), which the rate is of."""
    rows_per_second: float
    """Rows encoded now per second of embedding (:attr:`embedding_seconds`): loading a model or committing a
    large dataset takes the same time for 15 images as for 15,000, and would make the rate say nothing."""
    version: int
    """Dataset version that holds the column."""
    failures_path: str | None
    metadata: dict[str, object]
    runner: dict[str, object] = field(default_factory=lambda: {"kind": "local"})
    """Where it ran: this process, or a Ray cluster with its actors and resources."""
    arrived: int = 0
    """Rows without a vector when the run ended: added by another process while it encoded (the column was
    committed for the rows it read). A later run without --overwrite encodes only them."""

    def to_dict(self) -> dict[str, object]:
        return dict(self.__dict__)
