"""What ``openai-compatible:NAME@URL`` means: a generative model asked over HTTP, not loaded.

A VLM behind an OpenAI-compatible endpoint (vLLM, OpenAI) stands where an image-text encoder would in the
rerank and lineage tasks. Its name is parsed here, apart from the client (:mod:`cladebench.models.vlm`),
because resolving a model name (:func:`cladebench.models.registry.resolve_model`) must stay a cheap string
operation: it needs :func:`parse_endpoint`, not the HTTP transport, the image preparation and the cache.

:class:`EndpointModel` is the built model of an endpoint spec: it holds the spec and asks nothing until a
task sends its questions through :class:`cladebench.models.vlm.VLMClient`.

Example:
    >>> spec = parse_endpoint("openai-compatible:Qwen2-VL-7B@http://127.0.0.1:8000/v1/")
    >>> spec.name, spec.base_url
    ('Qwen2-VL-7B', 'http://127.0.0.1:8000/v1')
    >>> parse_endpoint("openai-compatible:m@http://user:pw@host/v1").id
    'openai-compatible:m@http://host/v1'
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cladebench.errors import CladebenchError, UsageError
from cladebench.models.spec import ModelKind, ModelSpec

ENDPOINT_PREFIX = "openai-compatible:"
"""How a model name says that the model is asked over HTTP at an OpenAI-compatible endpoint."""

_ENDPOINT_FORM = re.compile(r"^(?P<name>.+?)@(?P<url>https?://\S+)$")
_OTHER_SCHEME = re.compile(r"^(?P<name>.+?)@(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*)://")


@dataclass(frozen=True)
class EndpointSpec:
    """Which model on which server: what ``openai-compatible:NAME@URL`` means."""

    name: str
    """The ``model`` field of each request (vLLM's ``--served-model-name``, or an OpenAI model id)."""
    base_url: str
    """The API root without a trailing slash, ending where ``/chat/completions`` is appended (``.../v1``)."""

    @property
    def display_url(self) -> str:
        """``base_url`` without credentials (userinfo, secret query parameters): what messages and records show."""
        from cladebench.provenance import redact_url

        return redact_url(self.base_url)

    @property
    def id(self) -> str:
        """The model id for provenance: ``openai-compatible:NAME@URL``, the URL without credentials."""
        return f"{ENDPOINT_PREFIX}{self.name}@{self.display_url}"

    @property
    def chat_url(self) -> str:
        """``/chat/completions`` appended to the URL's path, before its query (``.../v1?api-version=2`` ->
        ``.../v1/chat/completions?api-version=2``): appended to the whole URL it would land inside the query."""
        from urllib.parse import urlsplit, urlunsplit

        parts = urlsplit(self.base_url)
        return urlunsplit(parts._replace(path=parts.path.rstrip("/") + "/chat/completions"))

    def __repr__(self) -> str:  # the URL without credentials, as everywhere else it is shown
        return f"EndpointSpec(name={self.name!r}, base_url={self.display_url!r})"


def parse_endpoint(model_id: str) -> EndpointSpec:
    """``openai-compatible:NAME@URL`` -> :class:`EndpointSpec`; the URL is the first ``@http(s)://`` part.

    A URL of another scheme (``ftp://``, ``file://``) is a :class:`~cladebench.errors.UsageError` that names
    the scheme; so is a model id without a name or a URL.
    """
    from cladebench.provenance import redact_text

    text = model_id.strip()
    shown = redact_text(model_id)
    example = f"as in {ENDPOINT_PREFIX}Qwen2-VL-7B@http://127.0.0.1:8000/v1"
    if not text.startswith(ENDPOINT_PREFIX):
        raise CladebenchError(f"model id {shown!r} is not an endpoint; expected {ENDPOINT_PREFIX}NAME@URL, {example}")
    rest = text[len(ENDPOINT_PREFIX):]
    match = _ENDPOINT_FORM.match(rest)
    if match is None or not match["name"].strip():
        other = _OTHER_SCHEME.match(rest)
        if other is not None and other["name"].strip() and match is None:
            raise UsageError(f"model id {shown!r}: the scheme {other['scheme']}:// is not supported for an endpoint; "
                             f"expected {ENDPOINT_PREFIX}NAME@URL with an http:// or https:// URL, {example}")
        raise UsageError(f"model id {shown!r}: expected {ENDPOINT_PREFIX}NAME@URL with an http(s) URL, {example}")
    return EndpointSpec(name=match["name"].strip(), base_url=match["url"].rstrip("/"))


def endpoint_model_spec(name: str, revision: str | None = None) -> ModelSpec:
    """The :class:`ModelSpec` of an endpoint name (checked by :func:`parse_endpoint`); an endpoint has no
    revision to pin, so a ``revision`` is refused rather than recorded as if it had been honoured."""
    parse_endpoint(name)
    if revision is not None:
        raise UsageError(f"--revision {revision!r}: a model behind an endpoint has no revision to pin (the server "
                         "decides which weights answer)")
    text = name.strip()
    return ModelSpec(id=text, open_clip_name=None, pretrained=None, revision=None, source="openai-compatible",
                     kind="vlm", name=text, column_key=None)


@dataclass(frozen=True)
class EndpointModel:
    """A VLM behind an OpenAI-compatible endpoint, standing where an image-text encoder would (built from a spec
    of kind ``vlm`` by :func:`cladebench.models.build.build_model`; nothing is asked until a task asks)."""

    spec: ModelSpec
    """The resolved name (``openai-compatible:NAME@URL``, credentials included: requests need them)."""

    def __post_init__(self) -> None:
        if self.spec.kind != "vlm":
            raise CladebenchError(f"EndpointModel needs a spec of kind 'vlm', not {self.spec.kind!r} ({self.spec.id})")

    @classmethod
    def from_name(cls, name: str) -> EndpointModel:
        """The endpoint model a name means (a malformed id or an unsupported scheme: a usage error)."""
        return cls(endpoint_model_spec(name))

    @property
    def kind(self) -> ModelKind:
        """Always ``vlm``: a generative model asked questions, not an encoder of images and texts."""
        return self.spec.kind

    @property
    def model_id(self) -> str:
        """``openai-compatible:NAME@URL`` as given (run records redact its credentials when written)."""
        return self.spec.id

    @property
    def revision(self) -> None:
        """An endpoint has no revision this tool can pin or read."""
        return None

    @property
    def endpoint(self) -> EndpointSpec:
        """Name and URL to send requests to."""
        return parse_endpoint(self.spec.id)

    def describe(self) -> dict[str, object]:
        """Provenance of what this model answers: its id, no revision, its kind."""
        return {"model_id": self.model_id, "revision": None, "kind": self.kind}


__all__ = ["ENDPOINT_PREFIX", "EndpointModel", "EndpointSpec", "endpoint_model_spec", "parse_endpoint"]
