"""Answers kept on disk, one small JSON file per request, named by a hash that never includes a credential."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path

from cladebench.models.endpoint import EndpointSpec
from cladebench.models.vlm.config import VLMConfig
from cladebench.models.vlm.images import PREPARATION_VERSION
from cladebench.paths import atomic_write

IMAGE_PLACEHOLDER = "<image>"
"""Stands in for the image's data URL in the payload that is hashed and cached."""



class ResponseCache:
    """One JSON file per request key: ``<root>/<key[:2]>/<key>.json`` holding the response body."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    def path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict[str, object] | None:
        """The stored response, or ``None`` when absent or unreadable (a damaged file only costs a refetch)."""
        try:
            entry = json.loads(self.path(key).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if not isinstance(entry, dict) or entry.get("key") != key or not isinstance(entry.get("response"), dict):
            return None
        return entry["response"]

    def put(self, key: str, request: Mapping[str, object], response: Mapping[str, object]) -> None:
        """Store a response (with the image-free request, for a person reading the file); temp file + rename."""
        path = self.path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        body = json.dumps({"key": key, "request": request, "response": response}, ensure_ascii=False)
        atomic_write(path, body)


def request_key(spec: EndpointSpec, payload: Mapping[str, object], image_sha256: str | None,
                config: VLMConfig) -> str:
    """SHA-256 naming a request: endpoint, image-free payload, image digest and preparation; never the API key."""
    identity = {
        "model": spec.name,
        "base_url": spec.display_url,  # credentials are neither hashed nor kept, like the API key
        "payload": payload,
        "image_sha256": image_sha256,
        "image_preparation": None if image_sha256 is None else {
            "version": PREPARATION_VERSION, "max_side": config.max_image_side, "jpeg_quality": config.jpeg_quality,
        },
    }
    canonical = json.dumps(identity, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()
