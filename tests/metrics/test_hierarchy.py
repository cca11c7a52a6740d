"""LCA heights, mistake severity and hierarchical distance@k against hand-made cases and an independent count
(Bertinetto et al., CVPR 2020: severity is the mean top-1 LCA height over mistakes; hdist@k the mean over images
of the mean height of the top k)."""

from __future__ import annotations

import numpy as np
import pytest

from cladebench.metrics import hierarchy_summary, lca_height, lca_heights, severity_metrics
from cladebench.metrics.hierarchy import hierarchical_distance, mistake_severity
from cladebench.taxonomy import Lineage, Rank

ROOTED = [
    Lineage.from_names("Animalia", "Chordata", "Aves", "Passeriformes", "Paridae", "Parus", "major"),  # 0 truth
    Lineage.from_names("Animalia", "Chordata", "Aves", "Passeriformes", "Paridae", "Parus", "minor"),  # 1 sister
    Lineage.from_names("Animalia", "Arthropoda", "Insecta", "Lepidoptera", "Erebidae", "Laelia", "rosea"),  # 2
    Lineage.from_names("Plantae", "Tracheophyta", "Liliopsida", "Asparagales", "Orchidaceae", "Laelia", "rosea"),
    Lineage.from_names("Animalia", "Chordata", "Aves", "Passeriformes", "Corvidae", "Corvus", "corax"),  # 4
]
"""Seven ranks under one root: the truth, its sister species, another phylum, another kingdom, another family."""


def test_heights_of_the_hand_made_cases() -> None:
    truth = ROOTED[0]
    assert lca_height(truth, truth, "species") == 0
    assert lca_height(truth, ROOTED[1], "species") == 1  # sister species: the LCA is the genus
    assert lca_height(truth, ROOTED[4], "species") == 3  # same order, another family
    assert lca_height(truth, ROOTED[2], "species") == 6  # same kingdom, another phylum
    assert lca_height(truth, ROOTED[3], "species") == 7  # across kingdoms: the root
    # At genus rank heights count from the genus: another family of the same order is 2 ranks up.
    assert lca_height(truth, ROOTED[4], Rank.GENUS) == 2
    # Homonyms share no rank: Laelia the moth and Laelia the orchid meet at the root only.
    assert lca_height(ROOTED[2], ROOTED[3], "species") == 7


def test_a_missing_rank_never_matches() -> None:
    truth = Lineage.from_names("Animalia", "Chordata", "Squamata", None, "Lacertidae", "Lacerta", "agilis")
    sister = Lineage.from_names("Animalia", "Chordata", "Squamata", None, "Lacertidae", "Lacerta", "viridis")
    # The order is unknown in both: it is no match, so the LCA is the class above it, not the genus.
    assert lca_height(truth, sister, "species") == 4
    unplaced = Lineage.from_names(None, None, None, None, None, "Lacerta", "viridis")
    assert lca_height(truth, unplaced, "species") == 7
    # The vectorised form agrees, and a predicted label equal to the truth is 0 whatever holes it has.
    assert lca_heights([truth, sister], np.array([0, 0]), np.array([[1, 0], [0, 1]]), "species").tolist() == [
        [4, 0], [0, 4]]


def test_vectorised_heights_equal_the_pairwise_reference_on_random_lineages() -> None:
    rng = np.random.default_rng(4)
    vocabulary = [["K1", "K2"], ["P1", "P2"], ["C1", "C2"], ["O1", "O2"], ["F1", "F2"], ["G1", "G2"], ["a", "b"]]
    lineages = []
    for _ in range(40):
        names = [None if rng.random() < 0.1 else str(rng.choice(v)) for v in vocabulary]
        if names[Rank.SPECIES] is None:
            names[Rank.SPECIES] = "c"
        lineages.append(Lineage(tuple(names)))
    truth = rng.integers(-1, 40, size=200)
    predicted = rng.integers(0, 40, size=(200, 5))
    got = lca_heights(lineages, truth, predicted, "species")
    for row in range(200):
        for column in range(5):
            if truth[row] < 0:
                expected = -1
            elif predicted[row, column] == truth[row]:
                expected = 0
            else:
                expected = lca_height(lineages[truth[row]], lineages[predicted[row, column]], "species")
            assert got[row, column] == expected


