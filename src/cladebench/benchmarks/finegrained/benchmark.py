"""Fine-Grained Challenges and its public test copy: one Lance table on the Hub, opened where it is published.

``imageomics/fine-grained-challenges`` (and ``thompsonmj/test-fine-grained-challenges``, the copy its mechanics
were checked on) publish ``data/challenges.lance``: WebP images, seven ranks (``species`` the binomial, null for
the genus-only camera-trap rows), ``challenge_group`` (Peromyscus, Ixodidae, the zebras), ``seen_in_training``,
and image embeddings of the BioCLIP family in ``emb_bioclip``, ``emb_bioclip2`` and ``emb_bioclip2p5``, whose
model and revision are recorded in each field's Arrow metadata and in ``data/challenges.embedding_models.json``.

How it is read:

- **Remotely, at its release.** The dataset is opened at ``hf://datasets/ORG/NAME@v0.1.0/data/challenges.lance``
  (the tag in the URI, so every record and reopening keeps the pin); tasks read only the columns and rows they
  need (Lance's projection and filter pushdown), never the whole table. A mirror (``--data DIR``) is a folder in
  the published layout, read in place.
- **Its embeddings as what they are.** Before any model loads, every published column's recorded model and
  revision are checked against the pins (:func:`cladebench.store.embeddings.check_published_embeddings`): a
  mismatch is refused in one line. A column the sidecar does not vouch for too (no sidecar, an empty one, none
  of its entries for the column, a folder in its place) is read but unverified: said on the console and
  recorded (``unverified_embeddings``). Few-shot, retrieval and ``compare-columns`` then need no model at all (the
  column stands for it: ``emb_bioclip2`` by default), and zero-shot with ``--model bioclip-2`` uses only its text
  tower on ``emb_bioclip2``. Nothing is embedded into a published dataset: a model without a column there is
  refused with the commands that make a local copy to embed.
- **Per group, never pooled.** Each ``challenge_group`` is its own benchmark with its own label set; genus-only
  rows are never scored for species (zero-shot puts them in the inspection table), and ``--unseen-only`` /
  ``--not-seen-by`` select on ``seen_in_training``.
"""

from __future__ import annotations

from pathlib import Path

from cladebench.benchmarks.base import (
    Benchmark,
    Headline,
    Located,
    Protocol,
    PublishedFigure,
    register_benchmark,
)
from cladebench.curate.builders import BUILDERS, Builder
from cladebench.curate.builders import register as register_builder
from cladebench.environment import OFFLINE_REASON, hub_offline
from cladebench.errors import DatasetNotFoundError, RemoteUnavailableError
from cladebench.store.embeddings import (
    PUBLISHED_EMBEDDING_COLUMNS,
    PUBLISHED_SIDECAR_SUFFIX,
    check_published_embeddings,
    load_published_sidecar,
    read_published_sidecar,
)

RELEASE = "v0.1.0"
"""The release tag both repositories are pinned to."""
DATA_PATH = "data/challenges.lance"
"""The table inside the published repository."""
SIDECAR_PATH = DATA_PATH.removesuffix(".lance") + PUBLISHED_SIDECAR_SUFFIX
"""The embeddings' sidecar beside the table: ``data/challenges.embedding_models.json``."""
SIDECAR_NAME = SIDECAR_PATH.rsplit("/", 1)[-1]
"""The sidecar's file name, as messages and records call it."""
DEFAULT_COLUMN = "emb_bioclip2"
"""The published column few-shot and retrieval read when no model names one (the one both repositories hold)."""

_GROUPED = {"group_by": "challenge_group"}
_EXPOSURE_RUNS: tuple[dict[str, object], ...] = ({}, {"unseen_only": True})
# One few-shot run per shot count and exposure: a group too small for 5 shots is left out of that run (with its
# reason), and when no group is large enough that run alone is skipped, not the 1-shot run beside it.
_FEWSHOT_RUNS = tuple({"shots": (shots,), **exposure} for exposure in _EXPOSURE_RUNS for shots in (1, 5))
PROTOCOLS = (
    Protocol("zeroshot", {**_GROUPED, "rank": "species"}, runs=_EXPOSURE_RUNS),
    Protocol("fewshot", {**_GROUPED, "rank": "species", "shots": (1, 5), "column": DEFAULT_COLUMN},
             runs=_FEWSHOT_RUNS, needs_model=False),
    Protocol("retrieval", {**_GROUPED, "rank": "species", "column": DEFAULT_COLUMN}, needs_model=False),
)
"""The card's protocol: zero-shot per challenge group, few-shot (1 and 5 shots) and retrieval on the published
embeddings per group, each on all rows and on rows no listed model was trained on."""
HEADLINE = Headline("zeroshot", "top1_species")
"""Zero-shot species top-1 on all rows, one leaderboard column per challenge group."""
PUBLISHED: tuple[PublishedFigure, ...] = ()
"""No published figure: neither repository's card publishes results under this protocol at v0.1.0, and the
BioCLIP 2 paper predates the dataset; nothing is shown beside our numbers."""


