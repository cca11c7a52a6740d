"""CrypticBio's mirror layout: a benchmark CSV in the published format and the cryptic-group lookup, written from
the rows a caller hands in (the synthetic world's, :func:`cladebench.synthetic.mirrors.write_crypticbio_mirror`).

Why it exists: the ``crypticbio-*`` benchmarks read a mirror folder (``CrypticBio-Benchmark/<file>.csv`` and
``cryptic_groups.tsv``) and fetch each row's photo from its URL through the downloader, as for the published
files; the family says what those files hold, whoever writes a mirror says what is in them.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from cladebench.benchmarks.crypticbio.source import CSV_COLUMNS

FILES = {"crypticbio-common": "CrypticBio-Common.csv", "crypticbio-commonunseen": "CrypticBio-CommonUnseen.csv",
         "crypticbio-endangered": "CrypticBio-Endangered.csv", "crypticbio-invasive": "CrypticBio-Invasive.csv"}
"""Each benchmark's published file name."""


def write_crypticbio_files(folder: str | Path, benchmark: str, lines: Iterable[Mapping[str, object]],
                           groups: Iterable[Sequence[str]]) -> None:
    """Write ``benchmark``'s CSV (one line per photo, the published columns) and the lookup into ``folder``: each
    member of a group is an anchor whose look-alikes are the group's other members."""
    folder = Path(folder)
    (folder / "CrypticBio-Benchmark").mkdir(parents=True, exist_ok=True)
    with open(folder / "CrypticBio-Benchmark" / FILES[benchmark], "w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=CSV_COLUMNS)
        writer.writeheader()
        writer.writerows(lines)
    with open(folder / "cryptic_groups.tsv", "w", encoding="utf-8") as handle:
        for members in groups:
            for anchor in members:
                handle.write(anchor + "\t" + ",".join(m for m in members if m != anchor) + "\n")
