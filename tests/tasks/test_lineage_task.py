"""Lineage completion on two-organism photos: planted contrastive embeddings with a real tiny text tower, a real
local OpenAI-compatible endpoint for the VLM path, and every number checked against an independent computation."""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pytest

from cladebench import store
from cladebench.errors import CladebenchError, SchemaError, UnknownNameError
from cladebench.metrics import wilson_interval
from cladebench.taxonomy import RANK_COLUMNS, Lineage, Rank

pytest.importorskip("torch")
pytest.importorskip("open_clip")

from cladebench.evaluate.configs import EvalConfig
from cladebench.evaluate.run import run_eval
from cladebench.models import EndpointModel, class_text_embeddings, load_encoder
from cladebench.models.tiny import write_tiny_model
from cladebench.synthetic import make_world
from cladebench.tasks import get_task
from cladebench.tasks.lineage import contrastive as contrastive_module
from cladebench.tasks.lineage.config import LineageConfig
from cladebench.tasks.lineage.metrics import lineage_metrics, per_target_values
from cladebench.tasks.lineage.task import lineage
from cladebench.templates import get_templates
from helpers.lineage_vlm import WORLD, first_difference, hint_of, mode_of, name_at

PHOTOS = 40


# --- independent helpers ---------------------------------------------------------------------------


def organisms(row: dict[str, Any]) -> list[Lineage]:
    return [Lineage.from_row(o) for o in row["organisms"]]


def expected_scores(truth: Lineage, other: Lineage, predicted: dict[int, str | None], asked: range,
                    divergence: int) -> dict[str, Any]:
    """Scores by the module docstring's definitions, written out without the module's code."""
    ranks = list(range(divergence + 1, 7))
    correct = [predicted.get(r) is not None and predicted[r].casefold() == name_at(truth, r).casefold() for r in ranks]
    depth = next((i for i, c in enumerate(correct) if not c), len(ranks))
    named = [r for r in asked if predicted.get(r) is not None]
    named_other = bool(named) and predicted[named[-1]].casefold() == (name_at(other, named[-1]) or "").casefold() \
        and predicted[named[-1]].casefold() != name_at(truth, named[-1]).casefold()
    return {"correct": dict(zip(ranks, correct, strict=True)), "exact": all(correct), "depth": depth,
            "lca": (len(ranks) - depth) / len(ranks), "named_other": named_other}


def check_metric(metrics: dict[str, Any], name: str, values: list[float], proportion: bool = True) -> None:
    estimate = metrics[name]
    assert estimate["n"] == len(values), name
    assert estimate["value"] == pytest.approx(float(np.mean(values))), name
    if proportion:
        low, high = wilson_interval(int(sum(values)), len(values))
        assert (estimate["low"], estimate["high"]) == pytest.approx((low, high)), name


def test_candidate_tree_sorts_like_python_and_spans_are_clades() -> None:
    names = [("Plantae", None, "Liliopsida", None, "Orchidaceae", "Laelia", "rosea"),
             ("Animalia", "Arthropoda", "Insecta", "Lepidoptera", "Erebidae", "Laelia", "rosea"),
             ("Animalia", "Arthropoda", "Insecta", "Lepidoptera", "Erebidae", "Laelia", "rosea"),  # listed twice
             ("Animalia", "Arthropoda", "Insecta", "Lepidoptera", "Erebidae", "Äthria", "zeta"),
             ("Animalia", "Arthropoda", "Insecta", "Hymenoptera", "Apidae", "Apis", "mellifera"),
             ("Animalia", "Chordata", "Aves", "Passeriformes", "Paridae", "Parus", "major"),
             ("Plantae", "Tracheophyta", "Liliopsida", "Asparagales", "Orchidaceae", "Laelia", "anceps"),
             ("Animalia", "Chordata", "Aves", "Passeriformes", "Paridae", "Parus", None)]  # no species: left out
    tree = contrastive_module.CandidateTree([Lineage(n) for n in names], "test")
    complete = sorted({tuple(x or "" for x in Lineage(n).names) for n in names if n[6]})  # species: the binomial
    assert tree.keys == complete and len(tree) == 6 and tree.without_species == 1
    for lineage_names in complete:
        for depth in range(8):
            prefix = lineage_names[:depth]
            lo, hi = tree.span(tuple(x or None for x in prefix))
            assert list(range(lo, hi)) == [i for i, k in enumerate(complete) if k[:depth] == prefix]
    for rank in range(7):  # a run per taxon: its start is where the prefix down to the rank changes
        expected = [i for i, k in enumerate(complete) if i == 0 or k[: rank + 1] != complete[i - 1][: rank + 1]]
        assert tree.starts[rank].tolist() == expected
    probs = np.array([0.1, 0.05, 0.3, 0.25, 0.2, 0.1])  # Animalia 0.7 > Plantae 0.3; Chordata .25 < Arthropoda .45
    chosen = tree.complete(probs, 0, 6, Rank.KINGDOM)
    assert tree.keys[chosen][:2] == ("Animalia", "Arthropoda")


