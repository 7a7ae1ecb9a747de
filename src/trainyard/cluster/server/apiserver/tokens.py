"""Service-account tokens: ``TokenRequest`` (``serviceaccounts/<name>/token``) and ``TokenReview``.

What a kubelet and an in-cluster server need of ``authentication.k8s.io/v1``: the node asks for a
token to fill a projected ``serviceAccountToken`` volume (audience, lifetime, bound to its pod),
and a server that received such a token asks the API server whether it is genuine and meant for
it (``tokenreviews`` with the audiences it accepts), as Kubeflow Trainer's status server does.

Tokens are JWTs with the claims kube-apiserver writes (``iss``, ``sub``
``system:serviceaccount:<ns>:<name>``, ``aud``, ``exp``, ``iat``, ``nbf``, ``jti`` and
``kubernetes.io`` with namespace, service account and pod), signed HS256 with a random key kept
0600 in ``pki/sa-signing.key``: only this API server issues and checks them, so no public key
needs publishing. A review accepts a token only while its signature holds, it has not expired,
one of its audiences is asked for, and the pod it is bound to still exists with the same uid.
These tokens are not credentials for the API server itself (only the owner's bearer token is).

A token lives as long as its request asks (at least 10 minutes), or at most the plane's cap
(``tokenlife``) when one is set: a longer request is granted that long, and the answer's
``spec.expirationSeconds`` says so, as kube-apiserver's does.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import secrets
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from trainyard.api.meta import Obj
from trainyard.cluster.paths import Layout
from trainyard.cluster.server.apiserver import errors
from trainyard.cluster.server.apiserver.auth import write_private
from trainyard.cluster.server.apiserver.objects import Objects
from trainyard.cluster.server.apiserver.tokenlife import max_expiration

GROUP_VERSION = "authentication.k8s.io/v1"
ISSUER = "https://kubernetes.default.svc.cluster.local"
"""kube-apiserver's default ``--service-account-issuer``, also the audience of a request that names none."""
DEFAULT_SECONDS = 3600
MIN_SECONDS = 600
MAX_SECONDS = 2**32
POD_NAME = "authentication.kubernetes.io/pod-name"
POD_UID = "authentication.kubernetes.io/pod-uid"
CREDENTIAL_ID = "authentication.kubernetes.io/credential-id"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def signing_key(layout: Layout) -> bytes:
    """This home's token signing key, created (0600) on first use; deleting it invalidates every token."""
    path = layout.pki / "sa-signing.key"
    try:
        key = path.read_bytes().strip()
    except FileNotFoundError:
        key = b""
    if len(key) < 32:
        layout.pki.mkdir(mode=0o700, parents=True, exist_ok=True)
        key = secrets.token_hex(32).encode()
        write_private(path, key + b"\n")
    return key


@dataclass(frozen=True)
class TokenIssuer:
    key: bytes
    # Read from the environment when the API server makes its issuer (the plane's process inherits it).
    max_seconds: int | None = field(default_factory=max_expiration)

    def mint(self, claims: Obj) -> str:
        header = _b64(json.dumps({"alg": "HS256", "typ": "JWT"}, separators=(",", ":")).encode())
        payload = _b64(json.dumps(claims, separators=(",", ":"), sort_keys=True).encode())
        signature = hmac.new(self.key, f"{header}.{payload}".encode(), hashlib.sha256).digest()
        return f"{header}.{payload}.{_b64(signature)}"

    def claims(self, token: str, now: datetime) -> Obj | None:
        """The token's claims when this issuer signed it and it is valid at ``now``; else None."""
        parts = token.strip().split(".")
        if len(parts) != 3:
            return None
        expected = hmac.new(self.key, f"{parts[0]}.{parts[1]}".encode(), hashlib.sha256).digest()
        try:
            header = json.loads(_unb64(parts[0]))
            if header.get("alg") != "HS256" or not hmac.compare_digest(_unb64(parts[2]), expected):
                return None
            claims = json.loads(_unb64(parts[1]))
        except (ValueError, binascii.Error, AttributeError):
            return None
        stamp = now.timestamp()
        if not isinstance(claims, dict) or claims.get("iss") != ISSUER:
            return None
        if not stamp < float(claims.get("exp") or 0) or float(claims.get("nbf") or 0) > stamp + 60:
            return None
        return claims


def _rt(objects: Objects, plural: str) -> Any:
    return objects.registry.lookup("", "v1", plural)


def _service_account(objects: Objects, namespace: str, name: str) -> Obj:
    """The ServiceAccount; ``default`` exists in every namespace (kube-controller-manager's job) even unstored."""
    try:
        return objects.get(_rt(objects, "serviceaccounts"), namespace, name)
    except errors.ApiError as exc:
        if exc.code != 404 or name != "default":
            raise
        return {"metadata": {"name": name, "namespace": namespace, "uid": ""}}


