"""What every recorded artefact says about where it came from: the software that made it, and no secrets.

Run records, embedding-column metadata, model descriptions and training records all name their software
the same way (:func:`software_versions`), so two of them can be compared field by field. This is a
foundation module: models, the store, embed, evaluate and the demo all import it, and it imports none of them.

Secrets are kept out of everything the tool records: userinfo and secret query parameters of URLs.

An endpoint is often written with its credentials in it (``http://user:pass@host/v1``), and a signed
image or dataset URL carries its signature in the query (``?X-Amz-Signature=...``, ``?token=...``).
The request needs them; a run record, a report or an error message must not keep them, because those
are shared. :func:`redact_url` strips them from one URL, :func:`redact_text` from every URL inside a
string (a command line, a model id like ``openai-compatible:NAME@URL``, an error message), and
:func:`redact` from every string of a JSON-like value. Run records are redacted as a whole when they
are written and read (:mod:`cladebench.evaluate.record`), so no field can be forgotten.

What counts as secret: the userinfo part (``user:password@``), and query parameters whose name,
compared without case, is in :data:`SECRET_QUERY_PARAMETERS` or starts with one of
:data:`SECRET_QUERY_PREFIXES`. They are removed, not masked: a recorded URL says where, never how to
get in. Everything else of the URL is kept as written.

Example:
    >>> redact_url("http://user:pass@host:8000/v1")
    'http://host:8000/v1'
    >>> redact_url("https://b.s3.amazonaws.com/p.jpg?X-Amz-Signature=abc&size=large&api_key=k")
    'https://b.s3.amazonaws.com/p.jpg?size=large'
    >>> redact_text("openai-compatible:m@http://u:p@127.0.0.1:8000/v1")
    'openai-compatible:m@http://127.0.0.1:8000/v1'
"""

from __future__ import annotations

import platform
import re
import urllib.parse
from importlib import metadata
from typing import TypeVar, cast

from cladebench import __version__

_Value = TypeVar("_Value")

SECRET_QUERY_PARAMETERS = frozenset({
    "key", "api_key", "apikey", "api-key", "token", "access_token", "id_token", "refresh_token", "auth",
    "sig", "signature", "password", "passwd", "secret", "client_secret",
})
"""Query parameter names (lower case) whose values are credentials: removed from recorded URLs."""

SECRET_QUERY_PREFIXES = ("x-amz-", "x-goog-")
"""Name prefixes (lower case) of signed-URL parameters (S3 and GCS presigned URLs): removed as well."""

NUMBER_CHANGING_PACKAGES = ("pylance", "pyarrow", "numpy", "scipy", "scikit-learn", "pillow", "torch", "torchvision",
                            "open_clip_torch")
"""Packages whose version can change a reported number: every record names the installed ones."""


def software_versions(extra: tuple[str, ...] = ()) -> dict[str, str]:
    """Versions of the packages that can change a number (installed ones only), plus ``extra`` packages.

    One function for run records, embedding metadata, model descriptions and training records, so
    every artefact names its software the same way.
    """
    versions = {"cladebench": __version__, "python": platform.python_version(), "machine": platform.machine()}
    for package in (*NUMBER_CHANGING_PACKAGES, *extra):
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            continue
    return versions


_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://[^\s'\"<>]+")


def _secret_parameter(name: str) -> bool:
    name = urllib.parse.unquote_plus(name).strip().lower()
    return name in SECRET_QUERY_PARAMETERS or name.startswith(SECRET_QUERY_PREFIXES)


def redact_url(url: str) -> str:
    """``url`` without userinfo and without secret query parameters; unchanged when it has neither."""
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:  # e.g. an unbalanced IPv6 bracket: keep what can be kept, drop the rest
        scheme, _, rest = url.partition("://")
        return f"{scheme}://{rest.rpartition('@')[2].split('?')[0]}"
    netloc = parts.netloc.rpartition("@")[2]
    query = "&".join(p for p in parts.query.split("&") if p and not _secret_parameter(p.partition("=")[0]))
    if netloc == parts.netloc and query == parts.query:
        return url
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def url_secrets(url: str) -> list[str]:
    """The secret values ``url`` carries (its userinfo password and user, secret query parameters' values), so a
    text that repeats one of them without the URL around it (a server echoing its request) can be cleaned too."""
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return []
    found = [value for value in (parts.password, parts.username) if value]
    for pair in parts.query.split("&"):
        name, _, value = pair.partition("=")
        if value and _secret_parameter(name):
            found.extend({value, urllib.parse.unquote_plus(value)})
    return [value for value in found if len(value) >= 4]  # shorter ones would blank out ordinary words


def redact_text(text: str) -> str:
    """``text`` with every URL in it passed through :func:`redact_url`."""
    if "://" not in text:
        return text
    return _URL.sub(lambda found: redact_url(found.group(0)), text)


def redact(value: _Value) -> _Value:
    """A copy of a JSON-like value (dicts, lists, tuples, strings) with every string passed through
    :func:`redact_text`; other values as they are."""
    if isinstance(value, str):
        return cast("_Value", redact_text(value))
    if isinstance(value, dict):
        return cast("_Value", {redact(k) if isinstance(k, str) else k: redact(v) for k, v in value.items()})
    if isinstance(value, (list, tuple)):
        return cast("_Value", type(value)(redact(v) for v in value))
    return value


__all__ = ["NUMBER_CHANGING_PACKAGES", "SECRET_QUERY_PARAMETERS", "SECRET_QUERY_PREFIXES", "redact", "redact_text",
           "redact_url", "software_versions"]
