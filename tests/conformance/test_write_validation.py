"""Write-time validation against a running plane, through real HTTP and the real kubectl.

Custom resources are pruned, defaulted and validated against their CRD's structural schema, with
``fieldValidation`` deciding what happens to unknown fields (kubectl sends ``Strict``); built-in
kinds get their required fields and name rules checked. Every message is compared with what a
v1.32 kube-apiserver says for the same request.

(Named ``test_write_validation`` because ``tests/unit/api/test_validation.py`` owns the bare name.)
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from conftest import REPO, Kubectl, Plane

pytestmark = pytest.mark.e2e

GROUP = "conformance.trainyard.dev"
WIDGETS = f"/apis/{GROUP}/v1/namespaces/{{ns}}/sprockets"
CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": f"sprockets.{GROUP}"},
    "spec": {
        "group": GROUP,
        "scope": "Namespaced",
        "names": {"plural": "sprockets", "singular": "sprocket", "kind": "Sprocket"},
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {
                                "type": "object",
                                "required": ["size"],
                                "properties": {
                                    "size": {"type": "integer", "minimum": 1, "maximum": 10},
                                    "mode": {"type": "string", "enum": ["fast", "slow"], "default": "fast"},
                                    "port": {"x-kubernetes-int-or-string": True},
                                    "tags": {
                                        "type": "array",
                                        "items": {"type": "string"},
                                        "x-kubernetes-list-type": "set",
                                    },
                                    "template": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                                },
                            },
                            "status": {"type": "object", "properties": {"ready": {"type": "boolean"}}},
                        },
                    }
                },
            }
        ],
    },
}


def call(
    plane: Plane, method: str, path: str, body: Any = None, ctype: str = "application/json"
) -> tuple[int, Any, Any]:
    """(status, decoded body, headers) of one request; errors are answers too."""
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(plane.url + path, data=data, method=method, headers={"Content-Type": ctype})
    try:
        with plane.urlopen(request, timeout=60) as response:
            return response.status, json.loads(response.read()), response.headers
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read()), exc.headers


@pytest.fixture(scope="module")
def ns(plane: Plane, kubectl: Kubectl) -> Iterator[str]:
    name = f"val-{uuid.uuid4().hex[:6]}"
    kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}))
    kubectl("apply", "-f", "-", input=json.dumps(CRD))
    yield name
    kubectl.run("delete", "namespace", name, "--wait=false")


def sprocket(name: str, **spec: Any) -> str:
    return json.dumps({"apiVersion": f"{GROUP}/v1", "kind": "Sprocket", "metadata": {"name": name}, "spec": spec})


# -- custom resources through kubectl -------------------------------------------------------


def test_kubectl_create_of_a_typo_fails_like_a_real_cluster(kubectl: Kubectl, ns: str) -> None:
    result = kubectl.run("apply", "-n", ns, "-f", "-", input=sprocket("typo", size=3, colour="red"))
    assert result.returncode != 0
    assert (
        'Error from server (BadRequest): error when creating "STDIN": Sprocket in version "v1" cannot be handled '
        'as a Sprocket: strict decoding error: unknown field "spec.colour"'
    ) in result.stderr
    assert kubectl.run("get", "sprocket", "typo", "-n", ns).returncode != 0


def test_kubectl_validate_warn_prunes_and_warns(kubectl: Kubectl, ns: str) -> None:
    manifest = sprocket("warned", size=3, colour="red")
    result = kubectl.run("apply", "--validate=warn", "-n", ns, "-f", "-", input=manifest)
    assert result.returncode == 0, result.stderr
    assert 'Warning: unknown field "spec.colour"' in result.stderr
    assert kubectl.json("get", "sprocket", "warned", "-n", ns)["spec"] == {"size": 3, "mode": "fast"}


def test_kubectl_apply_update_with_a_typo_is_an_invalid_patch(kubectl: Kubectl, ns: str) -> None:
    kubectl("apply", "-n", ns, "-f", "-", input=sprocket("updated", size=3))
    result = kubectl.run("apply", "-n", ns, "-f", "-", input=sprocket("updated", size=4, colour="red"))
    assert result.returncode != 0
    assert "The request is invalid: patch: Invalid value: " in result.stderr
    assert 'strict decoding error: unknown field "spec.colour"' in result.stderr
    assert kubectl.json("get", "sprocket", "updated", "-n", ns)["spec"]["size"] == 3


def test_kubectl_shows_schema_violations_with_field_paths(kubectl: Kubectl, ns: str) -> None:
    result = kubectl.run("apply", "-n", ns, "-f", "-", input=sprocket("bad", size="3", mode="medium", tags=["a", "a"]))
    assert result.returncode != 0
    assert 'The Sprocket "bad" is invalid:' in result.stderr
    for line in (
        'spec.size: Invalid value: "string": spec.size in body must be of type integer: "string"',
        'spec.mode: Unsupported value: "medium": supported values: "fast", "slow"',
        'spec.tags[1]: Duplicate value: "a"',
    ):
        assert line in result.stderr
    missing = kubectl.run("apply", "-n", ns, "-f", "-", input=sprocket("empty"))
    assert 'The Sprocket "empty" is invalid: spec.size: Required value' in missing.stderr
    big = kubectl.run("apply", "-n", ns, "-f", "-", input=sprocket("big", size=11))
    assert "spec.size: Invalid value: 11: spec.size in body should be less than or equal to 10" in big.stderr


def test_preserved_subtrees_and_int_or_string_are_accepted(kubectl: Kubectl, ns: str) -> None:
    template = {"spec": {"containers": [{"name": "c", "image": "x", "resources": {"limits": {"cpu": "1"}}}]}}
    kubectl("apply", "-n", ns, "-f", "-", input=sprocket("free", size=2, port="http", template=template))
    kubectl("apply", "-n", ns, "-f", "-", input=sprocket("numbered", size=2, port=8080))
    assert kubectl.json("get", "sprocket", "free", "-n", ns)["spec"]["template"] == template
    assert kubectl.json("get", "sprocket", "numbered", "-n", ns)["spec"]["port"] == 8080


# -- custom resources through the raw API ---------------------------------------------------


@pytest.mark.parametrize(
    ("query", "code", "warning"),
    [
        ("", 201, '299 - "unknown field \\"spec.colour\\""'),
        ("?fieldValidation=Warn", 201, '299 - "unknown field \\"spec.colour\\""'),
        ("?fieldValidation=Ignore", 201, None),
        ("?fieldValidation=Strict", 400, None),
    ],
)
def test_field_validation_directives(plane: Plane, ns: str, query: str, code: int, warning: str | None) -> None:
    name = f"d-{uuid.uuid4().hex[:6]}"
    body = json.loads(sprocket(name, size=1, colour="red"))
    status, answer, headers = call(plane, "POST", WIDGETS.format(ns=ns) + query, body)
    assert status == code, answer
    assert headers.get("Warning") == warning
    if code == 201:
        assert answer["spec"] == {"size": 1, "mode": "fast"}
    else:
        assert answer["kind"] == "Status" and answer["reason"] == "BadRequest"
        assert answer["message"].endswith('strict decoding error: unknown field "spec.colour"')


def test_unknown_field_validation_value_is_rejected(plane: Plane, ns: str) -> None:
    status, answer, _ = call(
        plane, "POST", WIDGETS.format(ns=ns) + "?fieldValidation=Loud", json.loads(sprocket("x", size=1))
    )
    assert status == 422
    assert answer["message"] == (
        'CreateOptions.meta.k8s.io "" is invalid: fieldValidation: Unsupported value: "Loud": '
        'supported values: "", "Ignore", "Strict", "Warn"'
    )


def test_invalid_status_shape(plane: Plane, ns: str) -> None:
    status, answer, _ = call(plane, "POST", WIDGETS.format(ns=ns), json.loads(sprocket("shape", size=0)))
    assert status == 422
    assert answer["reason"] == "Invalid"
    assert answer["details"] == {
        "name": "shape",
        "group": GROUP,
        "kind": "Sprocket",
        "causes": [
            {
                "reason": "FieldValueInvalid",
                "field": "spec.size",
                "message": "Invalid value: 0: spec.size in body should be greater than or equal to 1",
            }
        ],
    }
    assert answer["message"] == (
        f'Sprocket.{GROUP} "shape" is invalid: spec.size: Invalid value: 0: '
        "spec.size in body should be greater than or equal to 1"
    )


def test_status_subresource_is_validated_against_the_status_schema(plane: Plane, ns: str) -> None:
    base = WIDGETS.format(ns=ns)
    assert call(plane, "POST", base, json.loads(sprocket("st", size=1)))[0] == 201
    merge = "application/merge-patch+json"
    status, answer, _ = call(plane, "PATCH", f"{base}/st/status", {"status": {"ready": "yes"}}, merge)
    assert status == 422
    assert answer["details"]["causes"] == [
        {
            "reason": "FieldValueTypeInvalid",
            "field": "status.ready",
            "message": 'Invalid value: "string": ready in body must be of type boolean: "string"',
        }
    ]
    status, answer, headers = call(plane, "PATCH", f"{base}/st/status", {"status": {"ready": True, "extra": 1}}, merge)
    assert status == 200
    assert answer["status"] == {"ready": True}
    assert headers.get("Warning") == '299 - "unknown field \\"status.extra\\""'


def test_our_example_job_applies_unchanged_and_job_rules_still_run(kubectl: Kubectl, ns: str) -> None:
    # Dry run: the schema and the job webhook both run, nothing is stored and nothing trains.
    example = (REPO / "examples/pytorch-ddp/pytorchjob.yaml").read_text()
    out = kubectl("apply", "--dry-run=server", "-n", ns, "-f", "-", "-o", "json", input=example)
    job = json.loads(out)
    assert job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]["workingDir"]
    typed = example.replace(
        "replicas: 1\n      restartPolicy: OnFailure", 'replicas: "one"\n      restartPolicy: OnFailure', 1
    )
    result = kubectl.run("apply", "--dry-run=server", "-n", ns, "-f", "-", input=typed)
    assert (
        'spec.pytorchReplicaSpecs.Master.replicas: Invalid value: "string": '
        'spec.pytorchReplicaSpecs.Master.replicas in body must be of type integer: "string"'
    ) in result.stderr
    webhook = example.replace("Master:\n      replicas: 1", "Master:\n      replicas: 2", 1)
    result = kubectl.run("apply", "--dry-run=server", "-n", ns, "-f", "-", input=webhook)
    assert "spec.pytorchReplicaSpecs.Master.replicas: Forbidden: must be 1" in result.stderr
    # The job types are modelled whole, as upstream's CRDs are: a typo is an unknown field,
    # while the pod template below keeps every pod field.
    typo = example.replace("  pytorchReplicaSpecs:", "  runPolicy: {cleanPodPolicyy: All}\n  pytorchReplicaSpecs:", 1)
    assert typo != example
    result = kubectl.run("apply", "--dry-run=server", "-n", ns, "-f", "-", input=typo)
    assert 'strict decoding error: unknown field "spec.runPolicy.cleanPodPolicyy"' in result.stderr
    pruned = json.loads(
        kubectl("apply", "--validate=false", "--dry-run=server", "-n", ns, "-f", "-", "-o", "json", input=typo)
    )
    assert "cleanPodPolicyy" not in pruned["spec"]["runPolicy"]


# -- built-in kinds -------------------------------------------------------------------------


def test_kubectl_reports_pod_problems_with_field_paths(kubectl: Kubectl, ns: str) -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "Bad_Pod"},
        "spec": {"containers": [{"name": "main", "image": "x"}, {"name": "main"}]},
    }
    result = kubectl.run("apply", "-n", ns, "-f", "-", input=json.dumps(pod))
    assert result.returncode != 0
    assert 'The Pod "Bad_Pod" is invalid:' in result.stderr
    assert 'metadata.name: Invalid value: "Bad_Pod": a lowercase RFC 1123 subdomain must consist of' in result.stderr
    assert 'spec.containers[1].name: Duplicate value: "main"' in result.stderr
    assert "spec.containers[1].image: Required value" in result.stderr
    empty = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "empty"}, "spec": {}}
    result = kubectl.run("apply", "-n", ns, "-f", "-", input=json.dumps(empty))
    assert 'The Pod "empty" is invalid: spec.containers: Required value' in result.stderr


def test_service_ports(kubectl: Kubectl, ns: str) -> None:
    svc = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "two-ports"},
        "spec": {"ports": [{"port": 80}, {"port": 70000, "name": "b"}]},
    }
    result = kubectl.run("apply", "-n", ns, "-f", "-", input=json.dumps(svc))
    assert "spec.ports[0].name: Required value" in result.stderr
    assert "spec.ports[1].port: Invalid value: 70000: must be between 1 and 65535, inclusive" in result.stderr


def test_config_maps_secrets_and_unknown_metadata(kubectl: Kubectl, ns: str) -> None:
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "numbers"}, "data": {"a": 1}}
    result = kubectl.run("apply", "-n", ns, "-f", "-", input=json.dumps(cm))
    assert (
        'ConfigMap in version "v1" cannot be handled as a ConfigMap: json: cannot unmarshal number into Go '
        "struct field ConfigMap.data of type string"
    ) in result.stderr
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "stringData": {"k": "hello"}}
    kubectl("apply", "-n", ns, "-f", "-", input=json.dumps(secret))
    stored = kubectl.json("get", "secret", "s", "-n", ns)
    assert stored["data"] == {"k": "aGVsbG8="} and stored["type"] == "Opaque" and "stringData" not in stored
    bad = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "b64"}, "data": {"k": "not base64!"}}
    result = kubectl.run("apply", "-n", ns, "-f", "-", input=json.dumps(bad))
    assert 'Secret in version "v1" cannot be handled as a Secret: illegal base64 data at input byte 3' in result.stderr
    typo = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "t", "lables": {"a": "b"}}}
    result = kubectl.run("apply", "-n", ns, "-f", "-", input=json.dumps(typo))
    assert 'strict decoding error: unknown field "metadata.lables"' in result.stderr


def test_events_need_an_involved_object(plane: Plane, ns: str) -> None:
    status, answer, _ = call(plane, "POST", f"/api/v1/namespaces/{ns}/events", {"metadata": {"name": "e1"}})
    assert status == 422
    assert answer["message"] == 'Event "e1" is invalid: involvedObject: Required value'
    other = {"metadata": {"name": "e2"}, "involvedObject": {"kind": "Pod", "name": "p", "namespace": "elsewhere"}}
    status, answer, _ = call(plane, "POST", f"/api/v1/namespaces/{ns}/events", other)
    assert answer["message"] == (
        'Event "e2" is invalid: involvedObject.namespace: Invalid value: "elsewhere": does not match event.namespace'
    )


def test_labels_and_annotation_budget(plane: Plane, ns: str) -> None:
    path = f"/api/v1/namespaces/{ns}/configmaps"
    bad = {"metadata": {"name": "labelled", "labels": {"ok": "not ok!"}}}
    status, answer, _ = call(plane, "POST", path, bad)
    assert status == 422
    assert answer["details"]["causes"][0]["field"] == "metadata.labels"
    assert answer["details"]["causes"][0]["message"].startswith(
        'Invalid value: "not ok!": a valid label must be an empty string or consist of alphanumeric characters'
    )
    huge = {"metadata": {"name": "annotated", "annotations": {"big": "x" * (256 * 1024)}}}
    status, answer, _ = call(plane, "POST", path, huge)
    assert (status, answer["message"]) == (
        422,
        'ConfigMap "annotated" is invalid: metadata.annotations: Too long: may not be more than 262144 bytes',
    )


def test_a_crd_whose_schema_is_not_structural_is_rejected(kubectl: Kubectl) -> None:
    crd = json.loads(json.dumps(CRD).replace("sprockets", "gadgets").replace('"Sprocket"', '"Gadget"'))
    crd["spec"]["names"]["singular"] = "gadget"
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["loose"] = {}
    result = kubectl.run("apply", "-f", "-", input=json.dumps(crd))
    assert result.returncode != 0
    assert (
        f'The CustomResourceDefinition "gadgets.{GROUP}" is invalid: spec.versions[0].schema.openAPIV3Schema'
        ".properties[spec].properties[loose].type: Required value: must not be empty for specified object fields"
    ) in result.stderr
    assert kubectl.run("get", "crd", f"gadgets.{GROUP}").returncode != 0
