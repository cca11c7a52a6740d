"""The reviews table: appended only, read back as each reviewer's current label, agreement and disagreement, and
concurrent writers (threads and processes) all landing."""

from __future__ import annotations

import multiprocessing
import threading
from pathlib import Path

import lance
import pytest

from cladebench.errors import UsageError
from cladebench.store.reviews import (
    REVIEW_SCHEMA,
    Review,
    append_review,
    read_reviews,
    review_summary,
    reviewer_agreement,
    reviews_path,
)
from cladebench.taxonomy import Lineage, Rank

MANICULATUS = Lineage.from_names("Animalia", "Chordata", "Mammalia", "Rodentia", "Cricetidae", "Peromyscus",
                                 "Peromyscus maniculatus")
LEUCOPUS = MANICULATUS.replace(species="Peromyscus leucopus")


def _review(uuid: str, reviewer: str, lineage: Lineage | None = MANICULATUS, rank: Rank | None = Rank.SPECIES,
            **kwargs: object) -> Review:
    return Review(uuid=uuid, lineage=lineage, rank=rank, reviewer=reviewer, **kwargs)  # type: ignore[arg-type]


def test_reviews_live_in_the_dataset_state_folder(tmp_path: Path) -> None:
    assert reviews_path(str(tmp_path / "ds.lance")) == tmp_path / "ds.lance" / "_cladebench" / "reviews.lance"


def test_an_empty_store_reads_as_an_empty_table(tmp_path: Path) -> None:
    table = read_reviews(tmp_path / "none.lance")
    assert table.num_rows == 0 and table.schema == REVIEW_SCHEMA
    summary = review_summary(table)
    assert summary.agreed == {} and summary.disagreements == {} and summary.reviews == 0


def test_every_review_is_a_new_version_and_nothing_is_overwritten(tmp_path: Path) -> None:
    path = tmp_path / "reviews.lance"
    first = append_review(path, _review("u1", "ana", LEUCOPUS, note="dark tail", confidence="low",
                                        run="bioclip · sci", model="hf-hub:imageomics/bioclip",
                                        suggestions=("Peromyscus leucopus", "Peromyscus maniculatus"),
                                        dataset_uri="ds.lance", dataset_version=3))
    second = append_review(path, _review("u1", "ana"))  # ana changes her mind: a later row, the first kept
    assert second == first + 1
    table = read_reviews(path)
    rows = table.to_pylist()
    assert [r["species"] for r in rows] == ["Peromyscus leucopus", "Peromyscus maniculatus"]
    assert rows[0]["note"] == "dark tail" and rows[0]["confidence"] == "low" and rows[0]["dataset_version"] == 3
    assert rows[0]["suggestions"] == ["Peromyscus leucopus", "Peromyscus maniculatus"]
    assert rows[0]["genus"] == "Peromyscus" and rows[0]["taxon"] == "Peromyscus leucopus"
    assert rows[0]["rank"] == "species" and rows[0]["run"] == "bioclip · sci"
    assert lance.dataset(str(path), version=first).count_rows() == 1  # the earlier version is still readable
    summary = review_summary(table)
    assert summary.agreed["u1"]["species"] == "Peromyscus maniculatus"  # her latest label
    assert summary.reviews == 2


def test_a_second_reviewer_is_kept_beside_the_first_and_disagreements_are_listed(tmp_path: Path) -> None:
    path = tmp_path / "reviews.lance"
    append_review(path, _review("u1", "ana"))
    append_review(path, _review("u1", "ben", LEUCOPUS, note="<b>not</b> sure"))
    append_review(path, _review("u2", "ana", MANICULATUS.truncate(Rank.GENUS), Rank.GENUS))
    append_review(path, _review("u2", "ben", MANICULATUS.truncate(Rank.GENUS), Rank.GENUS))
    append_review(path, _review("u3", "ana", None, None))
    summary = review_summary(read_reviews(path))
    assert set(summary.current["u1"]) == {"ana", "ben"}
    assert set(summary.disagreements) == {"u1"}
    assert set(summary.agreed) == {"u2", "u3"}
    assert summary.agreed["u2"]["taxon"] == "Peromyscus" and summary.agreed["u2"]["species"] is None
    assert summary.agreed["u3"]["not_identifiable"] and summary.agreed["u3"]["taxon"] is None
    listed = summary.disagreement_rows()
    assert [(r["reviewer"], r["label"]) for r in listed] == [
        ("ana", "Peromyscus maniculatus (species)"), ("ben", "Peromyscus leucopus (species)")]
    # ben comes round: the row is agreed again, and both of his reviews stay in the table
    append_review(path, _review("u1", "ben"))
    summary = review_summary(read_reviews(path))
    assert "u1" in summary.agreed and not summary.disagreements and summary.reviews == 6


def test_same_taxon_at_another_rank_is_a_disagreement(tmp_path: Path) -> None:
    path = tmp_path / "reviews.lance"
    append_review(path, _review("u1", "ana"))
    append_review(path, _review("u1", "ben", MANICULATUS, Rank.GENUS))
    assert set(review_summary(read_reviews(path)).disagreements) == {"u1"}