# --- the planted contrastive world -----------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Any:
    root = tmp_path_factory.mktemp("lineage-model")
    return load_encoder("local-dir:" + str(write_tiny_model(root / "tiny", seed=3)), device="cpu")


def independent_text(encoder: Any, lineages: list[Lineage], templates: str = "bioclip") -> dict[tuple, np.ndarray]:
    """CLIP's template ensemble written out: each template encoded, normalised, averaged, normalised."""
    out = {}
    for species in lineages:
        rows = encoder.encode_texts([t.replace("{c}", species.label("taxon")) for t in get_templates(templates)],
                                    batch_size=8)
        rows = rows / np.linalg.norm(rows, axis=1, keepdims=True)
        mean = rows.mean(axis=0)
        out[species.names] = mean / np.linalg.norm(mean)
    return out


@pytest.fixture(scope="module")
def planted(tiny: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Lineage]]:
    """Each photo's vector is solved so that its cosines with the species' text embeddings are planted: organism
    0 highest (1.0), organism 1 next (0.9), every other species low (0 to 0.3)."""
    root = tmp_path_factory.mktemp("lineage-planted")
    world = make_world(WORLD)
    table = world.pair_table(PHOTOS, seed=2)
    pairs = [[Lineage.from_row(o) for o in p] for p in table.column("organisms").to_pylist()]
    species = sorted({lin.names: lin for pair in pairs for lin in pair}.values(), key=lambda s: s.names)
    text = class_text_embeddings(tiny, [s.label("taxon") for s in species], "bioclip")
    index = {s.names: i for i, s in enumerate(species)}
    solve = np.linalg.pinv(text)
    rng = np.random.default_rng(7)
    vectors = []
    for first, second in pairs:
        wanted = rng.uniform(0.0, 0.3, len(species))
        wanted[index[first.names]], wanted[index[second.names]] = 1.0, 0.9
        vectors.append(solve @ wanted)
    vectors = np.asarray(vectors, dtype=np.float32)
    field = store.embedding_field("emb_tiny", vectors.shape[1], {"model": tiny.model_id, "revision": tiny.revision})
    table = table.append_column(field, pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()),
                                                                         vectors.shape[1]))
    path = root / "pairs.lance"
    store.write_dataset(table, path)
    return path, species


