"""Which model a name means: aliases, string forms, pinned revisions. Pure strings; no torch.

A model name arrives from the command line, a config or a results file, and has to mean the same
weights every time, or two runs cannot be compared. So every name resolves to one :class:`ModelSpec`
before anything is loaded, and the spec is what provenance records:

- a registered alias (``bioclip``, ``bioclip-2``, ``bioclip-2.5``, ``clip-vit-b-16``, ``clip-vit-l-14``,
  ``biotrove-clip``, ``siglip``; see :data:`MODELS`), each a function of the requested revision; ``demo`` is
  the demo's tiny CLIP as ``cladebench demo`` last trained or reused it in the cache (a ``local-dir:`` spec);
- ``hf-hub:ORG/NAME[@REVISION]``, an open_clip checkpoint on the Hugging Face Hub;
- ``local-dir:PATH``, a folder with ``open_clip_config.json`` and a weights file, or a timm or transformers
  image-only model as those libraries save it (:mod:`.backbones`; an ``hf-hub:`` repo of either is one too);
- ``timm:ARCH[.TAG]``, a timm architecture with its pretrained weights (an image-only backbone);
- ``NAME/PRETRAINED``, an open_clip architecture and a pretrained tag (``ViT-B-16/openai``) or a local
  weights file (``ViT-B-16//data/ckpt.pt``);
- ``openai-compatible:NAME@URL``, a VLM behind an endpoint: a spec of kind ``vlm``, asked over HTTP, not
  loaded (:func:`resolve_encoder` refuses it where an image-text encoder is needed).

A URL is none of these: ``ftp://host/w.pt`` or ``ViT-B-16/https://host/w.pt`` is a
:class:`~cladebench.errors.UsageError` that says which scheme or form was given, never a search for a
weights file named like the URL. The name in the message has its credentials stripped.

The spec also carries the name as typed and the key of the model's default embedding column
(``emb_<key>``), so the loader, ``embed``, ``eval`` and run records all read one resolution.

Hub repositories that an alias pins keep their pin when named directly (``hf-hub:imageomics/bioclip``
is the same spec as ``bioclip``), so a cache key or a results file never depends on which spelling
was typed. A revision passed by the caller overrides the pin.

Example:
    >>> spec = resolve_model("bioclip")
    >>> spec.id, spec.revision
    ('hf-hub:imageomics/bioclip', 'ce901ab3c6a913f9e9ef94ce6d27761069f4f01c')
    >>> resolve_model("hf-hub:imageomics/bioclip") == spec.replace(alias=None)
    True
    >>> resolve_model("ViT-B-16/openai").open_clip_name
    'ViT-B-16'
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from cladebench.errors import UnknownNameError, UsageError, unknown_name
from cladebench.models.backbones import TIMM_PREFIX, folder_spec, hub_spec_of_backbone, timm_spec
from cladebench.models.endpoint import ENDPOINT_PREFIX, endpoint_model_spec
from cladebench.models.failures import ModelLoadError
from cladebench.models.failures import ModelUnavailableError as ModelUnavailableError
from cladebench.models.spec import EMBEDS_IMAGES, EMBEDS_TEXTS, ModelSpec, column_key
from cladebench.registry import Registry

HF_HUB_PREFIX = "hf-hub:"
LOCAL_DIR_PREFIX = "local-dir:"

_URL_SCHEME = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*)://")

# Weight files open_clip reads; a ``pretrained`` ending in one of these is a path, not a tag.
_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".npz", ".ckpt")


ModelFactory = Callable[[str | None], ModelSpec]

MODELS: Registry[ModelFactory] = Registry("model")
"""Registry of model aliases: name -> function of the requested revision (``None``: the pinned one)."""

PINNED_REVISIONS: Registry[str] = Registry("pinned Hub repository")
"""Hub repo (``ORG/NAME``) -> the commit its alias pins; applied to ``hf-hub:`` names of the same repo too."""


def register_model(name: str) -> Callable[[ModelFactory], ModelFactory]:
    """Register an alias: the decorated function maps a requested revision (or ``None``) to a spec. An alias
    registered twice is refused: the second would silently change what results recorded under it mean."""
    if name in MODELS:
        raise ValueError(f"model alias {name!r} registered twice")
    return MODELS.register(name)


def list_models() -> dict[str, str]:
    """Aliases and the first line of each one's docstring (what ``cladebench models`` prints)."""
    return {name: (factory.__doc__ or "").strip().splitlines()[0] for name, factory in sorted(MODELS.items())}