@pytest.mark.parametrize("kwargs, message", [
    ({"uuid": ""}, "uuid"),
    ({"reviewer": "  "}, "reviewer"),
    ({"rank": None}, "or neither"),
    ({"confidence": "very"}, "confidence"),
    ({"lineage": MANICULATUS.truncate(Rank.FAMILY)}, "no name at rank species"),
])
def test_a_malformed_review_is_a_usage_error(kwargs: dict, message: str) -> None:
    fields = {"uuid": "u1", "lineage": MANICULATUS, "rank": Rank.SPECIES, "reviewer": "ana", **kwargs}
    with pytest.raises(UsageError, match=message):
        Review(**fields)


def test_threads_writing_at_the_same_moment_all_land(tmp_path: Path) -> None:
    path = tmp_path / "reviews.lance"  # not created yet: the first writers race to create it too
    barrier = threading.Barrier(12)
    errors: list[BaseException] = []

    def write(i: int) -> None:
        try:
            barrier.wait()
            append_review(path, _review(f"u{i}", f"reviewer{i % 3}"))
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(i,)) for i in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    table = read_reviews(path)
    assert sorted(table.column("uuid").to_pylist()) == sorted(f"u{i}" for i in range(12))


def _write_from_process(path: str, start: int, barrier: object) -> None:
    barrier.wait()  # type: ignore[attr-defined]
    for i in range(start, start + 3):
        append_review(path, _review(f"p{i}", f"proc{start}"))


def test_processes_writing_at_the_same_moment_all_land(tmp_path: Path) -> None:
    path = str(tmp_path / "reviews.lance")
    context = multiprocessing.get_context("spawn")  # Lance is not fork-safe
    barrier = context.Barrier(4)
    processes = [context.Process(target=_write_from_process, args=(path, start, barrier)) for start in (0, 3, 6, 9)]
    for process in processes:
        process.start()
    for process in processes:
        process.join(timeout=120)
    assert [p.exitcode for p in processes] == [0, 0, 0, 0]
    assert sorted(read_reviews(path).column("uuid").to_pylist()) == sorted(f"p{i}" for i in range(12))


def test_agreement_is_percent_agreement_and_cohens_kappa_per_pair_as_sklearn_computes_it(tmp_path: Path) -> None:
    import numpy as np
    from sklearn.metrics import cohen_kappa_score

    rng = np.random.default_rng(7)
    labels = [MANICULATUS, LEUCOPUS, MANICULATUS.truncate(Rank.GENUS), None]
    path = tmp_path / "reviews.lance"
    picks: dict[str, dict[str, int]] = {"ana": {}, "ben": {}, "cy": {}}
    rows = []
    for i in range(40):
        for reviewer in ("ana", "ben") + (("cy",) if i % 3 == 0 else ()):
            label = int(rng.integers(4)) if reviewer != "ben" or rng.random() < .5 else picks["ana"][f"u{i}"]
            picks[reviewer][f"u{i}"] = label
            lineage = labels[label]
            rank = None if lineage is None else Rank.GENUS if label == 2 else Rank.SPECIES
            rows.append(_review(f"u{i}", reviewer, lineage, rank))
    rows.append(_review("alone", "ana"))  # one reviewer: not compared
    for review in rows:
        append_review(path, review)
    agreement = reviewer_agreement(review_summary(read_reviews(path)))
    compared = [u for u in picks["ana"] if u in picks["ben"]]
    same = sum(1 for u in compared if len({picks[r][u] for r in picks if u in picks[r]}) == 1)
    assert (agreement.rows, agreement.agreeing) == (40, same)
    assert agreement.percent == pytest.approx(same / 40)
    pairs = {(p.first, p.second): p for p in agreement.pairs}
    assert set(pairs) == {("ana", "ben"), ("ana", "cy"), ("ben", "cy")}
    for (a, b), pair in pairs.items():
        both = [u for u in picks[a] if u in picks[b]]
        assert pair.rows == len(both)
        assert pair.kappa == pytest.approx(cohen_kappa_score([picks[a][u] for u in both], [picks[b][u] for u in both]))


def test_agreement_without_two_reviewers_on_a_row_has_no_figure(tmp_path: Path) -> None:
    path = tmp_path / "reviews.lance"
    append_review(path, _review("u1", "ana"))
    append_review(path, _review("u2", "ben"))
    agreement = reviewer_agreement(review_summary(read_reviews(path)))
    assert agreement.rows == 0 and agreement.percent is None and agreement.pairs == ()
    append_review(path, _review("u1", "ben"))  # both name one label and nothing else: kappa is undefined, not 1
    agreement = reviewer_agreement(review_summary(read_reviews(path)))
    assert agreement.percent == 1.0 and agreement.pairs[0].kappa is None and agreement.pairs[0].rows == 1