def test_planted_answers_hint_completes_every_target_and_nohint_one_per_photo(planted, tiny) -> None:
    path, _ = planted
    predictions = lineage(store.open_dataset(path), tiny, LineageConfig(logit_scale="1000"))
    metrics = lineage_metrics(predictions)
    rows = store.read(store.open_dataset(path), columns=["uuid", "organisms"]).to_pylist()
    divergences = [first_difference(*organisms(r)) for r in rows]
    scored_photos = sum(d < 6 for d in divergences)
    assert predictions.table.num_rows == 2 * PHOTOS
    assert predictions.info["targets"]["scored"] == 2 * scored_photos
    assert predictions.info["targets"]["nothing_below_hint"] == 2 * (PHOTOS - scored_photos) > 0
    assert predictions.info["conditions"] == ["hint", "nohint"]
    # The hint leaves one organism's clade: the planted species wins everywhere.
    assert metrics["hint_exact"]["value"] == 1.0 and metrics["hint_exact"]["n"] == 2 * scored_photos
    assert metrics["hint_lca_distance"]["value"] == 0.0 and metrics["hint_named_other"]["value"] == 0.0
    # Without it both targets get organism 0: right for one, the other organism for the other.
    assert metrics["nohint_exact"]["value"] == 0.5 and metrics["nohint_named_other"]["value"] == 0.5
    assert metrics["nohint_hint_agreement"]["value"] == 0.5 and metrics["nohint_lca_distance"]["value"] == 0.5
    assert metrics["hint_depth"]["value"] > metrics["nohint_depth"]["value"]
    table = predictions.table.to_pylist()
    for row in table:
        if row["scored"]:
            assert row["nohint_exact"] == (row["target"] == 0) and row["nohint_named_other"] == (row["target"] == 1)
        else:
            assert row["divergence_rank"] == "species" and row["hint_status"] == "nothing_to_complete"
            assert row["hint_exact"] is None and row["hint_pred_species"] is None
    # Breakdowns: one group per divergence rank with something below it, n = its scored targets.
    for rank in {RANK_COLUMNS[d] for d in divergences if d < 6}:
        n = 2 * sum(RANK_COLUMNS[d] == rank for d in divergences)
        assert metrics[f"divergence={rank}/hint_exact"]["n"] == n
        assert metrics[f"divergence={rank}/nohint_exact"]["value"] == 0.5
    assert not any(k.startswith("divergence=species/") for k in metrics)
    pairs = defaultdict(int)
    for r, d in zip(rows, divergences, strict=True):
        if d < 6:
            pairs["|".join(sorted(lin.names[0] for lin in organisms(r)))] += 2
    assert {k.split("/")[0] for k in metrics if k.startswith("kingdom_pair=")} == {f"kingdom_pair={p}" for p in pairs}
    for pair, n in pairs.items():
        assert metrics[f"kingdom_pair={pair}/hint_exact"]["n"] == n


def brute_force(image: np.ndarray, truth: Lineage, prefix_len: int, candidates: list[Lineage],
                text: dict[tuple, np.ndarray], scale: float) -> Lineage:
    """Softmax over the candidates under the prefix, then per rank the child with the most mass (dict sums)."""
    under = [c for c in candidates if c.names[:prefix_len] == truth.names[:prefix_len]]
    image = image / np.linalg.norm(image)
    logits = scale * np.array([float(image @ text[c.names]) for c in under])
    probs = np.exp(logits - logits.max())
    probs /= probs.sum()
    chosen = list(zip(under, probs, strict=True))
    for rank in range(prefix_len, 7):
        mass: dict[str, float] = defaultdict(float)
        for candidate, p in chosen:
            mass[candidate.names[rank]] += p
        best = max(mass, key=mass.get)
        chosen = [(c, p) for c, p in chosen if c.names[rank] == best]
    return chosen[0][0]


