"""Manifests checked against the official ``kubernetes`` client's models (generated from the Kubernetes
OpenAPI spec): a manifest that loses a field on a round trip through its kind's model has a field
Kubernetes does not define (a typo), and one without a required field does not load."""

from __future__ import annotations

from typing import Any

import kubernetes.client

_API = kubernetes.client.ApiClient()


def strict_round_trip(doc: dict[str, Any]) -> dict[str, Any]:
    """``doc`` through the official client's model of its kind (unknown fields are dropped on the way)."""
    version = doc["apiVersion"].rpartition("/")[2]
    model = f"{version[0].upper()}{version[1:]}{doc['kind']}"
    # The client's own deserializer (private, but the one its API calls use for response bodies).
    obj = _API._ApiClient__deserialize(doc, model)  # type: ignore[attr-defined]
    back: dict[str, Any] = _API.sanitize_for_serialization(obj)
    return back
