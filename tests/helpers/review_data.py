"""A small real dataset for the review tests: synthetic photos, every fourth labelled only to genus (one of them with a
hostile genus name), embedded by the tiny CLIP, with one zero-shot run; the demo's fine-grained dataset, small,
embedded and run the same way; and a ``cladebench serve`` over it in a process of its own (to be killed). In a
thread, :func:`helpers.serve_data.running` serves it."""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

HOSTILE_GENUS = "<script>window.__pwned=1</script>Mus \"x' & <b>bold</b>"
"""A genus-only row's genus: markup with a script, quotes and an ampersand, to be shown as text."""
HOSTILE_NOTE = "<img src=x onerror=\"window.__pwned=2\"> & 'quoted' <i>note</i>"
"""A review note that must show as text."""


@dataclass(frozen=True)
class ReviewData:
    """Paths of what :func:`write_review_data` made."""

    dataset: Path
    run: Path
    model: str
    genus_only: tuple[str, ...]
    """The uuids labelled only to genus."""
    hostile_uuid: str | None
    """The row whose genus is :data:`HOSTILE_GENUS` (None in the demo's dataset)."""

    @property
    def runs(self) -> tuple[Path]:
        """The one run, as :func:`helpers.serve_data.running` serves runs."""
        return (self.run,)


def write_review_data(root: Path, model: str, rows: int = 32) -> ReviewData:
    """The dataset (every fourth row genus-only, the first of them with :data:`HOSTILE_GENUS`), emb_tiny, a run."""
    from cladebench import store
    from cladebench.synthetic.world import make_world

    table = make_world().to_table(rows, seed=5)
    columns = {name: table.column(name).to_pylist() for name in table.column_names}
    genus_only = [i for i in range(rows) if i % 4 == 1]
    for i in genus_only:
        columns["species"][i] = None
        columns["scientific_name"][i] = columns["genus"][i]
        columns["common_name"][i] = None
    columns["genus"][genus_only[0]] = HOSTILE_GENUS
    columns["scientific_name"][genus_only[0]] = HOSTILE_GENUS
    table = pa.table({name: pa.array(values, table.schema.field(name).type) for name, values in columns.items()},
                     schema=table.schema)
    dataset = root / "reviewed.lance"
    store.write_dataset(table, dataset)
    uuids = table.column("uuid").to_pylist()
    return ReviewData(dataset=dataset, run=_embedded_and_run(dataset, model, root), model=model,
                      genus_only=tuple(uuids[i] for i in genus_only), hostile_uuid=uuids[genus_only[0]])


def write_demo_review_data(root: Path, model: str, images: int = 8) -> ReviewData:
    """The demo's fine-grained dataset (its ``fine-grained`` step: ``images`` photos, then its genus-only rows),
    embedded by ``model`` with one zero-shot run, as :func:`write_review_data` does."""
    from cladebench import store
    from cladebench.demo import DEMO_STEPS, DemoContext  # the package: every step registered
    from cladebench.demo.config import DemoConfig
    from cladebench.synthetic import WorldConfig, make_world

    config = DemoConfig(out=root, images=images)
    DEMO_STEPS.get_named("fine-grained")(DemoContext(config=config, world=make_world(WorldConfig(seed=config.seed)),
                                                     out_dir=root))
    dataset = root / "fine-grained.lance"
    rows = store.read(store.open_dataset(dataset), columns=["uuid", "species"]).to_pylist()
    return ReviewData(dataset=dataset, run=_embedded_and_run(dataset, model, root), model=model,
                      genus_only=tuple(r["uuid"] for r in rows if r["species"] is None), hostile_uuid=None)


def _embedded_and_run(dataset: Path, model: str, root: Path) -> Path:
    """``dataset`` embedded by ``model`` and a zero-shot run of it at species (scientific names): the run's path."""
    from cladebench.cli import main
    from cladebench.embed import EmbedConfig, embed_dataset

    embed_dataset(EmbedConfig(dataset=str(dataset), model=model, batch_size=16, device="cpu", progress=False))
    out = root / "runs" / "species"
    code = main(["eval", "zeroshot", str(dataset), "--model", model, "--out", str(out), "--device", "cpu",
                 "--group-by", "none", "--name-style", "sci"])
    assert code == 0, f"eval zeroshot exited {code}"
    return out / "run.json"


@contextlib.contextmanager
def serving_process(data: ReviewData, cache_dir: Path) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """``cladebench serve`` in a process of its own (to be killed): yields (its URL, the process); ends it if alive."""
    env = {**os.environ, "CLADEBENCH_CACHE_DIR": str(cache_dir), "HF_HUB_OFFLINE": "1"}
    process = subprocess.Popen([sys.executable, "-m", "cladebench", "serve", str(data.dataset), str(data.run),
                                "--port", "0", "--device", "cpu"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, env=env)
    try:
        assert process.stdout is not None
        line = process.stdout.readline()  # the first line names the URL; the socket is bound before it is printed
        found = re.search(r"at (http://\S+)", line)
        if found is None:
            process.kill()
            raise AssertionError(f"serve printed {line!r}; stderr: {process.stderr.read() if process.stderr else ''}")
        yield found.group(1), process
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=30)
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()
