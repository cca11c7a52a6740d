"""The values INQUIRE's files hold, parsed: split names, iNat24 file keys and species folders, licenses, dates.

Why apart: these are the rules of iNaturalist's data rather than of one file, and other readers use them too
(:func:`parse_license` and :func:`parse_observed_on` read iNat Co-Observed and iNaturalist exports).
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from cladebench.taxonomy import Lineage

SPLIT_NAMES: dict[str, str] = {"validation": "val", "val": "val", "test": "test"}
"""Split word in a file name -> INQUIRE's split name."""


def split_from_name(path: str | Path) -> str | None:
    """INQUIRE's split from a file name: ``validation-00000-of-00001.parquet`` and
    ``inquire_queries_val.csv`` give ``val``; ``test-...`` gives ``test``; anything else ``None``."""
    words = re.split(r"[^a-z]+", Path(path).name.lower())
    found = {SPLIT_NAMES[w] for w in words if w in SPLIT_NAMES}
    return found.pop() if len(found) == 1 else None


def inat24_file_key(path: str) -> str:
    """The iNat24 key of a path: ``path`` itself when it ends in ``.jpg``, else ``path + ".jpg"``.

    This is the official Fullrank match (``image_path + ".jpg" in pos_images``) written as a key:
    the key of an annotation path is the path, the key of an index path without its extension is the
    annotation path. Nothing else is normalised, because the official comparison is exact.
    """
    return path if path.endswith(".jpg") else path + ".jpg"


_FOLDER = re.compile(r"^(\d+)_([^_]+(?:_[^_]+){6})$")


def species_folder_lineage(folder: str) -> tuple[int, Lineage]:
    """``04686_Animalia_Chordata_Mammalia_Carnivora_Herpestidae_Mungos_mungo`` -> (4686, its lineage).

    Exactly the category id and seven names; anything else is a :class:`ValueError`.
    """
    match = _FOLDER.match(folder)
    if match is None:
        raise ValueError(f"{folder!r} is not an iNat24 species folder "
                         "(<id>_<Kingdom>_<Phylum>_<Class>_<Order>_<Family>_<Genus>_<epithet>)")
    return int(match.group(1)), Lineage.from_names(*match.group(2).split("_"))


def folder_of(path: str) -> str | None:
    """The species folder of an iNat24 path (``train/<folder>/<file>``); ``None`` when there is none."""
    parts = path.split("/")
    return parts[-2] if len(parts) >= 2 else None


_CC_PARTS = ("by", "nc", "sa", "nd")
_LICENSE_WORDS = {"attribution": "by", "noncommercial": "nc", "sharealike": "sa", "noderivs": "nd",
                  "noderivatives": "nd"}
_HYPHENATED_WORDS = {"non-commercial": "noncommercial", "share-alike": "sharealike",
                     "no-derivatives": "noderivatives", "no-derivs": "noderivs"}
"""Words of license names that contain a hyphen, joined before the name is split on hyphens."""
_LICENSE_NOISE = {"cc", "creative", "commons", "license", "licence", "international", "generic", "unported"}
_CC_URL = re.compile(r"creativecommons\.org/(licenses|publicdomain)/([a-z-]+)(?:/(\d+(?:\.\d+)?))?", re.IGNORECASE)
_VERSION = re.compile(r"^\d+(?:\.\d+)?$")


@dataclass(frozen=True)
class InatLicense:
    """A photo license in iNaturalist's vocabulary."""

    code: str
    """``cc0``, ``cc-by``, ``cc-by-nc``, ..., ``all-rights-reserved``: the store's ``license_name``."""
    version: str | None = None
    """License version when the raw value names one (``4.0``)."""

    @property
    def short_name(self) -> str:
        """The abbreviation iNaturalist's attributions print: ``CC-BY-NC``, ``CC0``."""
        return self.code.upper()

    @property
    def link(self) -> str | None:
        """The license text's URL; iNaturalist links its CC licenses to version 4.0 when none is named."""
        if self.code == "all-rights-reserved":
            return None
        if self.code == "cc0":
            return f"https://creativecommons.org/publicdomain/zero/{self.version or '1.0'}/"
        return f"https://creativecommons.org/licenses/{self.code.removeprefix('cc-')}/{self.version or '4.0'}/"

    def attribution(self, name: str) -> str:
        """iNaturalist's attribution for a photo by ``name`` (its open-data README gives the rule)."""
        if self.code == "cc0":
            return f"{name}, no rights reserved (CC0)"
        if self.code == "all-rights-reserved":
            return f"© {name}, all rights reserved"
        return f"© {name}, some rights reserved ({self.short_name})"


