"""Photo licenses as iNaturalist writes them, and how often synthetic photos carry each.

Why it exists: builders must keep, credit or refuse a photo by its license (no-derivatives and
all-rights-reserved photos may not be resized or shared), so the world carries every license
iNaturalist uses, with the questions a builder asks of each.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cladebench.errors import unknown_name
from cladebench.synthetic.seeds import cdf_table


@dataclass(frozen=True)
class License:
    """A photo license as iNaturalist writes it, with the two questions a builder must ask of it."""

    code: str
    """iNaturalist's code, lower case: ``cc0``, ``cc-by``, ..., ``all-rights-reserved``."""
    link: str | None
    """URL of the license text on creativecommons.org; ``None`` for all rights reserved."""
    allows_derivatives: bool
    """Whether resized or re-encoded copies may be made (false for ND licenses and all rights reserved)."""
    allows_redistribution: bool
    """Whether copies may be shared at all (false only for all rights reserved)."""
    allows_commercial: bool
    """Whether commercial use is allowed (false for NC licenses and all rights reserved)."""

    @property
    def short_name(self) -> str:
        """The name iNaturalist prints in attributions: ``CC0``, ``CC BY-NC``, ``all rights reserved``."""
        if self.code == "all-rights-reserved":
            return "all rights reserved"
        if self.code == "cc0":
            return "CC0"
        return "CC " + self.code.removeprefix("cc-").upper()

    def attribution(self, name: str) -> str:
        """The attribution string iNaturalist shows for a photo by ``name`` under this license."""
        if self.code == "cc0":
            return f"{name}, no rights reserved (CC0)"
        if self.code == "all-rights-reserved":
            return f"(c) {name}, all rights reserved"
        return f"(c) {name}, some rights reserved ({self.short_name})"


def _cc(code: str) -> License:
    parts = code.removeprefix("cc-").split("-")
    return License(
        code=code,
        link=f"https://creativecommons.org/licenses/{'-'.join(parts)}/4.0/",
        allows_derivatives="nd" not in parts,
        allows_redistribution=True,
        allows_commercial="nc" not in parts,
    )


LICENSES: dict[str, License] = {
    "cc0": License("cc0", "https://creativecommons.org/publicdomain/zero/1.0/", True, True, True),
    **{c: _cc(c) for c in ("cc-by", "cc-by-nc", "cc-by-sa", "cc-by-nc-sa", "cc-by-nd", "cc-by-nc-nd")},
    "all-rights-reserved": License("all-rights-reserved", None, False, False, False),
}
"""Every license an iNaturalist photo can carry, by code."""

LICENSE_WEIGHTS: dict[str, float] = {
    "cc-by-nc": 0.55, "cc-by": 0.09, "cc0": 0.06, "cc-by-sa": 0.03, "cc-by-nc-sa": 0.06,
    "cc-by-nd": 0.03, "cc-by-nc-nd": 0.06, "all-rights-reserved": 0.12,
}
"""Shares of licenses among synthetic photos: CC BY-NC dominates as on iNaturalist (it is the default
there); the restrictive ones are common enough that a few hundred photos always include some."""


LICENSE_CODES = tuple(LICENSE_WEIGHTS)
LICENSE_SHARES = np.array([LICENSE_WEIGHTS[c] for c in LICENSE_CODES]) / sum(LICENSE_WEIGHTS.values())

LICENSE_CDF = cdf_table(LICENSE_SHARES)


def get_license(code: str | None) -> License:
    """The license for an iNaturalist code in any of its spellings (``CC-BY-NC``, ``cc_by_nc``, none for ARR)."""
    key = (code or "all-rights-reserved").strip().lower().replace("_", "-").replace(" ", "-")
    key = {"arr": "all-rights-reserved", "cc-0": "cc0"}.get(key, key)
    try:
        return LICENSES[key]
    except KeyError:
        raise unknown_name("license", str(code), LICENSES) from None
