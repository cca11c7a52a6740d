"""The spatiotemporal prior and the geo task: an equal-area grid, a prior checked against an independent count,
fusion rules, and the task on planted worlds where sister species look alike but live apart."""

from __future__ import annotations

import dataclasses
import datetime as dt
import doctest
import math
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from cladebench import store
from cladebench.evaluate.compare import compare_runs
from cladebench.evaluate.configs import EvalConfig
from cladebench.evaluate.run import format_metrics, run_eval
from cladebench.tasks import get_task
from cladebench.tasks.common import classify
from cladebench.tasks.geo import prior as geo_prior
from cladebench.tasks.geo.config import GeoPriorConfig
from cladebench.tasks.geo.prior import (
    EARTH_RADIUS_KM,
    EqualAreaGrid,
    PriorSettings,
    choose_image_weight,
    embedding_sum,
    fit_prior,
    fused_argmax,
    log_probabilities,
    season_bins,
    year_fractions,
)
from cladebench.tasks.geo.split import assign_parts
from cladebench.tasks.geo.task import geo, geo_metrics, per_image_values
from cladebench.taxonomy import RANK_COLUMNS, Lineage

DIM = 32
MODEL = "planted-model"


@pytest.fixture(autouse=True)
def _own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Text embeddings are cached by model id and labels; planted worlds reuse both with other vectors.
    monkeypatch.setenv("CLADEBENCH_CACHE_DIR", str(tmp_path / "cache"))


# --- the grid and the season -------------------------------------------------------------------------


def test_grid_cells_have_equal_area_and_cover_the_sphere() -> None:
    grid = EqualAreaGrid.build(3000.0)
    areas = grid.cell_areas_km2()
    assert areas.sum() == pytest.approx(4 * math.pi * EARTH_RADIUS_KM**2, rel=1e-12)
    assert np.ptp(areas) < 1e-9 * areas.mean()
    assert areas[0] == pytest.approx(3000.0**2, rel=0.1)
    # Points uniform on the sphere fall into cells in proportion to their areas.
    rng = np.random.default_rng(0)
    n = 400_000
    lat = np.degrees(np.arcsin(rng.uniform(-1, 1, n)))
    lon = rng.uniform(-180, 180, n)
    counts = np.bincount(grid.cells(lat, lon), minlength=grid.n_cells)
    expected = n * areas / areas.sum()
    assert np.all(np.abs(counts - expected) < 5 * np.sqrt(expected))


def test_grid_edges_and_invalid_points() -> None:
    grid = EqualAreaGrid.build(500.0)
    cells = grid.cells(np.array([90.0, -90.0, 0.0, 0.0, np.nan, 91.0, 10.0]),
                       np.array([0.0, 0.0, 180.0, -180.0, 0.0, 0.0, np.nan]))
    assert cells[0] == grid.n_cells - grid.cells_per_band[-1] + grid.cells_per_band[-1] // 2
    assert cells[1] == grid.cells_per_band[0] // 2
    assert 0 <= cells[2] < grid.n_cells and 0 <= cells[3] < grid.n_cells
    assert cells[4:].tolist() == [-1, -1, -1]
    # Cells are near-square: a band is about as tall as its cells are wide at the equator.
    equator = len(grid.cells_per_band) // 2
    width = 2 * math.pi * EARTH_RADIUS_KM / grid.cells_per_band[equator]
    assert width == pytest.approx(500.0, rel=0.05)


def test_year_fractions_and_season_bins() -> None:
    dates = pa.array([dt.date(2023, 1, 1), dt.date(2024, 12, 31), dt.date(2023, 12, 31), None,
                      dt.date(2023, 7, 2)], pa.date32())
    fractions = year_fractions(dates)
    assert fractions[0] == 0.0 and fractions[1] == pytest.approx(365 / 366) and fractions[2] == pytest.approx(364 / 365)
    assert np.isnan(fractions[3])
    assert season_bins(fractions, 12).tolist() == [0, 11, 11, -1, 5]
    assert season_bins(np.array([1.0, -0.1]), 4).tolist() == [-1, -1]


