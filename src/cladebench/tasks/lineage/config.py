"""How a lineage-completion run is set up (:class:`LineageConfig`) and the default VLM prompts.

Why a module of its own: every part of the lineage task (targets, the contrastive and VLM paths, the task)
reads the config, so it sits below them all.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import ClassVar, Literal

from cladebench.registry import look_up
from cladebench.tasks.configs import TaskSettings

DEFAULT_LINEAGE_PROMPT = (
    "One organism in this photo belongs to {hint}. Name its {ranks}. Answer with only a JSON object of the "
    "form {schema}, using scientific names (the species as a binomial, Genus species)."
)
DEFAULT_NOHINT_PROMPT = (
    "Name an organism in this photo: its {ranks}. Answer with only a JSON object of the form {schema}, using "
    "scientific names (the species as a binomial, Genus species)."
)

CONDITION_CHOICES: Mapping[str, tuple[str, ...] | None] = MappingProxyType(
    {"auto": None, "both": ("hint", "nohint"), "hint": ("hint",), "nohint": ("nohint",)})
"""``--conditions`` value -> the conditions a run scores, in order (None: by model kind, :data:`AUTO_CONDITIONS`)."""
AUTO_CONDITIONS: Mapping[str, tuple[str, ...]] = MappingProxyType({"clip": ("hint", "nohint"), "vlm": ("hint",)})
"""Model kind -> the conditions ``--conditions auto`` runs (see :attr:`LineageConfig.conditions`)."""


@dataclass(frozen=True)
class LineageConfig(TaskSettings):
    """How a lineage-completion run is set up; every field is recorded in the run record."""
    TASK: ClassVar[str] = "lineage"

    SHOWN: ClassVar[tuple[str, ...]] = ("conditions", "lineage_candidates", "lineage_prompt", "column")
    """The fields `cladebench eval lineage --help` lists as options (:data:`cladebench.config.SHOWN`)."""

    column: str | None = None
    """Embedding column with the photos' vectors (contrastive models); by default the one naming the model."""
    where: str | None = None
    """SQL filter selecting the evaluated photos."""
    lineage_candidates: str = "benchmark"
    """Candidate species of contrastive models: 'benchmark' (both organisms of every evaluated photo) or a
    CSV/TSV/Parquet file of lineages (rank columns kingdom..species or scientific_name), e.g. a whole taxonomy."""
    conditions: Literal["auto", "both", "hint", "nohint"] = "auto"
    """Which conditions run: 'hint' (told the hint), 'nohint' (the photo alone), 'both' (the hint's value, on the
    same targets), 'auto' (both for contrastive models, hint only for VLMs); auto differs by kind because no hint
    costs a VLM one more request per photo and a contrastive model only its stored vectors (over a whole
    taxonomy, though, no hint encodes every species once)."""
    name_style: str = "taxon"
    """Candidate label strings of contrastive models: sci, com, taxon, taxon_com or mixed."""
    templates: str = "bioclip"
    """Template set (bioclip, photo, openai-imagenet, raw) or one template containing {c}."""
    logit_scale: str = "learned"
    """'learned' (the model's own scale) or a number: it sets how sharply probability mass is rolled up."""
    lineage_prompt: str = DEFAULT_LINEAGE_PROMPT
    """VLM prompt with the hint: {hint} (names joined by ' > '), {ranks} (the ranks below it, in words) and
    {schema} (the JSON object asked for); literal braces doubled."""
    lineage_nohint_prompt: str = DEFAULT_NOHINT_PROMPT
    """VLM prompt without the hint: {ranks} (all seven) and {schema}; literal braces doubled."""
    vlm_concurrency: int = 8
    """Requests in flight at once to a VLM endpoint."""
    vlm_deadline_s: float = 60.0
    """Seconds one VLM request may take in all (attempts and the waits between them): an endpoint that never
    answers, or trickles its answer, costs this much per request, then the request fails, saying so."""
    vlm_max_response_bytes: int = 2**20
    """Largest VLM answer read; a bigger body is an invalid response, never cached."""
    vlm_json: bool = True
    """Ask the endpoint for JSON mode (response_format json_object); turn off where it is rejected: the
    prompt still asks for JSON and every answer is read tolerantly."""

    def __post_init__(self) -> None:
        from cladebench.tasks.common import check_vlm_settings, fixed_logit_scale  # here: help reads this class

        fixed_logit_scale(self.logit_scale)  # NaN, zero, negative or infinite: a usage error before any work
        check_vlm_settings(self)
        look_up(CONDITION_CHOICES, "--conditions value", self.conditions)

    def candidate_lineages(self) -> str | None:
        return self.lineage_candidates
