"""Zero-shot refuses input it would score as nonsense (a NaN, negative or infinite logit scale, vectors without a
direction, numeric taxon names, a candidates column that is not a list), and run.json never holds a bare NaN."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from cladebench import store
from cladebench.errors import CladebenchError, SchemaError, UsageError
from cladebench.evaluate.jsonsafe import finite_json, record_json
from cladebench.evaluate.record import RunRecord
from cladebench.tasks.common import fixed_logit_scale, label_set_from_file
from cladebench.taxonomy import Lineage


def strict_json(text: str) -> object:
    """JSON as every other parser reads it: the tokens NaN, Infinity and -Infinity are not JSON."""

    def refuse(token: str) -> object:
        raise ValueError(f"bare {token} in JSON")

    return json.loads(text, parse_constant=refuse)


# --- no torch needed ---------------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["nan", "NaN", "-1", "0", "inf", "-inf", "1e999", "many"])
def test_a_logit_scale_that_is_not_a_positive_finite_number_is_a_usage_error(value: str) -> None:
    with pytest.raises(UsageError, match="--logit-scale"):
        fixed_logit_scale(value)


def test_good_logit_scales() -> None:
    assert fixed_logit_scale("learned") is None and fixed_logit_scale("100") == 100.0


@pytest.mark.parametrize("value", [24, 24.0, np.int64(24), True])
def test_a_numeric_taxon_name_is_refused(value: object) -> None:
    with pytest.raises(SchemaError, match=r"column 'species': .* is a number, not a taxon name"):
        Lineage.from_row({"genus": "Limnobdella", "species": value})


def test_a_name_in_bytes_is_refused_not_rendered_as_a_python_literal() -> None:
    with pytest.raises(SchemaError, match=r"column 'species': .*is bytes, not text"):
        Lineage.from_row({"genus": "Limnobdella", "species": b"m\xe9xicana"})


def test_a_missing_name_is_still_missing() -> None:
    assert Lineage.from_row({"genus": "Limnobdella", "species": float("nan")}).names[-1] is None


def test_label_files_that_are_not_utf8_numeric_or_a_folder(tmp_path: Path) -> None:
    benchmark = [Lineage.from_names("Animalia", "Annelida", "Clitellata", "Arhynchobdellida", "Praobdellidae",
                                    "Limnobdella", "mexicana")]
    text = tmp_path / "labels.txt"
    text.write_bytes(b"Limnobdella mexicana\nLimnobdella m\xe9xicana\n")
    with pytest.raises(CladebenchError, match=r"line 2: not UTF-8 text \(byte 0xe9"):
        label_set_from_file(text, "species", benchmark)
    table = tmp_path / "labels.csv"
    table.write_bytes(b"genus,species\nLimnobdella,m\xe9xicana\n")  # pyarrow reads such a cell as bytes
    with pytest.raises(CladebenchError, match=r"line 2: not UTF-8 text \(byte 0xe9"):
        label_set_from_file(table, "species", benchmark)
    table.write_text("genus,species\nLimnobdella,24\nLimnobdella,25\n")
    with pytest.raises(SchemaError, match="row 2: column 'species': 24 is a number"):
        label_set_from_file(table, "species", benchmark)
    with pytest.raises(CladebenchError, match="is a folder"):
        label_set_from_file(tmp_path, "species", benchmark)


def test_run_json_never_holds_a_bare_nan(tmp_path: Path) -> None:
    record = RunRecord(task="zeroshot", config={"logit_scale": "100"},
                       metrics={"top1_species": {"value": float("nan"), "std": np.float32("inf"), "n": 0}},
                       provenance={"model": {"logit_scale": float("-inf")}})
    path = record.write(tmp_path / "run", pa.table({"uuid": ["a"]}))
    written = strict_json(path.read_text())
    assert written["metrics"]["top1_species"] == {"value": None, "std": None, "n": 0}
    assert written["provenance"]["model"]["logit_scale"] is None
    notes = written["provenance"]["non_finite_values"]
    assert notes["metrics.top1_species.value"].startswith("NaN")
    assert notes["metrics.top1_species.std"].startswith("Infinity")
    assert notes["provenance.model.logit_scale"].startswith("-Infinity")
    assert RunRecord.read(path).metrics["top1_species"]["value"] is None


def test_finite_json_keeps_finite_numbers_exactly() -> None:
    data = {"a": [1, 2.5, np.float64(0.1), np.int32(3)], "b": "nan", "c": None}
    cleaned, replaced = finite_json(data)
    assert cleaned == {"a": [1, 2.5, 0.1, 3], "b": "nan", "c": None} and replaced == {}
    assert strict_json(record_json({"metrics": cleaned})) == {"metrics": cleaned}


# --- through the task, with a real tiny model --------------------------------------------------------


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, object]:
    pytest.importorskip("torch")
    pytest.importorskip("open_clip")
    from cladebench.models import load_encoder
    from cladebench.models.tiny import write_tiny_model
    from cladebench.synthetic import WorldConfig, make_world
    from helpers.embedded import write_embedded

    root = tmp_path_factory.mktemp("zeroshot-checks")
    model = "local-dir:" + str(write_tiny_model(root / "tiny", seed=3))
    table = make_world(WorldConfig(seed=1, names="generated", branching=(2, 2, 1, 2, 1, 2, 3))).to_table(
        24, seed=5, image_format="jpeg")
    path = root / "world.lance"
    write_embedded(table, path, model)
    return path, model, load_encoder(model, device="cpu")


def _variant(world: tuple[Path, str, object], tmp_path: Path, change) -> object:
    """A copy of the embedded world with one column changed, written by Lance (as other tools would)."""
    import lance

    path, _, _ = world
    table = store.open_dataset(path).to_table()
    out = tmp_path / "variant.lance"
    lance.write_dataset(change(table), str(out))
    return store.open_dataset(out)


def _vectors(table: pa.Table, change) -> pa.Table:
    index = table.column_names.index("emb_tiny")
    field = table.schema.field(index)
    values = np.asarray(table.column(index).to_pylist(), dtype=np.float32)
    values = change(values)
    array = pa.FixedSizeListArray.from_arrays(pa.array(values.ravel(), pa.float32()), values.shape[1])
    return table.set_column(index, field, array)


def test_bad_logit_scales_are_refused_by_the_task(world) -> None:
    from cladebench.tasks.zeroshot import ZeroShotConfig, zero_shot

    path, _, encoder = world
    for value in ("nan", "-5", "inf"):
        with pytest.raises(UsageError, match="--logit-scale"):
            zero_shot(store.open_dataset(path), encoder, ZeroShotConfig(logit_scale=value))


@pytest.mark.parametrize(("kind", "message"), [("zero", "all zero"), ("huge", "overflows float32")])
def test_vectors_without_a_direction_are_refused(world, tmp_path: Path, kind: str, message: str) -> None:
    from cladebench.tasks.zeroshot import ZeroShotConfig, zero_shot

    def plant(values: np.ndarray) -> np.ndarray:
        values[3] = 0.0 if kind == "zero" else 1e30
        return values

    dataset = _variant(world, tmp_path, lambda t: _vectors(t, plant))
    uuid = dataset.to_table(columns=["uuid"]).column(0)[3].as_py()
    with pytest.raises(SchemaError, match=f"1 image vector\\(s\\) are .*{message} \\(first uuid={uuid}\\)"):
        zero_shot(dataset, world[2], ZeroShotConfig())


def test_a_numeric_species_column_is_refused(world, tmp_path: Path) -> None:
    from cladebench.tasks.zeroshot import ZeroShotConfig, zero_shot

    def numeric(table: pa.Table) -> pa.Table:
        index = table.column_names.index("species")
        return table.set_column(index, "species", pa.array(range(table.num_rows), pa.int64()))

    with pytest.raises(SchemaError, match="column 'species': 0 is a number, not a taxon name"):
        zero_shot(_variant(world, tmp_path, numeric), world[2], ZeroShotConfig())


def test_candidates_must_be_a_list_column(world, tmp_path: Path) -> None:
    from cladebench.tasks.zeroshot import ZeroShotConfig, zero_shot

    path, _, encoder = world
    with pytest.raises(UsageError, match="--candidates 'scientific_name' holds string, not a list"):
        zero_shot(store.open_dataset(path), encoder, ZeroShotConfig(candidates="scientific_name"))

    def with_groups(table: pa.Table) -> pa.Table:
        names = table.column("scientific_name").to_pylist()
        return table.append_column("cryptic_group", pa.array([[n] for n in names], pa.list_(pa.string())))

    predictions = zero_shot(_variant(world, tmp_path, with_groups), encoder, ZeroShotConfig(candidates="cryptic_group"))
    assert all(predictions.table.column("correct_top1").to_pylist())  # one candidate each: its own species
