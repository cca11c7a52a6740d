"""Encode once: stream images from a Lance dataset through an encoder into a new ``emb_<key>`` column.

Why it is built this way:

- **The model never waits on decoding.** A thread reads rows from Lance ahead of the model and worker
  processes decode them, block by block, with prefetch; the main process only runs the model.
- **Resumable, and the dataset is valid at every moment.** Finished rows are staged as Parquet
  parts (each written to a temporary file and renamed into place, so a kill -9 leaves either a whole
  part or none) under ``<dataset>/_cladebench/staging/<column>/``. Nothing touches the dataset until
  every row is done; then one Lance ``merge`` commits the column as a new version. A rerun reads the
  staged uuids and encodes only the rest, and only when the staging folder's ``state.json`` proves
  they were encoded with the same model, revision, preprocessing and precision: parts without that
  proof are discarded (and the run says how many), never resumed.
- **One run per dataset and column.** A run holds an exclusive lock on
  ``<dataset>/_cladebench/locks/<column>.lock`` (``paths.held_lock``) from before it stages anything until
  its column is committed. A second run of the same column refuses at once (exit 1, naming the holder's
  pid) rather than waiting: encoding may take hours, and a queued run would only recompute the column
  the first one commits. The operating system drops the lock when its process ends, however it ends
  (kill -9 included), so a stale lock file never blocks. For an ``s3://`` dataset the lock lives with
  the staging folder in this machine's cache folder: it keeps runs on this machine (or on machines
  sharing ``CLADEBENCH_CACHE_DIR`` on a file system with working ``flock``) apart, not runs on other
  machines.
- **Checked before anything is written.** The column name (``emb_[a-z0-9_]+``, so that it needs no
  quoting in any filter), the types of ``uuid`` (string) and ``image`` (binary), the uuids themselves
  (non-null, unique, no newline: as the store's writer checks them) and, for a local dataset, that its
  folder is writable.
- **Rows that arrive later are encoded later, alone.** A run encodes the rows of the version it read; rows
  another process appends meanwhile are committed without a vector, and the run says how many. A later run
  without ``--overwrite`` encodes only the rows of the column that have neither a vector nor a recorded
  failure, with the settings the column records (others are refused: one column, one embedding space), and
  writes them in place (a Lance ``Update`` of that column in their fragments: row order and fingerprint stay).
  ``--ray`` leaves such a fill to this path; its one ``Merge`` must list every fragment, so rows appended while
  it encodes are encoded in the same run (said, and committed together).
- **Failures are recorded, never dropped.** A corrupt, truncated or empty image gets a null
  embedding (the marker: it is not among the column's valid rows), a row in the failures table
  ``<dataset>/_cladebench/failures/<column>.parquet`` with its reason, and a count in the summary
  and in the field metadata. When every image fails no column is committed: the failures table is
  written and the run ends with an error (a column of nothing but nulls would only hide the cause).
- **Raw in storage, normalised in use.** The column holds the model's raw float32 outputs; the field
  metadata (and ``embedding_models.json`` beside the dataset) names the model, revision, dimension,
  preprocessing, precision, software versions and norm statistics.
- **On a cluster, the same column.** ``--ray`` hands fragments to a Ray actor pool instead
  (:mod:`cladebench.embed.ray`); both paths encode the same blocks, cut at fragment boundaries, so on the
  same device, precision and threads they write the same bits.

This package presents the API on purpose: :class:`EmbedConfig`, :class:`EmbedSummary`, :func:`embed_dataset`
(which chooses the path) and :func:`column_for_model`. The rest lives in modules with one job each:
:mod:`~cladebench.embed.config` (the config and summary), :mod:`~cladebench.embed.core` (what both paths
share), :mod:`~cladebench.embed.local` (this process), :mod:`~cladebench.embed.fill` (the rows an existing
column lacks, written in place) and :mod:`~cladebench.embed.ray` (a Ray cluster). The two
paths import ``core`` and ``config``, never this package or each other. The failures table and the reading of
finished columns belong to the store (:mod:`cladebench.store.embeddings`).
"""

from __future__ import annotations

import errno
from typing import TYPE_CHECKING

from cladebench.embed.config import EmbedConfig, EmbedSummary
from cladebench.errors import CladebenchError, environment_error
from cladebench.lazy import present_lazily

if TYPE_CHECKING:
    from cladebench.embed.core import column_for_model  # noqa: F401
    from cladebench.models import Encoder
    from cladebench.models.deferred import DeferredEncoder

__all__ = ["EmbedConfig", "EmbedSummary", "embed_dataset",
           *present_lazily(__name__, {"core": ("column_for_model",)})]  # core reads datasets: pyarrow on first use


def embed_dataset(config: EmbedConfig, *, encoder: Encoder | DeferredEncoder | None = None,
                  storage_options: dict[str, str] | None = None) -> EmbedSummary:
    """Run ``embed`` (see the module docstring) here or on Ray (``config.ray``); ``encoder`` may be passed to
    reuse a loaded model. A file-system refusal (permissions, a read-only or full disk: what
    :func:`cladebench.errors.environment_error` recognises) ends the run with one line, not as a bug."""
    from cladebench.models.deferred import DeferredEncoder

    # encoding images needs the weights, and the column their provenance
    built = encoder.model() if isinstance(encoder, DeferredEncoder) else encoder
    try:
        if config.ray is not None:
            from cladebench.embed.ray import embed_on_ray

            return embed_on_ray(config, encoder=built, storage_options=storage_options)
        from cladebench.embed.local import embed_locally

        return embed_locally(config, built, storage_options)
    except OSError as exc:
        error = environment_error(exc)
        if error is None:
            raise
        if exc.strerror:  # the run's own wording: what it could not do, and the file as the OS names it
            verb = "cannot access" if exc.errno in (errno.EACCES, errno.EPERM) else "cannot write"
            error = CladebenchError(f"{verb} {exc.filename or 'a file of the run'}: {exc.strerror}")
        raise error from None
