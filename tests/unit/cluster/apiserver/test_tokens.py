"""Service-account tokens: TokenRequest bound to a pod, TokenReview with audiences and the pod's life."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from trainyard.cluster.paths import Layout
from trainyard.cluster.server.apiserver import errors, tokenlife, tokens
from trainyard.cluster.server.apiserver.objects import Objects
from trainyard.cluster.server.apiserver.registry import Registry
from trainyard.cluster.server.storage.store import Store
from trainyard.operator.statusserver import bearer

NOW = datetime(2026, 11, 26, 12, 0, 0, tzinfo=UTC)


@pytest.fixture
def objects(tmp_path: Path) -> Objects:
    objs = Objects(Store(tmp_path / "store.db"), Registry())
    objs.create(objs.registry.lookup("", "v1", "namespaces"), "", {"metadata": {"name": "ns"}})
    pods = objs.registry.lookup("", "v1", "pods")
    objs.create(pods, "ns", {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}]}})
    return objs


def _token(objects: Objects, issuer: tokens.TokenIssuer, **spec: object) -> str:
    uid = objects.get(objects.registry.lookup("", "v1", "pods"), "ns", "p")["metadata"]["uid"]
    body = {"spec": {"audiences": ["aud"], "boundObjectRef": {"kind": "Pod", "name": "p", "uid": uid}, **spec}}
    answer = tokens.request(objects, issuer, "ns", "default", body, NOW)
    assert answer["status"]["expirationTimestamp"] == "2026-11-26T13:00:00Z"
    return str(answer["status"]["token"])


def test_a_bound_token_is_reviewed_for_its_audience_while_its_pod_lives(objects: Objects, tmp_path: Path) -> None:
    issuer = tokens.TokenIssuer(tokens.signing_key(Layout(tmp_path)))
    assert tokens.signing_key(Layout(tmp_path)) == issuer.key  # kept, 0600
    assert (tmp_path / "pki" / "sa-signing.key").stat().st_mode & 0o077 == 0
    token = _token(objects, issuer)
    ok = tokens.review(objects, issuer, {"spec": {"token": token, "audiences": ["aud", "x"]}}, NOW)["status"]
    assert ok["authenticated"] and ok["audiences"] == ["aud"]
    assert ok["user"]["username"] == "system:serviceaccount:ns:default"
    assert ok["user"]["extra"]["authentication.kubernetes.io/pod-name"] == ["p"]
    other = tokens.review(objects, issuer, {"spec": {"token": token, "audiences": ["x"]}}, NOW)["status"]
    assert not other["authenticated"] and "audiences" in other["error"]
    later = NOW + timedelta(hours=2)
    assert not tokens.review(objects, issuer, {"spec": {"token": token, "audiences": ["aud"]}}, later)["status"][
        "authenticated"
    ]
    forged = tokens.TokenIssuer(b"another key" * 4)
    assert not tokens.review(objects, forged, {"spec": {"token": token, "audiences": ["aud"]}}, NOW)["status"][
        "authenticated"
    ]
    objects.delete(objects.registry.lookup("", "v1", "pods"), "ns", "p", grace_seconds=0)
    gone = tokens.review(objects, issuer, {"spec": {"token": token, "audiences": ["aud"]}}, NOW)["status"]
    assert not gone["authenticated"] and "no longer exists" in gone["error"]


def test_token_requests_check_the_account_the_lifetime_and_the_bound_pod(objects: Objects) -> None:
    issuer = tokens.TokenIssuer(b"k" * 32)
    with pytest.raises(errors.ApiError) as missing:
        tokens.request(objects, issuer, "ns", "robot", {"spec": {}}, NOW)
    assert missing.value.code == 404
    with pytest.raises(errors.ApiError) as short:
        tokens.request(objects, issuer, "ns", "default", {"spec": {"expirationSeconds": 10}}, NOW)
    assert short.value.code == 422
    with pytest.raises(errors.ApiError) as stale:
        _token(objects, issuer, boundObjectRef={"kind": "Pod", "name": "p", "uid": "old"})
    assert stale.value.code == 409


def test_the_planes_cap_shortens_a_tokens_life_and_the_answer_says_so(objects: Objects) -> None:
    issuer = tokens.TokenIssuer(b"k" * 32, max_seconds=5)
    answer = tokens.request(objects, issuer, "ns", "default", {"spec": {"expirationSeconds": 3600}}, NOW)
    assert answer["spec"]["expirationSeconds"] == 5
    assert answer["status"]["expirationTimestamp"] == "2026-11-26T12:00:05Z"
    token = answer["status"]["token"]
    review = {"spec": {"token": token}}
    assert tokens.review(objects, issuer, review, NOW + timedelta(seconds=4))["status"]["authenticated"]
    assert not tokens.review(objects, issuer, review, NOW + timedelta(seconds=5))["status"]["authenticated"]
    # a request shorter than kube-apiserver's minimum is still refused
    with pytest.raises(errors.ApiError) as short:
        tokens.request(objects, issuer, "ns", "default", {"spec": {"expirationSeconds": 10}}, NOW)
    assert short.value.code == 422


def test_the_cap_comes_from_the_environment() -> None:
    assert tokenlife.max_expiration({}) is None
    assert tokenlife.max_expiration({tokenlife.MAX_EXPIRATION_ENV: " 30 "}) == 30
    for bad in ("0", "-1", "5s"):
        with pytest.raises(ValueError, match="expected a positive whole number of seconds"):
            tokenlife.max_expiration({tokenlife.MAX_EXPIRATION_ENV: bad})


def test_the_status_server_reads_rfc_7235_bearer_credentials() -> None:
    assert bearer("Bearer abc") == bearer("  bearer   abc ") == "abc"
    assert bearer(None) == bearer("Basic abc") == bearer("Bearer a b") == bearer("Bearer") == ""