def hub_spec(repo: str, revision: str | None = None, *, alias: str | None = None) -> ModelSpec:
    """Spec of an open_clip checkpoint on the Hub; a known repo falls back to its pinned commit."""
    repo = repo.strip().strip("/")
    if repo.count("/") != 1 or not all(repo.split("/")):
        raise ModelLoadError(f"hf-hub model {repo!r}: expected hf-hub:ORG/NAME[@REVISION]")
    revision = revision or PINNED_REVISIONS.get(repo)
    return ModelSpec(id=HF_HUB_PREFIX + repo, open_clip_name=HF_HUB_PREFIX + repo, pretrained=None,
                     revision=revision, source="hf-hub", alias=alias)


def _pinned_hub_model(name: str, repo: str, commit: str, doc: str) -> None:
    """Register an alias for a Hub repo pinned at ``commit`` (a revision passed by the caller wins)."""
    PINNED_REVISIONS.add(repo, commit)

    def factory(revision: str | None) -> ModelSpec:
        return hub_spec(repo, revision or commit, alias=name)

    factory.__doc__ = doc
    register_model(name)(factory)


def open_clip_spec(architecture: str, pretrained: str, revision: str | None = None, *,
                   alias: str | None = None) -> ModelSpec:
    """Spec of an open_clip architecture with a pretrained tag or a weights file (made absolute)."""
    architecture = architecture.strip()
    pretrained = pretrained.strip()
    if not architecture or not pretrained:
        raise ModelLoadError(f"open_clip model {architecture}/{pretrained}: expected NAME/PRETRAINED")
    if _looks_like_path(pretrained):
        pretrained = str(Path(pretrained).expanduser().resolve())
    return ModelSpec(id=f"{architecture}/{pretrained}", open_clip_name=architecture, pretrained=pretrained,
                     revision=revision, source="open_clip", alias=alias)


def _looks_like_path(pretrained: str) -> bool:
    """open_clip tags are bare words (``openai``, ``laion2b_s34b_b88k``); anything path-like is a file."""
    return (
        "/" in pretrained or "\\" in pretrained or pretrained.startswith(("~", "."))
        or pretrained.lower().endswith(_WEIGHT_SUFFIXES) or Path(pretrained).is_file()
    )


# --- aliases -------------------------------------------------------------------------------------

_pinned_hub_model(
    "bioclip", "imageomics/bioclip", "ce901ab3c6a913f9e9ef94ce6d27761069f4f01c",
    "BioCLIP: ViT-B/16, 512-d, trained on TreeOfLife-10M (Stevens et al., CVPR 2024).",
)
_pinned_hub_model(
    "bioclip-2", "imageomics/bioclip-2", "2957b322090f9cb17ae72c71981c7218a28d81e0",
    "BioCLIP 2: ViT-L/14, 768-d, trained on TreeOfLife-200M (Gu et al., 2025).",
)
_pinned_hub_model(
    "bioclip-2.5", "imageomics/bioclip-2.5-vith14", "191d741545e4c741cdef4b22c6eb69c945c1e592",
    "BioCLIP 2.5: ViT-H/14, 1024-d.",
)


@register_model("clip-vit-b-16")
def _clip_vit_b_16(revision: str | None) -> ModelSpec:
    """OpenAI CLIP ViT-B/16, 512-d (open_clip ViT-B-16/openai, QuickGELU)."""
    return open_clip_spec("ViT-B-16", "openai", revision, alias="clip-vit-b-16")


