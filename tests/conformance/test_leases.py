"""``coordination.k8s.io/v1`` Lease through kubectl: discovery, ``NAME HOLDER AGE``, validation as
kube-apiserver words it, and the resourceVersion guard leader election relies on.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from kubectl_helpers import apply, by_name, headers, namespace, table

from conftest import Kubectl

pytestmark = pytest.mark.e2e


@pytest.fixture
def ns(kubectl: Kubectl) -> Iterator[str]:
    yield from namespace(kubectl, "lease")


def lease(name: str, ns: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": name, "namespace": ns},
        "spec": spec,
    }


def test_leases_are_discovered_as_a_namespaced_builtin(kubectl: Kubectl) -> None:
    row = by_name(table(kubectl("api-resources")))["leases"]
    assert (row["APIVERSION"], row["NAMESPACED"], row["KIND"]) == ("coordination.k8s.io/v1", "true", "Lease")
    assert kubectl("api-resources", "--api-group=coordination.k8s.io", "-o", "name").split() == [
        "leases.coordination.k8s.io"
    ]
    assert set(kubectl("api-versions").split()) >= {"coordination.k8s.io/v1"}


def test_get_leases_prints_name_holder_age(kubectl: Kubectl, ns: str) -> None:
    spec = {"holderIdentity": "replica-a", "leaseDurationSeconds": 15, "leaseTransitions": 0}
    assert "lease.coordination.k8s.io/held created" in apply(kubectl, lease("held", ns, **spec))
    assert "lease.coordination.k8s.io/free created" in apply(kubectl, lease("free", ns))
    listing = kubectl("get", "leases", "-n", ns)
    assert headers(listing) == ["NAME", "HOLDER", "AGE"]
    rows = {line.split()[0]: line.split() for line in listing.splitlines()[1:]}
    assert rows["held"][1] == "replica-a"
    assert len(rows["free"]) == 2  # no holder: an empty cell, as kubectl prints it for real clusters
    stored = kubectl.json("get", "lease", "held", "-n", ns)
    assert stored["spec"] == spec


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"leaseDurationSeconds": 0}, "spec.leaseDurationSeconds: Invalid value: 0: must be greater than 0"),
        (
            {"leaseTransitions": -1},
            "spec.leaseTransitions: Invalid value: -1: must be greater than or equal to 0",
        ),
        ({"preferredHolder": "x"}, "spec.preferredHolder: Forbidden: may only be specified if `strategy` is defined"),
        ({"strategy": "Newest"}, 'spec.strategy: Unsupported value: "Newest": supported values: '),
    ],
)
def test_invalid_leases_get_422_with_field_paths(kubectl: Kubectl, ns: str, spec: Any, expected: str) -> None:
    result = kubectl.run("apply", "-f", "-", input=json.dumps(lease("bad", ns, **spec)))
    assert result.returncode == 1
    assert 'The Lease "bad" is invalid: ' in result.stderr and expected in result.stderr, result.stderr


def test_wrong_json_type_is_a_400(kubectl: Kubectl, ns: str) -> None:
    result = kubectl.run("create", "-f", "-", input=json.dumps(lease("typed", ns, leaseDurationSeconds="15")))
    assert result.returncode == 1
    assert "cannot be handled as a Lease" in result.stderr, result.stderr


def test_a_stale_update_conflicts(kubectl: Kubectl, ns: str) -> None:
    apply(kubectl, lease("guarded", ns, holderIdentity="a", leaseDurationSeconds=15))
    stale = kubectl.json("get", "lease", "guarded", "-n", ns)
    kubectl("patch", "lease", "guarded", "-n", ns, "--type=merge", "-p", '{"spec":{"holderIdentity":"b"}}')
    stale["spec"]["holderIdentity"] = "c"
    result = kubectl.run("replace", "-f", "-", input=json.dumps(stale))
    assert result.returncode == 1
    assert "the object has been modified" in result.stderr, result.stderr
    assert kubectl.json("get", "lease", "guarded", "-n", ns)["spec"]["holderIdentity"] == "b"