def _sidecar_from_hub(repo: str) -> dict[str, dict[str, object]] | None:
    """The release's sidecar, fetched once into the Hub's cache; None when the release has none."""
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import EntryNotFoundError, HfHubHTTPError

    try:
        path = hf_hub_download(repo_id=repo, repo_type="dataset", filename=SIDECAR_PATH, revision=RELEASE)
    except EntryNotFoundError:
        return None
    except (HfHubHTTPError, OSError) as exc:  # the table opened, but its sidecar could not be fetched
        raise RemoteUnavailableError(f"cannot fetch {SIDECAR_PATH} of {repo} at {RELEASE}: {exc}") from None
    return read_published_sidecar(path)


def _locate(benchmark: Benchmark, mirror: Path | None) -> Located:
    from cladebench import store  # here: the benchmarks are registered by the command line's help too

    repo = benchmark.source.removeprefix("hf://datasets/").split("/data/")[0]
    if mirror is not None:
        path = mirror / DATA_PATH
        if not (path / "_versions").is_dir():
            if (mirror / "_versions").is_dir():
                raise DatasetNotFoundError(f"--data {mirror} is the Lance table itself; a mirror of {benchmark.name} "
                                           f"is the folder holding {DATA_PATH} (pass that folder)")
            raise DatasetNotFoundError(f"{mirror}: no Lance table at {DATA_PATH} (a mirror of {benchmark.name} "
                                       f"holds {benchmark.mirror_layout})")
        uri = str(path)
        dataset = store.open_dataset(uri)
        sidecar, absent = load_published_sidecar(mirror / SIDECAR_PATH, SIDECAR_NAME)
        provenance: dict[str, object] = {"kind": "mirror", "folder": str(mirror.resolve()), "source": benchmark.source,
                                      "release": None, "pinned_release": RELEASE}
    else:
        uri = f"hf://datasets/{repo}@{RELEASE}/{DATA_PATH}"
        dataset = store.open_dataset(uri)  # offline or unreachable: one line, within seconds
        offline = hub_offline()
        sidecar = None if offline else _sidecar_from_hub(repo)
        absent = (f"{SIDECAR_NAME} was not fetched ({OFFLINE_REASON})" if offline
                  else f"the release has no {SIDECAR_NAME}")
        provenance = {"kind": "published", "source": benchmark.source, "release": RELEASE}
    checked = check_published_embeddings(dataset, sidecar=sidecar, sidecar_name=SIDECAR_NAME, uri=uri,
                                         sidecar_absent=absent)
    provenance["sidecar"] = SIDECAR_PATH if sidecar is not None else None
    provenance["published_embeddings"] = checked
    provenance["unverified_embeddings"] = [column for column, entry in checked.items() if not entry["verified"]]
    return Located(benchmark.name, uri, provenance)


_LAYOUT = (f"{DATA_PATH} (the Lance table, emb_bioclip* columns with their field metadata) and {SIDECAR_PATH}")
_PUBLISHED = ", ".join(f"{column} ({model})" for column, model in PUBLISHED_EMBEDDING_COLUMNS.items())

register_benchmark(Benchmark(
    name="fine-grained-challenges", source=f"hf://datasets/imageomics/fine-grained-challenges/{DATA_PATH}",
    release=RELEASE,
    description="Fine-Grained Challenges (imageomics/fine-grained-challenges): Peromyscus, Ixodidae and zebra "
                f"challenge groups, each its own benchmark; published embeddings {_PUBLISHED}",
    protocols=PROTOCOLS, mirror_layout=_LAYOUT, remote=True, publishes_embeddings=True, locate_remote=_locate,
    headline=HEADLINE, published=PUBLISHED,
))
register_benchmark(Benchmark(
    name="test-fine-grained-challenges",
    source=f"hf://datasets/thompsonmj/test-fine-grained-challenges/{DATA_PATH}", release=RELEASE,
    description="Fine-Grained Challenges test copy (thompsonmj/test-fine-grained-challenges): the same layout on "
                "fewer images, for checking a setup end to end",
    protocols=PROTOCOLS, mirror_layout=_LAYOUT, remote=True, publishes_embeddings=True, locate_remote=_locate,
    headline=HEADLINE, published=PUBLISHED,
))
register_builder(Builder(
    "fine-grained-challenges", "cladebench.benchmarks.finegrained.builder.build", "FineGrainedBuildConfig",
    "build_finegrained",
    "Fine-Grained Challenges from a TreeOfLife-200M catalog: groups of look-alike taxa, clean licenses, 720 px WebP",
    config_module="cladebench.benchmarks.finegrained.builder.config", stages_name="FineGrainedBuild",
))

register_builder(Builder(
    "cameratrap", "cladebench.benchmarks.finegrained.cameratrap.build", "CameraTrapBuildConfig", "build_cameratrap",
    "the camera-trap cohort of Fine-Grained Challenges from LILA collections (COCO Camera Traps + MegaDetector)",
    config_module="cladebench.benchmarks.finegrained.cameratrap.config", stages_name="CameraTrapBuild",
))
BUILDERS.alias("finegrained", "fine-grained-challenges")