@register_model("clip-vit-l-14")
def _clip_vit_l_14(revision: str | None) -> ModelSpec:
    """OpenAI CLIP ViT-L/14, 768-d (open_clip ViT-L-14/openai, QuickGELU)."""
    return open_clip_spec("ViT-L-14", "openai", revision, alias="clip-vit-l-14")


_BIOTROVE_REPO, _SIGLIP_REPO = "BGLab/BioTrove-CLIP", "timm/ViT-B-16-SigLIP"
_UNPINNED_OPEN_CLIP_REPOS = frozenset({_BIOTROVE_REPO, _SIGLIP_REPO})
"""Hub repos an alias names without a pin: open_clip checkpoints, whose layout is known without looking."""


@register_model("biotrove-clip")
def _biotrove_clip(revision: str | None) -> ModelSpec:
    """BioTrove-CLIP-O: ViT-B/16 from OpenAI CLIP, trained on BioTrove-Train (Yang et al., NeurIPS 2024)."""
    return hub_spec(_BIOTROVE_REPO, revision, alias="biotrove-clip")


@register_model("siglip")
def _siglip(revision: str | None) -> ModelSpec:
    """SigLIP ViT-B/16 at 224 px, 768-d, WebLI (Zhai et al., 2023); its tokenizer needs ``transformers``."""
    return hub_spec(_SIGLIP_REPO, revision, alias="siglip")


@register_model("demo")
def _demo(revision: str | None) -> ModelSpec:
    """The demo's tiny CLIP of the synthetic world, as `cladebench demo` cached it (for demos and tests only)."""
    from cladebench.cache import recorded_demo_model

    folder = recorded_demo_model()
    if folder is None:
        raise ModelLoadError("the demo model is not trained yet: run `cladebench demo` (or `cladebench demo-model "
                             "train`) first, then --model demo is its checkpoint in the cache")
    return _parse_local_dir(LOCAL_DIR_PREFIX + str(folder), revision).replace(alias="demo")


# --- string forms --------------------------------------------------------------------------------

SourceParser = Callable[[str, str | None], ModelSpec]

MODEL_NAME_FORMS: Registry[SourceParser] = Registry("model name form")
"""Registry of string forms: prefix (``hf-hub:``, ``local-dir:``, ``openai-compatible:``) -> parser of the name
(the whole name, prefix included) and the revision."""


def model_source(prefix: str) -> Callable[[SourceParser], SourceParser]:
    """Register a parser for names that start with ``prefix``."""
    return MODEL_NAME_FORMS.register(prefix)


def _merge_revisions(name: str, in_name: str | None, given: str | None) -> str | None:
    if in_name and given and in_name != given:
        raise ModelLoadError(f"model {name!r} names revision {in_name!r} but revision={given!r} was passed")
    return in_name or given


@model_source(HF_HUB_PREFIX)
def _parse_hf_hub(name: str, revision: str | None) -> ModelSpec:
    repo, _, in_name = name.removeprefix(HF_HUB_PREFIX).partition("@")
    spec = hub_spec(repo, _merge_revisions(name, in_name or None, revision))
    if spec.hub_repo in PINNED_REVISIONS or spec.hub_repo in _UNPINNED_OPEN_CLIP_REPOS:
        return spec
    try:  # a timm or transformers repo is an image-only backbone (its config files say so)
        backbone = hub_spec_of_backbone(str(spec.hub_repo), spec.revision)
    except ImportError:  # no huggingface_hub: nothing can be read from the Hub, and the load says so
        backbone = None
    return backbone or spec


@model_source(LOCAL_DIR_PREFIX)
def _parse_local_dir(name: str, revision: str | None) -> ModelSpec:
    rest = name.removeprefix(LOCAL_DIR_PREFIX)
    if not rest.strip():
        raise ModelLoadError("local-dir: needs a path, as in local-dir:/models/my-clip")
    path = str(Path(rest.strip()).expanduser().resolve())
    # A folder has no revision of its own; the loader records a hash of the weights instead.
    backbone = folder_spec(path, revision)
    if backbone is not None:
        return backbone
    return ModelSpec(id=LOCAL_DIR_PREFIX + path, open_clip_name=LOCAL_DIR_PREFIX + path, pretrained=None,
                     revision=revision, source="local-dir")