def test_severity_and_distances_on_a_hand_made_run() -> None:
    # Five images: correct, sister species, another family, another phylum, another kingdom.
    top1 = np.array([0, 1, 3, 6, 7])
    correct = top1 == 0
    top5 = np.array([[0, 1, 3, 6, 7], [1, 0, 3, 6, 7], [3, 1, 0, 6, 7], [6, 1, 0, 3, 7], [7, 6, 3, 1, 0]])
    metrics = severity_metrics(top1, top5, correct, "species", n_labels=5 + 1, hierarchy=None)
    severity = metrics["mistake_severity_species"]
    assert severity["value"] == pytest.approx((1 + 3 + 6 + 7) / 4)  # the correct image is left out
    assert severity["n"] == 4 and severity["images"] == 5
    assert metrics["hdist1_species"]["value"] == pytest.approx((0 + 1 + 3 + 6 + 7) / 5)  # counted 0
    assert metrics["hdist5_species"]["value"] == pytest.approx(top5.mean())
    assert severity["low"] <= severity["value"] <= severity["high"]


def test_severity_interval_matches_a_bootstrap_that_draws_images() -> None:
    rng = np.random.default_rng(1)
    heights = rng.choice([0, 0, 0, 1, 2, 5, 7], size=300)
    estimate = mistake_severity(heights, heights == 0, n_resamples=20_000)
    draws = rng.integers(0, heights.size, size=(20_000, heights.size))
    sample = heights[draws]
    replicates = np.array([row[row > 0].mean() for row in sample])
    low, high = np.quantile(replicates, [0.025, 0.975])
    assert estimate["value"] == pytest.approx(heights[heights > 0].mean())
    assert estimate["low"] == pytest.approx(low, abs=0.04) and estimate["high"] == pytest.approx(high, abs=0.04)


def test_no_mistake_and_no_lineage_give_no_value_never_zero() -> None:
    perfect = mistake_severity(np.zeros(4, dtype=int), np.ones(4, dtype=bool))
    assert perfect["value"] is None and "no mistakes" in perfect["reason"]
    assert hierarchical_distance(np.zeros((3, 5)), 5, n_labels=5)["reason"].startswith("undefined: top-5")
    bare = [Lineage.from_names(None, None, None, None, None, "Lacerta", s) for s in ("agilis", "viridis")]
    summary = hierarchy_summary(bare, "species", "test")
    assert summary["labels_without_lineage"] == 2 and "kingdom" in summary["absent"]
    absent = severity_metrics(None, None, np.zeros(0, dtype=bool), "species", n_labels=2, hierarchy=summary)
    assert set(absent) == {"mistake_severity_species", "hdist1_species", "hdist5_species"}
    assert all(e["value"] is None and e["reason"] == summary["absent"] for e in absent.values())


def test_hierarchy_summary_counts_full_partial_and_missing_lineages() -> None:
    holed = Lineage.from_names("Animalia", "Chordata", "Squamata", None, "Lacertidae", "Lacerta", "agilis")
    bare = Lineage.from_names(None, None, None, None, None, "Lacerta", "viridis")
    summary = hierarchy_summary([*ROOTED, holed, bare], "species", "hand-made")
    assert (summary["labels"], summary["labels_with_full_lineage"], summary["labels_with_a_missing_rank"],
            summary["labels_without_lineage"], summary["absent"]) == (7, 5, 1, 1, None)
    assert summary["ranks"] == ["kingdom", "phylum", "class", "order", "family", "genus", "species"]


def test_paired_severity_prefers_gentler_mistakes_at_the_same_accuracy() -> None:
    from cladebench.metrics.hierarchy import paired_ratio_bootstrap, severity_units

    rng = np.random.default_rng(2)
    correct = rng.random(400) < 0.6  # both runs right on the same images: the same accuracy
    gentle = np.where(correct, 0, rng.choice([1, 2], size=400))
    harsh = np.where(correct, 0, rng.choice([5, 6, 7], size=400))
    _, a_values, a_weights = severity_units(range(400), gentle, correct)
    _, b_values, b_weights = severity_units(range(400), harsh, correct)
    paired = paired_ratio_bootstrap(a_values, a_weights, b_values, b_weights, n_resamples=4000)
    assert paired.difference == pytest.approx(gentle[~correct].mean() - harsh[~correct].mean())
    assert paired.high < 0 and paired.p_value < 0.001 and paired.n == 400
    # Against a bootstrap that draws image indices, the same draw for both runs.
    draws = rng.integers(0, 400, size=(4000, 400))
    replicates = (a_values[draws].sum(1) / a_weights[draws].sum(1)) - (b_values[draws].sum(1) / b_weights[draws].sum(1))
    low, high = np.quantile(replicates, [0.025, 0.975])
    assert paired.low == pytest.approx(low, abs=0.05) and paired.high == pytest.approx(high, abs=0.05)
    same = paired_ratio_bootstrap(a_values, a_weights, a_values, a_weights, n_resamples=500)
    assert same.difference == 0 and same.p_value == 1.0
