"""A small real dataset for the ``serve`` tests: synthetic photos with hostile strings planted, embedded by the tiny
CLIP, with two zero-shot runs over it, and a server started for real on 127.0.0.1 in a thread (over this data or
the review tests' :class:`helpers.review_data.ReviewData`).

Hostile strings: one row's species, scientific name and common name are markup with a script; its attribution is
an ``<img onerror>``; its source URL is a ``javascript:`` URL; a challenge group value carries quotes and an
ampersand. Each must show as text and none may run.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from helpers.review_data import ReviewData

HOSTILE_NAME = "<script>window.__pwned=1</script>Peromyscus \"x' & <b>bold</b>"
HOSTILE_ATTRIBUTION = "<img src=x onerror=\"window.__pwned=2\">(c) O'Hara & <i>co</i>"
HOSTILE_URL = "javascript:window.__pwned=3"
HOSTILE_GROUP = "birds \"&' <u>group</u>"


@dataclass(frozen=True)
class ServeData:
    """Paths of what :func:`write_serve_data` made."""

    dataset: Path
    runs: tuple[Path, Path]
    model: str
    hostile_uuid: str
    """The row with the hostile strings."""


def write_serve_data(root: Path, model: str, rows: int = 48) -> ServeData:
    """The dataset (``rows`` synthetic photos, one hostile), its ``emb_tiny`` column and two zero-shot runs."""
    from cladebench import store
    from cladebench.cli import main
    from cladebench.embed import EmbedConfig, embed_dataset
    from cladebench.synthetic.world import make_world

    table = make_world().to_table(rows, seed=3)
    hostile = 0
    columns = {name: table.column(name).to_pylist() for name in table.column_names}
    columns["species"][hostile] = HOSTILE_NAME
    columns["scientific_name"][hostile] = HOSTILE_NAME
    columns["common_name"][hostile] = HOSTILE_NAME
    columns["attribution"][hostile] = HOSTILE_ATTRIBUTION
    columns["source_url"][hostile] = HOSTILE_URL
    columns["challenge_group"] = [HOSTILE_GROUP if i % 2 == 0 else "mammals" for i in range(rows)]
    table = pa.table({name: pa.array(values, table.schema.field(name).type) for name, values in columns.items()},
                     schema=table.schema)
    dataset = root / "photos.lance"
    store.write_dataset(table, dataset)
    embed_dataset(EmbedConfig(dataset=str(dataset), model=model, batch_size=16, device="cpu", progress=False))
    runs = []
    for name, extra in (("species", []), ("genus", ["--rank", "genus"])):
        out = root / "runs" / name
        code = main(["eval", "zeroshot", str(dataset), "--model", model, "--out", str(out), "--device", "cpu",
                     "--group-by", "challenge_group", *extra])
        assert code == 0, f"eval zeroshot ({name}) exited {code}"
        runs.append(out / "run.json")
    return ServeData(dataset=dataset, runs=(runs[0], runs[1]), model=model,
                     hostile_uuid=str(table.column("uuid")[hostile].as_py()))


@contextlib.contextmanager
def running(data: ServeData | ReviewData, *, host: str = "127.0.0.1", token_file: Path | None = None,
            thumbnails: Path | None = None) -> Iterator[tuple[str, object]]:
    """A real server over ``data`` (the serve or the review tests' data) on a free port in a thread: yields (its URL
    as printed, the Started). With ``thumbnails``, thumbnails and embedding maps are cached under that folder."""
    from cladebench.serve.config import ServeConfig
    from cladebench.serve.server import open_state, start

    config = ServeConfig(dataset=str(data.dataset), runs=data.runs, host=host, port=0, token_file=token_file,
                         model=data.model, device="cpu")
    state = open_state(config)
    if thumbnails is not None:
        state.thumbnail_root = thumbnails
        state.map_root = thumbnails / "maps"
    started = start(config, state)
    thread = started.run_in_thread()
    try:
        yield started.url, started
    finally:
        started.stop()
        thread.join(timeout=10)
        started.sock.close()