@model_source(TIMM_PREFIX)
def _parse_timm(name: str, revision: str | None) -> ModelSpec:
    return timm_spec(name, revision)


@model_source(ENDPOINT_PREFIX)
def _parse_endpoint(name: str, revision: str | None) -> ModelSpec:
    return endpoint_model_spec(name, revision)


_FORMS_HINT = (" Or name a model as hf-hub:ORG/NAME[@REVISION], local-dir:PATH, timm:ARCH[.TAG], or an open_clip"
               " NAME/PRETRAINED (pretrained tag or weights file).")


def _refuse_urls(name: str) -> None:
    """A URL is not a model that open_clip loads: say so, rather than look for a weights file named like it."""
    from cladebench.provenance import redact_text

    found = _URL_SCHEME.search(name)
    if found is not None:
        scheme = found["scheme"].lower()
        what = ("a URL is not a model name" if scheme in ("http", "https")
                else f"the scheme {found['scheme']}:// is not supported for a model")
        raise UsageError(f"model {redact_text(name)!r}: {what}; weights are read from the Hugging Face Hub or a "
                         f"local file, not fetched from a URL (download the file and pass its path).{_FORMS_HINT}")


def _resolve(name: str, revision: str | None) -> ModelSpec:
    if name.lower() in MODELS:  # aliases are case-insensitive: BioCLIP is bioclip
        return MODELS[name.lower()](revision)
    if not name.startswith(ENDPOINT_PREFIX):  # only an endpoint's name may hold a URL
        _refuse_urls(name)
    for prefix, parser in MODEL_NAME_FORMS.items():
        if name.startswith(prefix):
            return parser(name, revision)
    architecture, slash, pretrained = name.partition("/")
    if slash and architecture and pretrained:
        return open_clip_spec(architecture, pretrained, revision)
    error = unknown_name("model", name, MODELS)
    raise UnknownNameError(str(error) + _FORMS_HINT) from None


def resolve_model(name: str, revision: str | None = None) -> ModelSpec:
    """The spec a model name means (see the module docstring); reads no weights, sends no request, needs no torch.

    Raises :class:`~cladebench.errors.UnknownNameError` for a bare name that is not an alias, listing
    the aliases and the closest one, and :class:`~cladebench.errors.UsageError` for a URL or a malformed
    endpoint.
    """
    name = name.strip()
    spec = _resolve(name, revision)
    return spec.replace(name=name, column_key=column_key(name) if spec.can(EMBEDS_IMAGES) else None)


def resolve_encoder(name: str, revision: str | None = None) -> ModelSpec:
    """The spec of a name that must mean a model that embeds images (to embed them, or to find the column holding
    its embeddings); a model behind an endpoint is a :class:`~cladebench.errors.UsageError` that says why."""
    return require_encoder(resolve_model(name, revision))


def require_encoder(spec: ModelSpec) -> ModelSpec:
    """``spec`` when the model embeds images (an image-text encoder or an image-only backbone); any other (a model
    behind an endpoint) is a :class:`~cladebench.errors.UsageError` saying what it is."""
    if not spec.can(EMBEDS_IMAGES):
        from cladebench.provenance import redact_text

        raise UsageError(f"model {redact_text(spec.name or spec.id)!r} is {spec.traits.described}: it does not embed "
                         "images, so it serves the tasks that take it (rerank, lineage), not those that need image "
                         "embeddings")
    return spec


def require_texts(spec: ModelSpec, purpose: str) -> ModelSpec:
    """``spec`` when the model embeds texts; an image-only model is a :class:`~cladebench.errors.UsageError`
    naming ``purpose`` (``text search``), the model and what it lacks."""
    if not spec.can(EMBEDS_TEXTS):
        from cladebench.provenance import redact_text

        raise UsageError(f"{purpose} needs a text tower; model {redact_text(spec.name or spec.id)!r} is "
                         f"{spec.traits.described}, without it")
    return spec