PUBLISHED_LICENSES: dict[str, InatLicense] = {
    # GBIF's license enum (the API, occurrence downloads' `license` column)
    "cc0_1_0": InatLicense("cc0", "1.0"), "cc_by_4_0": InatLicense("cc-by", "4.0"),
    "cc_by_nc_4_0": InatLicense("cc-by-nc", "4.0"),
    # GBIF's URL forms (a Darwin Core Archive's dcterms:license; https and without legalcode read alike)
    "http://creativecommons.org/publicdomain/zero/1.0/legalcode": InatLicense("cc0", "1.0"),
    "http://creativecommons.org/licenses/by/4.0/legalcode": InatLicense("cc-by", "4.0"),
    "http://creativecommons.org/licenses/by-nc/4.0/legalcode": InatLicense("cc-by-nc", "4.0"),
    # iNaturalist's license codes (the API's license_code; the open data's CC-BY-NC in capitals reads alike)
    "cc0": InatLicense("cc0"), "cc-by": InatLicense("cc-by"), "cc-by-nc": InatLicense("cc-by-nc"),
    "cc-by-sa": InatLicense("cc-by-sa"), "cc-by-nd": InatLicense("cc-by-nd"), "cc-by-nc-sa": InatLicense("cc-by-nc-sa"),
    "cc-by-nc-nd": InatLicense("cc-by-nc-nd"), "all rights reserved": InatLicense("all-rights-reserved"),
}
"""Every license spelling GBIF and iNaturalist publish (lower case) -> its license: one name and one link each.
iNaturalist's null license_code (all rights reserved) is an empty cell, read as no license, as any empty cell."""


def _cc_code(parts: Iterable[str]) -> str | None:
    found = set(parts)
    if "by" not in found or not found <= set(_CC_PARTS) or {"sa", "nd"} <= found:
        return None
    return "cc-" + "-".join(p for p in _CC_PARTS if p in found)


def parse_license(raw: str | None) -> InatLicense | None:
    """iNaturalist's license code from the ways datasets write it; ``None`` when not recognised.

    Accepted: codes (``cc-by-nc``, ``CC-BY-NC``, ``cc_by_nc``), names with or without a version
    (``CC BY-NC 4.0``, ``CC BY-NC-SA``), every spelling in :data:`PUBLISHED_LICENSES` (GBIF's ``CC_BY_4_0``),
    the COCO-style names of the iNat competition files (``Attribution-NonCommercial License``),
    creativecommons.org URLs, ``CC0`` in its spellings, and ``all rights reserved``. Anything else (an integer
    id, "No known copyright restrictions") is ``None``: a license is never guessed.
    """
    text = (raw or "").strip().lower()
    if not text:
        return None
    if text in PUBLISHED_LICENSES:
        return PUBLISHED_LICENSES[text]
    url = _CC_URL.search(text)
    if url is not None:
        kind, name, version = url.groups()
        if kind.lower() == "publicdomain":
            return InatLicense("cc0", version) if name == "zero" else None
        code = _cc_code(name.split("-"))
        return None if code is None else InatLicense(code, version)
    if text in ("arr", "all rights reserved", "all-rights-reserved", "(c)", "©"):
        return InatLicense("all-rights-reserved")
    for hyphenated, word in _HYPHENATED_WORDS.items():
        text = text.replace(hyphenated, word)
    words = [w for w in re.split(r"[\s_/,()-]+", text) if w]
    if words[:1] == ["cc0"] or words[:2] in (["cc", "0"], ["cc", "zero"]) or \
            text.startswith(("public domain dedication", "no rights reserved")):
        rest = words[1:] if words[:1] == ["cc0"] else words[2:]
        return InatLicense("cc0", next((w for w in rest if _VERSION.match(w)), None))
    version = next((w for w in words if _VERSION.match(w)), None)
    parts = [_LICENSE_WORDS.get(w, w) for w in words if w != version]
    code = _cc_code(p for p in parts if p not in _LICENSE_NOISE)
    return None if code is None else InatLicense(code, version)


_DATE = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})"
    r"(?:[T ](\d{2}):(\d{2})(?::(\d{2})(?:\.\d{1,9})?)?(?:Z|[+-](\d{2}):?(\d{2}))?)?$"
)


def parse_observed_on(value: object) -> datetime.date | None:
    """The observation date from a ``date`` value; ``None`` for null or blank. Other values raise ValueError.

    Accepted text: ``YYYY-MM-DD``, optionally followed by ``T`` or a space and ``HH:MM``,
    ``HH:MM:SS`` or ``HH:MM:SS.fff`` (up to 9 digits), optionally followed by ``Z`` or a UTC offset
    ``±HH:MM`` / ``±HHMM`` (iNat competition files write ``2019-06-23 18:02:00+00:00``). The date
    is the one written; the time and offset must be valid but do not move it, since converting a
    local observation time to another zone would report a day the observer did not record. A
    Parquet ``date`` or ``timestamp`` value gives its own date.
    """
    if value is None:
        return None
    if isinstance(value, datetime.datetime):
        return value.date()
    if isinstance(value, datetime.date):
        return value
    text = str(value).strip()
    if not text:
        return None
    match = _DATE.match(text)
    if match is None:
        raise ValueError(f"{text!r} is not a date (YYYY-MM-DD, optionally with a time and UTC offset)")
    year, month, day, hour, minute, second, offset_hours, offset_minutes = match.groups()
    try:
        date = datetime.date(int(year), int(month), int(day))
    except ValueError as exc:
        raise ValueError(f"{text!r} is not a date that exists ({exc})") from None
    limits = ((hour, 23), (minute, 59), (second, 59), (offset_hours, 23), (offset_minutes, 59))
    if any(part is not None and int(part) > top for part, top in limits):
        raise ValueError(f"{text!r} has a time or UTC offset out of range")
    return date