def test_predictions_and_metrics_equal_an_independent_computation(planted, tiny) -> None:
    path, species = planted
    dataset = store.open_dataset(path)
    predictions = lineage(dataset, tiny, LineageConfig())  # the learned scale: a flat softmax, mass matters
    metrics = lineage_metrics(predictions)
    assert predictions.info["logit_scale"] == pytest.approx(tiny.logit_scale)
    assert predictions.labels == [s.label("taxon") for s in species]
    text = independent_text(tiny, species)
    rows = {r["uuid"]: r for r in store.read(dataset, columns=["uuid", "organisms", "emb_tiny"]).to_pylist()}
    expected: dict[str, list[float]] = defaultdict(list)
    per_rank: dict[str, list[float]] = defaultdict(list)
    for row in predictions.table.to_pylist():
        pair = organisms(rows[row["uuid"]])
        truth, other = pair[row["target"]], pair[1 - row["target"]]
        divergence = first_difference(truth, other)
        assert row["hint"] == hint_of(truth, divergence)
        assert row["kingdom_pair"] == "|".join(sorted((truth.names[0], other.names[0])))
        assert row["true_species"] == name_at(truth, 6) and row["other_species"] == name_at(other, 6)
        if divergence == 6:
            continue
        image = np.asarray(rows[row["uuid"]]["emb_tiny"], dtype=np.float64)
        for condition, prefix in (("hint", divergence + 1), ("nohint", 0)):
            best = brute_force(image, truth, prefix, species, text, tiny.logit_scale)
            predicted = {r: name_at(best, r) for r in range(prefix, 7)}
            assert [row[f"{condition}_pred_{c}"] for c in RANK_COLUMNS] == [predicted.get(r) for r in range(7)]
            scores = expected_scores(truth, other, predicted, range(prefix, 7), divergence)
            assert row[f"{condition}_depth"] == scores["depth"]
            expected[f"{condition}_exact"].append(scores["exact"])
            expected[f"{condition}_depth"].append(scores["depth"])
            expected[f"{condition}_lca_distance"].append(scores["lca"])
            expected[f"{condition}_named_other"].append(scores["named_other"])
            for rank, hit in scores["correct"].items():
                per_rank[f"{condition}_accuracy_{RANK_COLUMNS[rank]}"].append(hit)
        expected["nohint_hint_agreement"].append(all(
            row["nohint_pred_" + RANK_COLUMNS[r]] == truth.names[r] for r in range(divergence + 1)))
    for name, values in {**expected, **per_rank}.items():
        check_metric(metrics, name, values, proportion=not name.endswith(("depth", "lca_distance")))
    assert metrics["hint_exact"]["value"] >= metrics["nohint_exact"]["value"]
    # Means are bootstrapped over photos: the interval holds the mean, and n counts targets.
    assert metrics["hint_depth"]["low"] <= metrics["hint_depth"]["value"] <= metrics["hint_depth"]["high"]
    assert "groups" in metrics["hint_depth"]["interval"]


class CountingEncoder:
    """The tiny encoder, counting the texts it is asked to encode."""

    def __init__(self, encoder: Any) -> None:
        self._encoder = encoder
        self.texts = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._encoder, name)

    def encode_texts(self, texts: list[str], **kwargs: Any) -> np.ndarray:
        self.texts += len(texts)
        return self._encoder.encode_texts(texts, **kwargs)


def write_taxonomy(path: Path, species: list[Lineage]) -> list[Lineage]:
    """The benchmark's species, a fake sister species in each of their genera, and a whole fake kingdom."""
    extra = [s.replace(species="zzsister") for s in {s.names[:6]: s for s in species}.values()]
    extra += [Lineage.from_names("Zzkingdom", f"Phyl{i % 3}", "Cla", f"Ord{i % 5}", "Fam", f"Gen{i % 11}",
                                 f"ep{i}") for i in range(300)]
    everything = species + extra
    table = {c: [lin.names[r] for lin in everything] for r, c in enumerate(RANK_COLUMNS)}
    pacsv.write_csv(pa.table(table), path)
    return everything