# --- the prior against an independent count ----------------------------------------------------------


def independent_prior(fit: list[tuple[int, float, float, float]], query: tuple[float, float, float],
                      settings: PriorSettings, n_labels: int) -> list[float]:
    """The module docstring's formulas, one query at a time, with dictionaries and loops."""
    fine, coarse = EqualAreaGrid.build(settings.cell_km), EqualAreaGrid.build(settings.neighbourhood_km)
    alpha, bins = settings.alpha, settings.season_bins

    def cell(grid: EqualAreaGrid, lat: float, lon: float) -> int:
        return int(grid.cells(np.array([lat]), np.array([lon]))[0])

    def season(fraction: float) -> int:
        return -1 if math.isnan(fraction) else math.floor(fraction * bins)

    label_count = Counter(s for s, *_ in fit)
    total = sum(label_count.values())
    glob = [(label_count[s] + 1) / (total + n_labels) for s in range(n_labels)]
    lat, lon, fraction = query
    spatial = [1.0] * n_labels
    if not (math.isnan(lat) or math.isnan(lon)):
        c_fine, c_coarse = cell(fine, lat, lon), cell(coarse, lat, lon)
        in_coarse = Counter(s for s, la, lo, _ in fit if not math.isnan(la) and cell(coarse, la, lo) == c_coarse)
        in_fine = Counter(s for s, la, lo, _ in fit if not math.isnan(la) and cell(fine, la, lo) == c_fine)
        n_coarse, n_fine = sum(in_coarse.values()), sum(in_fine.values())
        p_coarse = [(in_coarse[s] + alpha * glob[s]) / (n_coarse + alpha) for s in range(n_labels)]
        spatial = [(in_fine[s] + alpha * p_coarse[s]) / (n_fine + alpha) for s in range(n_labels)]
    seasonal = [1.0] * n_labels
    b = season(fraction)
    if b >= 0:
        per_bin = Counter(season(f) for *_, f in fit if not math.isnan(f))
        dated = sum(per_bin.values())
        overall = [(per_bin[k] + 1) / (dated + bins) for k in range(bins)]
        for s in range(n_labels):
            mine = Counter(season(f) for t, *_, f in fit if t == s and not math.isnan(f))
            spread = 0.5 * mine[b] + 0.25 * mine[(b - 1) % bins] + 0.25 * mine[(b + 1) % bins]
            seasonal[s] = (spread + alpha * overall[b]) / (sum(mine.values()) + alpha)
    joint = [p * q for p, q in zip(spatial, seasonal, strict=True)]
    return [v / sum(joint) for v in joint]


def test_prior_sums_to_one_and_matches_an_independent_count() -> None:
    nan = float("nan")
    fit = [(0, 10.0, 5.0, 0.10), (0, 10.2, 5.1, 0.15), (1, 10.1, 5.0, 0.60), (1, -30.0, 100.0, 0.62),
           (2, -30.5, 100.2, nan), (2, nan, nan, 0.95), (0, 40.0, -70.0, 0.30), (-1, 10.0, 5.0, 0.1)]
    settings = PriorSettings(cell_km=300.0, neighbourhood_km=1500.0, season_bins=4, alpha=2.0)
    labels, lat, lon, frac = (np.array(column) for column in zip(*fit, strict=True))
    prior = fit_prior(labels, lat, lon, frac, n_labels=3, settings=settings)
    queries = [(10.05, 5.05, 0.12), (10.0, 5.0, 0.55), (-30.2, 100.1, 0.9), (11.5, 6.0, 0.2), (60.0, 30.0, 0.4),
               (nan, nan, 0.6), (10.0, 5.0, nan), (nan, nan, nan)]
    q_lat, q_lon, q_frac = (np.array(column) for column in zip(*queries, strict=True))
    probs, reasons = prior.probabilities(q_lat, q_lon, q_frac)
    assert probs.dtype == np.float32 and np.allclose(probs.sum(axis=1), 1.0, atol=1e-6)
    # the fit row whose label is outside the label set (-1) is left out of every count
    fit_known = [row for row in fit if row[0] >= 0]
    for query, row in zip(queries, probs, strict=True):
        assert row == pytest.approx(independent_prior(fit_known, query, settings, 3), rel=1e-5, abs=1e-7)
    assert reasons == ["none"] * 5 + ["no_location", "no_date", "no_location_no_date"]
    assert probs[-1].tolist() == pytest.approx([1 / 3] * 3)
    assert prior.fit_summary == {"observations": 7, "outside_label_set": 1, "with_place": 6, "with_date": 6,
                                 "occupied_cells": 3, "labels_observed": 3}