def _invalid(field: str, message: str) -> errors.ApiError:
    return errors.ApiError(422, "Invalid", f"TokenRequest.authentication.k8s.io is invalid: {field}: {message}")


def request(objects: Objects, issuer: TokenIssuer, namespace: str, name: str, body: Any, now: datetime) -> Obj:
    """Answer ``POST .../serviceaccounts/<name>/token``: the ``TokenRequest`` with ``status.token``."""
    sa = _service_account(objects, namespace, name)
    spec = (body.get("spec") if isinstance(body, dict) else None) or {}
    audiences = spec.get("audiences") or [ISSUER]
    if not isinstance(audiences, list) or not all(isinstance(a, str) and a for a in audiences):
        raise _invalid("spec.audiences", "must be a list of non-empty strings")
    seconds = spec.get("expirationSeconds", DEFAULT_SECONDS)
    if isinstance(seconds, bool) or not isinstance(seconds, int) or not MIN_SECONDS <= seconds <= MAX_SECONDS:
        raise _invalid("spec.expirationSeconds", f"may not specify a duration less than {MIN_SECONDS} seconds")
    if issuer.max_seconds is not None:
        seconds = min(seconds, issuer.max_seconds)
    k8s: Obj = {
        "namespace": namespace,
        "serviceaccount": {"name": name, "uid": (sa.get("metadata") or {}).get("uid") or ""},
    }
    bound = spec.get("boundObjectRef")
    if bound:
        if bound.get("kind") != "Pod" or bound.get("apiVersion", "v1") != "v1":
            raise _invalid("spec.boundObjectRef.kind", "only a v1 Pod is supported by this API server")
        pod = objects.get(_rt(objects, "pods"), namespace, bound.get("name") or "")
        uid = (pod.get("metadata") or {}).get("uid") or ""
        if bound.get("uid") and bound["uid"] != uid:
            raise errors.ApiError(
                409,
                "Conflict",
                f"the UID in the bound object reference ({bound['uid']}) does not match the Pod ({uid})",
            )
        k8s["pod"] = {"name": pod["metadata"]["name"], "uid": uid}
    issued = int(now.timestamp())
    expires = issued + seconds
    token = issuer.mint(
        {
            "aud": audiences,
            "exp": expires,
            "iat": issued,
            "nbf": issued,
            "iss": ISSUER,
            "jti": str(uuid.uuid4()),
            "sub": f"system:serviceaccount:{namespace}:{name}",
            "kubernetes.io": k8s,
        }
    )
    stamp = (now.replace(microsecond=0) + timedelta(seconds=seconds)).isoformat().replace("+00:00", "Z")
    return {
        "kind": "TokenRequest",
        "apiVersion": GROUP_VERSION,
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"audiences": audiences, "expirationSeconds": seconds, "boundObjectRef": bound or None},
        "status": {"token": token, "expirationTimestamp": stamp},
    }


def review(objects: Objects, issuer: TokenIssuer, body: Any, now: datetime) -> Obj:
    """Answer ``POST /apis/authentication.k8s.io/v1/tokenreviews``: who the token is, if anyone."""
    if not isinstance(body, dict) or body.get("kind", "TokenReview") != "TokenReview":
        raise errors.bad_request("expected a TokenReview")
    spec = body.get("spec") or {}
    wanted = spec.get("audiences") or [ISSUER]
    answer: Obj = {"kind": "TokenReview", "apiVersion": GROUP_VERSION, "metadata": {}, "spec": spec}
    claims = issuer.claims(str(spec.get("token") or ""), now)
    if claims is None:
        return {**answer, "status": {"authenticated": False, "error": "invalid bearer token"}}
    given = claims.get("aud") or []
    matched = [a for a in wanted if a in given]
    if not matched:
        why = f"token audiences {given} is invalid for the target audiences {wanted}"
        return {**answer, "status": {"authenticated": False, "error": why}}
    k8s = claims.get("kubernetes.io") or {}
    namespace = k8s.get("namespace") or ""
    extra: dict[str, list[str]] = {CREDENTIAL_ID: [f"JTI={claims.get('jti', '')}"]}
    if pod := k8s.get("pod"):
        try:
            current = objects.get(_rt(objects, "pods"), namespace, pod.get("name") or "")
        except errors.ApiError:
            current = None
        if current is None or (current.get("metadata") or {}).get("uid") != pod.get("uid"):
            why = f"pod {pod.get('name')!r} (uid {pod.get('uid')}) the token is bound to no longer exists"
            return {**answer, "status": {"authenticated": False, "error": why}}
        extra |= {POD_NAME: [pod.get("name") or ""], POD_UID: [pod.get("uid") or ""]}
    user = {
        "username": claims.get("sub") or "",
        "uid": (k8s.get("serviceaccount") or {}).get("uid") or "",
        "groups": ["system:serviceaccounts", f"system:serviceaccounts:{namespace}", "system:authenticated"],
        "extra": extra,
    }
    return {**answer, "status": {"authenticated": True, "user": user, "audiences": matched}}