def test_a_taxonomy_file_encodes_only_the_blocks_under_the_hints(planted, tiny, tmp_path, monkeypatch) -> None:
    path, species = planted
    monkeypatch.setenv("CLADEBENCH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(contrastive_module, "TEXT_BLOCK", 16)
    taxonomy = write_taxonomy(tmp_path / "taxonomy.csv", species)
    counting = CountingEncoder(tiny)
    config = LineageConfig(lineage_candidates=str(tmp_path / "taxonomy.csv"), conditions="hint", templates="{c}",
                           logit_scale="1000")
    predictions = lineage(store.open_dataset(path), counting, config)
    label_set = predictions.info["label_set"]
    assert label_set["size"] == len(taxonomy) and label_set["source"] == str(tmp_path / "taxonomy.csv")
    # The fake kingdom sorts last: at most the block it shares with real species is encoded.
    assert counting.texts == label_set["species_text_encoded"] <= len(taxonomy) - 300 + contrastive_module.TEXT_BLOCK
    assert predictions.labels == []
    table = predictions.table.to_pylist()
    scored = [r for r in table if r["scored"]]
    text = independent_text(tiny, taxonomy, "{c}")
    rows = {r["uuid"]: r for r in store.read(store.open_dataset(path), columns=["uuid", "organisms", "emb_tiny"])
            .to_pylist()}
    for row in scored:
        pair = organisms(rows[row["uuid"]])
        truth = pair[row["target"]]
        prefix = first_difference(*pair) + 1
        under = [t for t in taxonomy if t.names[:prefix] == truth.names[:prefix]]
        assert row["hint_candidates"] == len(under) and row["hint_true_in_candidates"]
        best = brute_force(np.asarray(rows[row["uuid"]]["emb_tiny"]), truth, prefix, taxonomy, text, 1000.0)
        assert row["hint_pred_species"] == name_at(best, 6)
    # Scoring in tiny chunks changes nothing: no images x candidates matrix is needed whole.
    monkeypatch.setattr(contrastive_module, "CHUNK_CELLS", 7)
    again = lineage(store.open_dataset(path), counting, config)
    assert again.table.equals(predictions.table)
    # Without a hint every candidate is needed once; the blocks already encoded come from the cache.
    before = counting.texts
    both = lineage(store.open_dataset(path), counting, dataclasses.replace(config, conditions="both"))
    assert both.info["label_set"]["species_text_encoded"] == len(taxonomy)
    assert counting.texts - before == len(taxonomy) - label_set["species_text_encoded"]
    assert both.table.column("nohint_candidates").to_pylist().count(len(taxonomy)) == len(scored)


def test_targets_outside_the_taxonomy_are_scored_wrong_and_counted(planted, tiny, tmp_path, monkeypatch) -> None:
    path, species = planted
    monkeypatch.setenv("CLADEBENCH_CACHE_DIR", str(tmp_path / "cache"))
    taxonomy = write_taxonomy(tmp_path / "taxonomy.csv", [species[0]])  # one benchmark species, its sister, fakes
    predictions = lineage(store.open_dataset(path), tiny, LineageConfig(lineage_candidates=str(tmp_path /
                                                                                                 "taxonomy.csv")))
    table = predictions.table.to_pylist()
    rows = {r["uuid"]: organisms(r) for r in store.read(store.open_dataset(path), columns=["uuid", "organisms"])
            .to_pylist()}

    def has_candidates(row: dict[str, Any]) -> bool:
        pair = rows[row["uuid"]]
        depth = first_difference(*pair) + 1
        return any(t.names[:depth] == pair[row["target"]].names[:depth] for t in taxonomy)

    outside = [r for r in table if r["scored"] and not has_candidates(r)]
    assert outside and all(r["hint_status"] == "no_candidates" and r["hint_exact"] is False
                           and r["hint_candidates"] == 0 and r["hint_true_in_candidates"] is False for r in outside)
    assert predictions.info["statuses"]["hint"]["no_candidates"] == len(outside)
    assert lineage_metrics(predictions)["hint_exact"]["n"] == sum(r["scored"] for r in table)


def test_bad_input_is_refused_or_counted(planted, tiny, tmp_path) -> None:
    path, _ = planted
    table = store.read(store.open_dataset(path))
    organisms_column = table.column("organisms").to_pylist()
    organisms_column[0] = organisms_column[0][:1]  # a photo with one organism: skipped, counted
    table = table.set_column(table.column_names.index("organisms"), "organisms",
                             pa.array(organisms_column, table.schema.field("organisms").type))
    stated = table.column("divergence_rank").to_pylist()
    stated[1] = "kingdom" if stated[1] != "kingdom" else "phylum"
    table = table.set_column(table.column_names.index("divergence_rank"), "divergence_rank", pa.array(stated))
    store.write_dataset(table, tmp_path / "bad.lance")
    predictions = lineage(store.open_dataset(tmp_path / "bad.lance"), tiny, LineageConfig())
    assert predictions.info["targets"]["rows_skipped"] == {"not_two_organisms": 1}
    assert predictions.info["targets"]["divergence_column_disagreements"] == 1
    assert predictions.table.num_rows == 2 * (PHOTOS - 1)
    store.write_dataset(table.drop_columns(["organisms"]), tmp_path / "flat.lance")
    with pytest.raises(SchemaError, match="organisms"):
        lineage(store.open_dataset(tmp_path / "flat.lance"), tiny, LineageConfig())
    with pytest.raises(CladebenchError, match="lineage candidates"):
        lineage(store.open_dataset(path), tiny, LineageConfig(lineage_candidates=str(tmp_path / "taxa.txt")))
    with pytest.raises(CladebenchError, match="needs a model"):
        lineage(store.open_dataset(path), None, LineageConfig())


@dataclasses.dataclass(frozen=True, kw_only=True)
class LineageEvalConfig(EvalConfig, LineageConfig):
    """What `cladebench eval --task lineage` gives the task once the command carries these fields."""

    task: str = "lineage"


def test_registered_and_run_through_run_eval(planted, tiny, tmp_path) -> None:
    path, _ = planted
    task = get_task("lineage")
    assert task.config is LineageConfig and task.uses_encoder and task.per_unit is per_target_values
    record, run_path = run_eval(LineageEvalConfig(dataset=str(path), model=tiny.model_id, out=tmp_path / "run",
                                                  group_by="none", logit_scale="1000"), encoder=tiny)
    assert record.metrics["hint_exact"]["value"] == 1.0
    definitions = record.provenance["metrics"]
    assert "bootstrap over photos" in definitions["hint_depth"] and "Wilson" in definitions["nohint_accuracy_species"]
    assert record.provenance["prompts"]["name_style"] == "taxon"
    assert record.provenance["task"]["conditions"] == ["hint", "nohint"]
    table = record.predictions(run_path)
    assert table.num_rows == 2 * PHOTOS and record.provenance["dataset"]["evaluated_rows"] == PHOTOS
    values = per_target_values(table, record.provenance["task"])
    keys, exact = values["hint_exact"]
    assert len(set(keys)) == len(keys) == record.metrics["hint_exact"]["n"]
    assert exact.mean() == record.metrics["hint_exact"]["value"]
    assert values["nohint_accuracy_species"][1].mean() == record.metrics["nohint_accuracy_species"]["value"]


# --- the VLM path against a real local endpoint ----------------------------------------------------


def test_vlm_answers_in_every_shape_are_parsed_scored_and_counted(lineage_photos, lineage_endpoint, tmp_path,
                                                                  monkeypatch) -> None:
    path, known, corrupt_uuid = lineage_photos
    monkeypatch.setenv("CLADEBENCH_CACHE_DIR", str(tmp_path / "cache"))
    model = EndpointModel.from_name(f"openai-compatible:tiny-vlm@http://127.0.0.1:{lineage_endpoint.server_address[1]}/v1")
    config = LineageConfig(conditions="both", vlm_concurrency=4)
    predictions = lineage(store.open_dataset(path), model, config)
    metrics = lineage_metrics(predictions)
    assert all(r["response_format"] == {"type": "json_object"} for r in lineage_endpoint.requests)
    prompts = {next(c["text"] for c in r["messages"][0]["content"] if c["type"] == "text")
               for r in lineage_endpoint.requests}
    first = next(pair for pair in known.values() if first_difference(*pair) < 5)
    divergence = first_difference(*first)
    below = RANK_COLUMNS[divergence + 1:]
    words = below[0] if len(below) == 1 else ", ".join(below[:-1]) + " and " + below[-1]
    schema = "{" + ", ".join(f'"{r}": "..."' for r in below) + "}"
    assert (f"One organism in this photo belongs to {hint_of(first[0], divergence)}. Name its {words}. Answer with "
            f"only a JSON object of the form {schema}, using scientific names (the species as a binomial, Genus "
            "species).") in prompts
    by_uuid = {u: d for d, u in zip(known, store.read(store.open_dataset(path), columns=["uuid"]).column(0)
                                                .to_pylist(), strict=True)}
    expected: dict[str, list[float]] = defaultdict(list)
    statuses = {0: "json", 1: "fields", 2: "json_embedded", 3: "unparseable", 4: "json"}
    for row in predictions.table.to_pylist():
        digest = by_uuid[row["uuid"]]
        pair = known[digest]
        truth, other = pair[row["target"]], pair[1 - row["target"]]
        divergence = first_difference(truth, other)
        if divergence == 6:
            assert row["hint_status"] == "nothing_to_complete" and not row["scored"]
            continue
        if row["uuid"] == corrupt_uuid:
            assert row["hint_status"] == row["nohint_status"] == "bad_image" and row["hint_exact"] is False
            assert row["hint_answer"].startswith("bad_image")
            given = {"hint": {}, "nohint": {}}
        else:
            assert row["hint_status"] == statuses[mode_of(known, digest)] and row["nohint_status"] == "fields"
            given = {"hint": lineage_endpoint.answers[(digest, row["target"])],
                     "nohint": lineage_endpoint.answers[(digest, None)]}
            assert row["hint_answer"] and row["nohint_answer"]
        for condition, asked in (("hint", range(divergence + 1, 7)), ("nohint", range(7))):
            scores = expected_scores(truth, other, given[condition], asked, divergence)
            expected[f"{condition}_exact"].append(scores["exact"])
            expected[f"{condition}_depth"].append(scores["depth"])
            expected[f"{condition}_lca_distance"].append(scores["lca"])
            expected[f"{condition}_named_other"].append(scores["named_other"])
            expected[f"{condition}_unparseable"].append(row[f"{condition}_status"] == "unparseable")
            for rank, hit in scores["correct"].items():
                expected[f"{condition}_accuracy_{RANK_COLUMNS[rank]}"].append(hit)
    for name, values in expected.items():
        check_metric(metrics, name, values, proportion=not name.endswith(("depth", "lca_distance")))
    answered = [d for d in known if first_difference(*known[d]) < 6 and d != by_uuid[corrupt_uuid]]
    modes = [mode_of(known, d) for d in answered]
    assert metrics["hint_unparseable"]["successes"] == 2 * modes.count(3) > 0
    assert metrics["hint_named_other"]["successes"] == 2 * modes.count(4) > 0
    assert metrics["nohint_named_other"]["successes"] == len(answered)  # target 1 of every answered photo
    # Questions: one per scored target with the hint, one per photo without; the corrupt image is never sent.
    assert len(lineage_endpoint.requests) == 3 * len(answered)
    assert predictions.info["questions"] == 3 * (len(answered) + 1)
    assert predictions.info["answered"] == 3 * len(answered) and predictions.info["cached"] == 0
    assert predictions.info["statuses"]["hint"]["bad_image"] == 2 and predictions.info["statuses"]["nohint"][
        "bad_image"] == 2

    # A rerun is served from the cache; JSON mode off sends no response_format and parses the same answers.
    asked_before = len(lineage_endpoint.requests)
    again = lineage(store.open_dataset(path), model, config)
    assert len(lineage_endpoint.requests) == asked_before and again.info["cached"] == again.info["answered"]
    assert lineage_metrics(again) == metrics
    plain = lineage(store.open_dataset(path), model, dataclasses.replace(config, vlm_json=False, conditions="auto"))
    assert all("response_format" not in r for r in lineage_endpoint.requests[asked_before:])
    assert plain.info["conditions"] == ["hint"] and "nohint_exact" not in plain.table.column_names
    assert lineage_metrics(plain)["hint_exact"] == metrics["hint_exact"]


def test_conditions_picks_which_conditions_run(planted, tiny) -> None:
    path, _ = planted
    both = lineage(store.open_dataset(path), tiny, LineageConfig(logit_scale="1000", conditions="both"))
    alone = lineage(store.open_dataset(path), tiny, LineageConfig(logit_scale="1000", conditions="nohint"))
    assert alone.info["conditions"] == ["nohint"]
    assert not any(c.startswith("hint_") for c in alone.table.column_names)
    # The no-hint condition alone scores as it does beside the hinted one (same targets, same ranks).
    assert lineage_metrics(alone) == {k: v for k, v in lineage_metrics(both).items() if "nohint_" in k}


def test_an_unknown_conditions_value_is_refused_with_the_closest() -> None:
    with pytest.raises(UnknownNameError, match=r"unknown --conditions value 'nohnit'.*Did you mean 'nohint'") as caught:
        LineageConfig(conditions="nohnit")  # type: ignore[arg-type]
    assert caught.value.exit_code == 2


def test_vlm_prompts_are_checked(lineage_photos, tmp_path) -> None:
    path, _, _ = lineage_photos
    model = EndpointModel.from_name("openai-compatible:tiny-vlm@http://127.0.0.1:9/v1")
    with pytest.raises(CladebenchError, match="must give the hint"):
        lineage(store.open_dataset(path), model, LineageConfig(lineage_prompt="Name its {ranks}."))
    with pytest.raises(CladebenchError, match="may use"):
        lineage(store.open_dataset(path), model, LineageConfig(lineage_nohint_prompt="{hint}: {ranks}"))