def test_prior_is_fast_and_sparse_at_scale() -> None:
    """10k labels x 100k observations fit in well under a few seconds of work and little memory (not timed here:
    a dense cells x labels array would not fit at all)."""
    rng = np.random.default_rng(1)
    n, labels = 100_000, 10_000
    prior = fit_prior(rng.integers(0, labels, n), rng.uniform(-60, 70, n), rng.uniform(-180, 180, n),
                      rng.uniform(0, 1, n), n_labels=labels)
    assert prior.cell_counts.nnz <= n and prior.grid.n_cells > 50_000
    probs, _ = prior.probabilities(rng.uniform(-60, 70, 500), rng.uniform(-180, 180, 500), rng.uniform(0, 1, 500))
    assert probs.shape == (500, labels) and np.allclose(probs.sum(axis=1), 1.0, atol=1e-4)


def test_docstring_example_runs() -> None:
    result = doctest.testmod(geo_prior, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0


# --- fusion rules ------------------------------------------------------------------------------------


def test_fused_argmax_extremes_and_ties() -> None:
    rng = np.random.default_rng(2)
    image = rng.dirichlet(np.ones(6), size=50).astype(np.float32)
    prior = rng.dirichlet(np.ones(6), size=50).astype(np.float32)
    log_image, log_prior = log_probabilities(image), log_probabilities(prior)
    assert np.array_equal(fused_argmax(log_image, log_prior, 1.0), image.argmax(axis=1))
    assert np.array_equal(fused_argmax(log_image, log_prior, 0.0), prior.argmax(axis=1))
    uniform = log_probabilities(np.full((50, 6), 1 / 6, dtype=np.float32))
    assert np.array_equal(fused_argmax(log_image, uniform, 0.0), image.argmax(axis=1))  # ties go to the image
    allowed = np.zeros((50, 6), dtype=bool)
    allowed[:, 3:5] = True
    assert set(fused_argmax(log_image, log_prior, 0.4, allowed).tolist()) <= {3, 4}
    # An underflowed image probability stays finite, so a = 0 is not poisoned by 0 x log 0.
    assert np.isfinite(log_probabilities(np.array([[0.0, 1.0]], dtype=np.float32))).all()


def test_image_weight_is_chosen_by_top1_with_ties_to_the_image() -> None:
    log_image = np.log(np.array([[0.6, 0.4], [0.6, 0.4], [0.4, 0.6]], dtype=np.float32))
    informative = np.log(np.array([[0.1, 0.9], [0.1, 0.9], [0.5, 0.5]], dtype=np.float32))
    targets = np.array([1, 1, 1])
    weights = np.linspace(0, 1, 11)
    chosen, top1 = choose_image_weight(log_image, informative, targets, weights)
    assert top1[-1] == pytest.approx(1 / 3) and top1.max() == 1.0
    assert chosen == max(w for w, t in zip(weights, top1, strict=True) if t == 1.0)
    useless = np.log(np.full((3, 2), 0.5, dtype=np.float32))
    assert choose_image_weight(log_image, useless, targets, weights)[0] == 1.0
    with pytest.raises(ValueError, match="no validation row"):
        choose_image_weight(log_image, useless, np.array([-1, -1, -1]), weights)


def test_embedding_sum_moves_an_ambiguous_image_to_the_located_species() -> None:
    texts = np.eye(4, dtype=np.float32)[:2] + np.array([0, 0, 1, 0], dtype=np.float32)  # two sisters share axis 2
    image = np.array([[0.5, 0.5, 1.0, 0.0], [0.5, 0.5, 1.0, 0.0]], dtype=np.float32) * 7.0  # raw, halfway between
    location = np.array([[0.0, 3.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]], dtype=np.float32)  # points at species 1
    summed = embedding_sum(image, location, np.array([True, False]))
    unit = image[0] / np.linalg.norm(image[0])
    assert summed[0] == pytest.approx(unit + np.array([0, 1, 0, 0]))
    assert summed[1] == pytest.approx(unit)
    probs = classify(summed, texts, 100.0)
    assert probs[0].argmax() == 1 and probs[1, 0] == pytest.approx(probs[1, 1])
    with pytest.raises(ValueError, match="one embedding space"):
        embedding_sum(image, location[:, :3], np.array([True, True]))


def test_split_keeps_groups_together_and_depends_only_on_seed_and_key() -> None:
    groups = [f"obs-{i // 3}" for i in range(3000)]
    parts = assign_parts(groups, (0.5, 0.25, 0.25), seed=4)
    for g in set(groups):
        assert len({int(parts[i]) for i in range(3000) if groups[i] == g}) == 1
    shares = np.bincount(parts, minlength=3) / 3000
    assert shares == pytest.approx([0.5, 0.25, 0.25], abs=0.05)
    alone = assign_parts(groups[:30], (0.5, 0.25, 0.25), seed=4)
    assert np.array_equal(alone, parts[:30])
    assert not np.array_equal(assign_parts(groups, (0.5, 0.25, 0.25), seed=5), parts)


# --- a planted world ---------------------------------------------------------------------------------


@dataclass
class PlantedEncoder:
    """A text tower that maps each label string to a planted vector."""

    vectors: dict[str, np.ndarray]
    model_id: str = MODEL
    revision: str = "r1"
    logit_scale: float = 30.0
    precision: str = "fp32"

    def encode_texts(self, texts: list[str], batch_size: int = 256) -> np.ndarray:
        return np.stack([self.vectors[t] for t in texts]).astype(np.float32)

    def describe(self) -> dict[str, Any]:
        return {"model_id": self.model_id, "revision": self.revision, "precision": self.precision}


@dataclass
class World:
    table: pa.Table
    """Rows as written (with the planted embedding column)."""
    encoder: PlantedEncoder
    species: list[Lineage]
    """Lineage of each species; sisters are 2k and 2k + 1."""
    boxes: list[tuple[float, float]]
    """Centre (lat, lon) of each species' range, a box of +-2 degrees."""
    text: np.ndarray
    """Unit text vector of each species."""


def lineage_of(s: int) -> Lineage:
    genus = f"Genus{'abcdefghij'[s // 2]}"
    return Lineage.from_names("Animalia", "Chordata", "Aves", "Passeriformes", "Paridae", genus,
                              ("alpha", "beta")[s % 2])


def planted_world(*, n_genera: int = 8, observations: int = 36, noise: float = 0.55, seed: int = 0) -> World:
    """Sister species share most of their text direction (the image confuses them) but live in disjoint
    boxes 15 degrees apart and peak in opposite seasons; genera sit at different longitudes."""
    rng = np.random.default_rng(seed)
    n_species = 2 * n_genera
    genus_dirs = np.linalg.qr(rng.normal(size=(DIM, DIM)))[0][:, :n_genera].T
    species_dirs = np.linalg.qr(rng.normal(size=(DIM, DIM)))[0][:, :n_species].T
    text = np.stack([genus_dirs[s // 2] + 0.35 * species_dirs[s] for s in range(n_species)])
    text /= np.linalg.norm(text, axis=1, keepdims=True)
    species = [lineage_of(s) for s in range(n_species)]
    boxes = [(20.0 + 15.0 * (s % 2), -150.0 + 35.0 * (s // 2)) for s in range(n_species)]
    rows, vectors = [], []
    for s in range(n_species):
        for o in range(observations):
            lat = boxes[s][0] + rng.uniform(-2, 2)
            lon = boxes[s][1] + rng.uniform(-2, 2)
            peak = 80 if s % 2 == 0 else 260  # day of year
            day = dt.date(2021, 1, 1) + dt.timedelta(days=int((peak + rng.integers(-25, 26)) % 365))
            for i in range(int(rng.integers(1, 3))):
                rows.append({"uuid": f"s{s}-o{o}-i{i}", "source_id": f"obs-{s}-{o}", "latitude": lat,
                             "longitude": lon, "observed_on": day,
                             **dict(zip(RANK_COLUMNS, species[s].names, strict=True))})
                vectors.append(3.0 * (text[s] + noise * rng.normal(size=DIM) / math.sqrt(DIM) * 3.0))
    table = table_of(rows, np.asarray(vectors, dtype=np.float32))
    encoder = PlantedEncoder({lin.label("sci"): text[s] for s, lin in enumerate(species)})
    return World(table=table, encoder=encoder, species=species, boxes=boxes, text=text)


def table_of(rows: list[dict[str, Any]], vectors: np.ndarray) -> pa.Table:
    table = pa.table({
        "uuid": pa.array([r["uuid"] for r in rows], pa.string()),
        "image": pa.array([b"not decoded here"] * len(rows), pa.large_binary()),
        **{c: pa.array([r[c] for r in rows], pa.string()) for c in RANK_COLUMNS},
        "latitude": pa.array([r["latitude"] for r in rows], pa.float64()),
        "longitude": pa.array([r["longitude"] for r in rows], pa.float64()),
        "observed_on": pa.array([r["observed_on"] for r in rows], pa.date32()),
        "source_id": pa.array([r["source_id"] for r in rows], pa.string()),
    })
    field = store.embedding_field("planted", DIM, {"model": MODEL, "revision": "r1"})
    return table.append_column(field, pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), DIM))


def write(table: pa.Table, path: Path) -> Any:
    store.write_dataset(table, path)
    return store.open_dataset(path)


def with_values(table: pa.Table, name: str, values: list[Any]) -> pa.Table:
    index = table.column_names.index(name)
    return table.set_column(index, table.schema.field(name), pa.array(values, table.schema.field(name).type))


CONFIG = GeoPriorConfig(name_style="sci", templates="{c}", prior_cell_km=200.0, prior_neighbourhood_km=1000.0)


@pytest.fixture(scope="module")
def world() -> World:
    return planted_world()


@pytest.fixture(scope="module")
def world_dataset(world: World, tmp_path_factory: pytest.TempPathFactory) -> Any:
    return write(world.table, tmp_path_factory.mktemp("geo") / "world.lance")


@pytest.fixture(scope="module")
def product_run(world: World, world_dataset: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("CLADEBENCH_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
        predictions = geo(world_dataset, world.encoder, CONFIG)
    return predictions, geo_metrics(predictions)


# --- the task ----------------------------------------------------------------------------------------


def test_prior_gain_is_positive_on_a_world_of_separated_sisters(product_run: Any, world: World) -> None:
    predictions, metrics = product_run
    gain = metrics["fused_minus_image_species"]
    assert metrics["image_top1_species"]["value"] < 0.85
    assert metrics["fused_top1_species"]["value"] > metrics["image_top1_species"]["value"] + 0.1
    assert gain["low"] > 0 and gain["p_value"] < 0.01
    assert gain["value"] == pytest.approx(metrics["fused_top1_species"]["value"]
                                          - metrics["image_top1_species"]["value"])
    assert 0.0 <= metrics["image_weight"]["value"] < 1.0
    assert metrics["image_weight"]["n"] == predictions.info["validation"]["scored"]
    table = predictions.table
    assert table.column_names[:9] == ["uuid", "split_group", "true_label", "pred_image", "pred_fused", "scored",
                                      "correct_image", "correct_fused", "prior_fallback"]
    split = predictions.info["split"]
    assert split["test"]["rows"] == table.num_rows
    assert split["fit"]["rows"] + split["validation"]["rows"] + split["test"]["rows"] == world.table.num_rows
    assert split["fit"]["rows"] > 0 and split["sampling_unit"] == "source_id"
    assert predictions.info["prior"]["fit"]["observations"] == split["fit"]["rows"]
    # image predictions are zero-shot's: the planted text vectors, softmax, argmax
    rows = {r["uuid"]: r for r in world.table.to_pylist()}
    labels = predictions.labels
    text = np.stack([world.encoder.vectors[label] for label in labels])
    for row in table.to_pylist()[:40]:
        image = np.asarray(rows[row["uuid"]]["emb_planted"])
        assert row["pred_image"] == labels[int(np.argmax(text @ image))]
    assert set(table.column("prior_fallback").to_pylist()) == {"none"}


def test_groups_never_straddle_the_split(product_run: Any, world: World) -> None:
    predictions, _ = product_run
    test_groups = set(predictions.table.column("split_group").to_pylist())
    test_uuids = set(predictions.table.column("uuid").to_pylist())
    for row in world.table.select(["uuid", "source_id"]).to_pylist():
        assert (row["uuid"] in test_uuids) == (row["source_id"] in test_groups)


def test_weight_is_chosen_on_validation_not_test(product_run: Any, world: World, tmp_path: Path) -> None:
    predictions, metrics = product_run
    test_uuids = set(predictions.table.column("uuid").to_pylist())
    # Move every test observation into its sister's range: the test rows get worse, the weight cannot move.
    latitudes = [
        lat + (15.0 if r["species"] == "alpha" else -15.0) if r["uuid"] in test_uuids else lat
        for r, lat in zip(world.table.to_pylist(), world.table.column("latitude").to_pylist(), strict=True)
    ]
    moved = write(with_values(world.table, "latitude", latitudes), tmp_path / "moved.lance")
    other = geo(moved, world.encoder, CONFIG)
    other_metrics = geo_metrics(other)
    assert other.info["image_weight"] == predictions.info["image_weight"]
    assert other.info["validation"] == predictions.info["validation"]
    assert other.table.column("correct_image").to_pylist() == predictions.table.column("correct_image").to_pylist()
    assert other_metrics["fused_top1_species"]["value"] < metrics["fused_top1_species"]["value"] - 0.1


def test_prior_from_a_separate_dataset_and_shuffled_coordinates(world: World, tmp_path: Path) -> None:
    rng = np.random.default_rng(9)
    fit_world = planted_world(seed=0, observations=36)  # same ranges and seasons, fresh draws below
    fit_table = fit_world.table.set_column(0, "uuid", pa.array(["fit-" + u for u in
                                                                 fit_world.table.column("uuid").to_pylist()]))
    fit_table = fit_table.set_column(fit_table.column_names.index("source_id"), "source_id",
                                     pa.array(["fit-" + u for u in fit_table.column("source_id").to_pylist()]))
    # A few evaluated observations are also in the fit set: they must leave the evaluation.
    leaked = world.table.filter(pa.array([u.endswith("-o0-i0") for u in world.table.column("uuid").to_pylist()]))
    fit_table = pa.concat_tables([fit_table, leaked])
    permutation = rng.permutation(fit_table.num_rows)
    shuffled = fit_table
    for name in ("latitude", "longitude", "observed_on"):
        shuffled = with_values(shuffled, name, [shuffled.column(name).to_pylist()[i] for i in permutation])
    evaluated = write(world.table, tmp_path / "eval.lance")
    honest = write(fit_table, tmp_path / "fit.lance")
    scrambled = write(shuffled, tmp_path / "shuffled.lance")
    config = dataclasses.replace(CONFIG, prior_split=(0.0, 0.5, 0.5))

    good = geo(evaluated, world.encoder, dataclasses.replace(config, prior_dataset=str(tmp_path / "fit.lance")))
    assert good.info["split"]["excluded_as_in_fit_set"] == leaked.num_rows + sum(
        1 for u in world.table.column("uuid").to_pylist() if "-o0-i" in u and not u.endswith("-i0"))
    assert good.info["split"]["prior_fit_source"]["rows"] == fit_table.num_rows
    assert not set(good.table.column("uuid").to_pylist()) & set(leaked.column("uuid").to_pylist())
    good_gain = geo_metrics(good)["fused_minus_image_species"]
    assert good_gain["low"] > 0

    bad = geo(evaluated, world.encoder, dataclasses.replace(config, prior_dataset=str(tmp_path / "shuffled.lance")))
    bad_gain = geo_metrics(bad)["fused_minus_image_species"]
    assert bad.table.column("uuid").to_pylist() == good.table.column("uuid").to_pylist()
    assert abs(bad_gain["value"]) < 0.04 and bad_gain["low"] <= 0.0 <= bad_gain["high"]
    assert honest.count_rows() == scrambled.count_rows()


def test_fit_rows_by_where_clause(world: World, world_dataset: Any) -> None:
    config = dataclasses.replace(CONFIG, prior_fit_where="uuid LIKE '%-i1'", prior_split=(0.0, 0.5, 0.5))
    predictions = geo(world_dataset, world.encoder, config)
    fitted = predictions.info["split"]["prior_fit_source"]
    assert fitted == {"dataset": "the evaluated dataset", "where": "uuid LIKE '%-i1'",
                      "rows": sum(u.endswith("-i1") for u in world.table.column("uuid").to_pylist())}
    # every observation with a second photo is in the fit set, so all its photos leave the evaluation
    assert not any(u.endswith("-i1") for u in predictions.table.column("uuid").to_pylist())
    assert geo_metrics(predictions)["fused_minus_image_species"]["low"] > 0


def test_missing_place_or_date_falls_back_and_is_counted(world: World, tmp_path: Path) -> None:
    rows = world.table.to_pylist()
    kinds = ["none", "no_location", "no_date", "no_location_no_date"]
    kind_of = {r["source_id"]: kinds[int(r["source_id"].rsplit("-", 1)[1]) % 4] for r in rows}
    lat = [None if "location" in kind_of[r["source_id"]] else r["latitude"] for r in rows]
    lon = [None if "location" in kind_of[r["source_id"]] else r["longitude"] for r in rows]
    day = [None if "date" in kind_of[r["source_id"]] else r["observed_on"] for r in rows]
    table = with_values(with_values(with_values(world.table, "latitude", lat), "longitude", lon), "observed_on", day)
    predictions = geo(write(table, tmp_path / "holes.lance"), world.encoder, CONFIG)
    metrics = geo_metrics(predictions)
    out = predictions.table.to_pylist()
    expected = Counter(kind_of[r["split_group"]] for r in out)
    assert predictions.info["test_fallbacks"] == dict(sorted(expected.items()))
    assert [r["prior_fallback"] for r in out] == [kind_of[r["split_group"]] for r in out]
    for kind in kinds[1:]:
        assert metrics[f"prior_fallback_{kind}"]["successes"] == expected[kind]
        assert metrics[f"prior_fallback_{kind}"]["n"] == len(out)
    # no place and no date: a uniform prior, so the fused prediction is the image's
    for row in out:
        if row["prior_fallback"] == "no_location_no_date":
            assert row["pred_fused"] == row["pred_image"]
            assert row["prior_true_prob"] == pytest.approx(1 / len(predictions.labels))
    # the date alone still separates sisters (opposite seasons): rows with a date beat the image on average
    dated = [r for r in out if r["prior_fallback"] == "no_location"]
    assert sum(r["correct_fused"] for r in dated) > sum(r["correct_image"] for r in dated)


def test_embedding_sum_with_planted_location_vectors(world: World, tmp_path: Path) -> None:
    # Image vectors sit on the genus direction only (sisters indistinguishable); the location embedding points
    # at the species' own text vector, except for every fifth observation, which has none.
    rng = np.random.default_rng(3)
    rows = world.table.to_pylist()
    text_of = {lin.label("sci"): world.text[s] for s, lin in enumerate(world.species)}
    vectors, location = [], []
    for r in rows:
        own = text_of[Lineage.from_row(r).label("sci")]
        lineage = Lineage.from_row(r)
        sister = text_of[lineage.replace(species="beta" if lineage.epithet == "alpha" else "alpha").label("sci")]
        vectors.append(5.0 * (own + sister) / 2 + 0.01 * rng.normal(size=DIM))
        has_location = int(r["source_id"].rsplit("-", 1)[1]) % 5 != 0
        location.append((2.0 * own).tolist() if has_location else None)
    table = table_of(rows, np.asarray(vectors, dtype=np.float32))
    table = table.append_column("loc_emb_planted", pa.array(location, pa.list_(pa.float32(), DIM)))
    dataset = write(table, tmp_path / "taxabind.lance")
    predictions = geo(dataset, world.encoder, dataclasses.replace(CONFIG, prior_fusion="embedding_sum"))
    metrics = geo_metrics(predictions)
    out = predictions.table.to_pylist()
    located = [r for r in out if r["prior_fallback"] == "none"]
    assert located and all(r["correct_fused"] for r in located)
    assert all(r["pred_fused"] == r["pred_image"] for r in out if r["prior_fallback"] == "no_location_embedding")
    assert metrics["image_top1_species"]["value"] < 0.7 and metrics["fused_minus_image_species"]["low"] > 0
    assert "image_weight" not in metrics and predictions.info["location_column"] == "loc_emb_planted"
    # the same seed scores the same test rows as the product fusion
    product = geo(dataset, world.encoder, CONFIG)
    assert product.table.column("uuid").to_pylist() == predictions.table.column("uuid").to_pylist()


def test_registered_task_runs_through_run_eval(world: World, world_dataset: Any, tmp_path: Path) -> None:
    @dataclass(frozen=True, kw_only=True)
    class GeoEval(EvalConfig, GeoPriorConfig):
        task: str = "geo"

    task = get_task("geo")
    assert task.config is GeoPriorConfig and task.per_unit is per_image_values
    config = GeoEval(dataset=world_dataset.uri, model=MODEL, out=tmp_path / "run", group_by="none", name_style="sci",
                     templates="{c}", prior_cell_km=200.0, prior_neighbourhood_km=1000.0)
    record, path = run_eval(config, encoder=world.encoder)
    assert path.is_file() and record.metrics["fused_minus_image_species"]["low"] > 0
    assert record.provenance["split"]["sampling_unit"] == "source_id"
    assert record.provenance["task"]["image_weight"] == record.metrics["image_weight"]["value"]
    assert "paired percentile bootstrap" in record.provenance["metrics"]["fused_minus_image_species"]
    assert "image_weight" in format_metrics(record)
    units = per_image_values(record.predictions(path), record.provenance["task"])
    assert set(units) == {f"{kind}_{metric}_species" for kind in ("image", "fused")
                          for metric in ("top1", "hdist1", "mistake_severity")}
    for name, (_, values, *weights) in units.items():  # each is the stored metric, so compare pairs what it says
        if weights and not weights[0].any():  # no mistake at all: no severity, never 0
            assert record.metrics[name]["value"] is None and "no mistakes" in record.metrics[name]["reason"]
            continue
        value = values.sum() / weights[0].sum() if weights else values.mean()  # severity: a ratio over mistakes
        assert value == pytest.approx(record.metrics[name]["value"])
    # The LCA heights against an independent count of shared ranks of the true and fused lineages.
    table = record.predictions(path).to_pylist()
    lineage_by_name = {lineage_of(s).label("sci"): lineage_of(s) for s in range(16)}
    for row in table:
        if row["scored"]:
            truth, fused = lineage_by_name[row["true_label"]], lineage_by_name[row["pred_fused"]]
            shared = next((i for i in range(7) if truth.names[i] != fused.names[i]), 7)
            assert row["lca_height_fused"] == 7 - shared
    assert record.metrics["fused_mistake_severity_species"]["n"] == sum(
        1 for row in table if row["scored"] and not row["correct_fused"])
    # A run without the season term (one bin) compared image by image through the per-unit hook.
    other, other_path = run_eval(dataclasses.replace(config, out=tmp_path / "other", prior_season_bins=1),
                                 encoder=world.encoder)
    comparison = compare_runs([path, other_path], metric="fused_top1_species", n_resamples=500)
    (fused,) = comparison.metrics
    assert fused.columns == ("per-query", "fused_top1_species") and len(fused.differences) == 1
    assert fused.differences[0].paired.difference == pytest.approx(
        other.metrics["fused_top1_species"]["value"] - record.metrics["fused_top1_species"]["value"])
