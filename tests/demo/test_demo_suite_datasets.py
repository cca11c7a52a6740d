"""The demo's sample suite datasets, written by one helper of ``demo/suite.py``: the fine-grained table (its rows,
indices and tag, and its rows labelled to genus only) and the co-observed pairs (their rows), each in the world's
draw of the demo's seed."""

from __future__ import annotations

from pathlib import Path

from cladebench import store
from cladebench.demo import DEMO_STEPS, DemoContext  # the package's registry: every step registered
from cladebench.demo.config import DemoConfig
from cladebench.demo.suite import GENUS_ONLY_ROWS
from cladebench.synthetic import WorldConfig, make_world


def test_the_fine_grained_and_co_observed_datasets(tmp_path: Path) -> None:
    config = DemoConfig(out=tmp_path, seed=1, images=70, pairs=5)
    world = make_world(WorldConfig(seed=config.seed))
    ctx = DemoContext(config=config, world=world, out_dir=tmp_path)
    fine = DEMO_STEPS.get_named("fine-grained")(ctx)
    pairs = DEMO_STEPS.get_named("co-observed")(ctx)
    assert fine["rows"] == 70 + GENUS_ONLY_ROWS and fine["path"] == str(tmp_path / "fine-grained.lance")
    assert pairs["rows"] == 5 and pairs["path"] == str(tmp_path / "co-observed.lance")
    ds = store.open_dataset(tmp_path / "fine-grained.lance")
    assert "demo" in ds.tags.list()
    assert {tuple(index["columns"]) for index in store.indices(ds)} >= {("uuid",), ("challenge_group",)}
    table = store.read(ds, columns=["uuid", "image_format", "genus", "species", "scientific_name", "challenge_group"])
    # Written 64 rows at a time, the rows are the world's draw all the same, in order.
    expected = world.to_table(70, seed=1, image_format="webp")
    assert table.column("uuid").to_pylist()[:70] == expected.column("uuid").to_pylist()
    assert set(table.column("image_format").to_pylist()) == {"webp"}
    # Then the genus-only rows: one genus the draw has photos of, its species unknown, in a group of the draw.
    rows = table.to_pylist()
    genus = fine["genus_only"]["genus"]
    assert fine["genus_only"]["rows"] == GENUS_ONLY_ROWS
    assert [(r["genus"], r["species"], r["scientific_name"]) for r in rows[70:]] == [
        (genus, None, genus)] * GENUS_ONLY_ROWS
    assert all(r["species"] is not None for r in rows[:70])
    assert genus in {r["genus"] for r in rows[:70]}
    assert {r["challenge_group"] for r in rows[70:]} <= {r["challenge_group"] for r in rows[:70]}
    co = store.read(store.open_dataset(tmp_path / "co-observed.lance"), columns=["uuid"])
    assert co.column("uuid").to_pylist() == world.pair_table(5, seed=1).column("uuid").to_pylist()
