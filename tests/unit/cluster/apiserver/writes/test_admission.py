"""Write-time checks of built-in kinds and object metadata, worded as kube-apiserver v1.32 words them."""

from __future__ import annotations

from typing import Any

import pytest

from trainyard.cluster.server.apiserver import errors
from trainyard.cluster.server.apiserver.registry import BUILTINS, ResourceType, from_crd
from trainyard.cluster.server.apiserver.writes import admission, decoding, shapes

RT = {rt.kind: rt for rt in BUILTINS}
WIDGETS = from_crd(
    {
        "metadata": {"name": "widgets.test.dev"},
        "spec": {
            "group": "test.dev",
            "scope": "Namespaced",
            "names": {"plural": "widgets", "kind": "Widget"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {
                                "spec": {
                                    "type": "object",
                                    "properties": {"size": {"type": "integer", "default": 1}},
                                },
                                "status": {"type": "object", "properties": {"ready": {"type": "boolean"}}},
                            },
                        }
                    },
                }
            ],
        },
    }
)[0]

LABEL_KEY_HINT = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
    "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)
SUBDOMAIN_HINT = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must "
    "start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
LABEL_HINT = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and "
    "end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)


def lines(rt: ResourceType, obj: dict[str, Any], subresource: str | None = None) -> list[str]:
    return [f"{f}: {m}" for _, f, m in admission.validate(rt, obj, subresource)]


def pod(*containers: dict[str, Any], **meta: Any) -> dict[str, Any]:
    return {"metadata": {"name": "p", "namespace": "default", **meta}, "spec": {"containers": list(containers)}}


MAIN = {"name": "main", "image": "busybox"}


# -- metadata -------------------------------------------------------------------------------


def test_valid_pod_passes() -> None:
    assert lines(RT["Pod"], pod(MAIN, labels={"app": "web", "example.com/tier": ""})) == []


@pytest.mark.parametrize(
    ("kind", "name", "expected"),
    [
        ("Pod", "Bad_Name", [f'metadata.name: Invalid value: "Bad_Name": {SUBDOMAIN_HINT}']),
        ("ConfigMap", "a.b.c", []),
        ("Namespace", "my.ns", ['metadata.name: Invalid value: "my.ns": must not contain dots']),
        (
            "Service",
            "1svc",
            [
                'metadata.name: Invalid value: "1svc": a DNS-1035 label must consist of lower case alphanumeric '
                "characters or '-', start with an alphabetic character, and end with an alphanumeric character "
                "(e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"
            ],
        ),
        ("Event", "Anything_Goes.123", []),  # core/v1 Events skip ObjectMeta validation
    ],
)
def test_names_follow_the_rule_of_their_kind(kind: str, name: str, expected: list[str]) -> None:
    obj: dict[str, Any] = {"metadata": {"name": name}}
    if kind == "Event":
        obj |= {"involvedObject": {"kind": "Pod", "name": "p"}, "metadata": {"name": name, "namespace": "default"}}
    if kind == "Service":
        obj["spec"] = {"clusterIP": "None"}
    if kind == "Pod":
        obj["spec"] = {"containers": [MAIN]}
    assert lines(RT[kind], obj) == expected


def test_generate_name_prefix_may_end_with_a_dash() -> None:
    obj = {"metadata": {"name": "job-abcde", "generateName": "job-"}}
    assert lines(RT["ConfigMap"], obj) == []
    obj = {"metadata": {"name": "x", "generateName": "Job-"}}
    assert lines(RT["ConfigMap"], obj) == [f'metadata.generateName: Invalid value: "Job-": {SUBDOMAIN_HINT}']


def test_label_keys_and_values() -> None:
    found = lines(RT["Pod"], pod(MAIN, labels={"bad key": "ok", "good": "bad value!", "a/b/c": "x"}))
    assert found[0] == f'metadata.labels: Invalid value: "bad key": {LABEL_KEY_HINT}'
    assert found[1].startswith('metadata.labels: Invalid value: "bad value!": a valid label must be an empty string')
    assert found[2].startswith('metadata.labels: Invalid value: "a/b/c": a qualified name must consist of')
    assert len(found) == 3


def test_annotations_total_size_limit() -> None:
    assert lines(RT["ConfigMap"], {"metadata": {"name": "c", "annotations": {"a": "x" * 262143}}}) == []
    too_big = {"metadata": {"name": "c", "annotations": {"a": "x" * 262144}}}
    assert lines(RT["ConfigMap"], too_big) == ["metadata.annotations: Too long: may not be more than 262144 bytes"]


def test_owner_references_and_finalizers() -> None:
    refs = [
        {"apiVersion": "v1", "kind": "Pod", "name": "a", "uid": "1", "controller": True},
        {"apiVersion": "", "kind": "Pod", "name": "", "uid": "2", "controller": True},
    ]
    found = lines(
        RT["ConfigMap"], {"metadata": {"name": "c", "ownerReferences": refs, "finalizers": ["ok/x", "no way"]}}
    )
    assert found[:2] == [
        'metadata.ownerReferences.apiVersion: Invalid value: "": version must not be empty',
        'metadata.ownerReferences.name: Invalid value: "": name must not be empty',
    ]
    assert (
        'Only one reference can have Controller set to true. Found "true" in references for Pod/a and Pod/' in found[2]
    )
    assert found[3].startswith('metadata.finalizers: Invalid value: "no way": name part must consist of')


# -- pods -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        ({"metadata": {"name": "p"}, "spec": {}}, ["spec.containers: Required value"]),
        ({"metadata": {"name": "p"}}, ["spec.containers: Required value"]),
        (pod({"image": "x"}), ["spec.containers[0].name: Required value"]),
        (pod({"name": "main"}), ["spec.containers[0].image: Required value"]),
        (pod({"name": "Main", "image": "x"}), [f'spec.containers[0].name: Invalid value: "Main": {LABEL_HINT}']),
        (pod(MAIN, MAIN), ['spec.containers[1].name: Duplicate value: "main"']),
        (
            pod(
                {
                    **MAIN,
                    "ports": [{"containerPort": 70000}, {"name": "http"}, {"containerPort": 80, "protocol": "ICMP"}],
                }
            ),
            [
                "spec.containers[0].ports[0].containerPort: Invalid value: 70000: "
                "must be between 1 and 65535, inclusive",
                "spec.containers[0].ports[1].containerPort: Required value",
                'spec.containers[0].ports[2].protocol: Unsupported value: "ICMP": '
                'supported values: "SCTP", "TCP", "UDP"',
            ],
        ),
        (pod({**MAIN, "env": [{"value": "x"}]}), ["spec.containers[0].env[0].name: Required value"]),
    ],
)
def test_pod_rules(obj: dict[str, Any], expected: list[str]) -> None:
    assert lines(RT["Pod"], obj) == expected


def test_init_container_names_share_the_namespace_of_container_names() -> None:
    obj = pod(MAIN)
    obj["spec"]["initContainers"] = [{"name": "main", "image": "x"}]
    assert lines(RT["Pod"], obj) == ['spec.containers[0].name: Duplicate value: "main"']


def test_restart_policy_values() -> None:
    obj = pod(MAIN)
    obj["spec"]["restartPolicy"] = "Sometimes"
    assert lines(RT["Pod"], obj) == [
        'spec.restartPolicy: Unsupported value: "Sometimes": supported values: "Always", "OnFailure", "Never"'
    ]


def test_status_writes_check_metadata_only_for_builtins() -> None:
    # A pod stored before these rules existed must still accept its node's status updates.
    assert lines(RT["Pod"], {"metadata": {"name": "p"}, "spec": {}}, "status") == []


# -- services, events, config maps, secrets, CRDs -------------------------------------------


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"ports": [{"port": 80}]}, []),
        ({"clusterIP": "None"}, []),
        ({}, ["spec.ports: Required value"]),
        ({"ports": [{"port": 80}, {"port": 81, "name": "b"}]}, ["spec.ports[0].name: Required value"]),
        (
            {"ports": [{"port": 80, "name": "a"}, {"port": 81, "name": "a"}]},
            ['spec.ports[1].name: Duplicate value: "a"'],
        ),
        ({"ports": [{"name": "a"}]}, ["spec.ports[0].port: Invalid value: 0: must be between 1 and 65535, inclusive"]),
        (
            {"type": "Magic", "ports": [{"port": 1}]},
            [
                'spec.type: Unsupported value: "Magic": supported values: '
                '"ClusterIP", "ExternalName", "LoadBalancer", "NodePort"'
            ],
        ),
        (
            {"ports": [{"port": 80, "targetPort": "Bad_Name"}]},
            [
                'spec.ports[0].targetPort: Invalid value: "Bad_Name": '
                "must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)"
            ],
        ),
    ],
)
def test_service_rules(spec: dict[str, Any], expected: list[str]) -> None:
    assert lines(RT["Service"], {"metadata": {"name": "svc"}, "spec": spec}) == expected


@pytest.mark.parametrize(
    ("event", "expected"),
    [
        ({}, ["involvedObject: Required value"]),
        ({"involvedObject": {"kind": "Pod", "name": "p", "namespace": "default"}}, []),
        (
            {"involvedObject": {"kind": "Pod", "name": "p", "namespace": "other"}},
            ['involvedObject.namespace: Invalid value: "other": does not match event.namespace'],
        ),
        ({"involvedObject": {"kind": "Node", "name": "n"}}, []),
        (
            {"involvedObject": {"kind": "Node", "name": "n"}, "eventTime": "2024-01-01T00:00:00.000000Z"},
            [],
        ),
    ],
)
def test_event_rules(event: dict[str, Any], expected: list[str]) -> None:
    assert lines(RT["Event"], {"metadata": {"name": "e.1", "namespace": "default"}, **event}) == expected


def test_config_map_keys_and_size() -> None:
    found = lines(RT["ConfigMap"], {"metadata": {"name": "c"}, "data": {"good.key": "x", "bad key": "y"}})
    assert found == [
        'data[bad key]: Invalid value: "bad key": a valid config key must consist of alphanumeric characters, '
        "'-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is "
        "'[-._a-zA-Z0-9]+')"
    ]
    big = {"metadata": {"name": "c"}, "data": {"a": "x" * (1024 * 1024)}}
    assert lines(RT["ConfigMap"], big) == ["[]: Too long: may not be more than 1048576 bytes"]


def test_crd_rules() -> None:
    crd = {
        "metadata": {"name": "wrong.test.dev"},
        "spec": {
            "group": "test.dev",
            "scope": "Everywhere",
            "names": {"plural": "widgets"},
            "versions": [{"name": "v1", "served": True, "storage": True}],
        },
    }
    assert lines(RT["CustomResourceDefinition"], crd) == [
        'metadata.name: Invalid value: "wrong.test.dev": must be spec.names.plural+"."+spec.group',
        "spec.names.kind: Required value",
        'spec.scope: Unsupported value: "Everywhere": supported values: "Cluster", "Namespaced"',
        "spec.versions[0].schema.openAPIV3Schema: Required value: schemas are required",
    ]


# -- decoding -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "obj", "message"),
    [
        (
            "ConfigMap",
            {"metadata": {"name": "c"}, "data": {"a": 1}},
            'ConfigMap in version "v1" cannot be handled as a ConfigMap: '
            "json: cannot unmarshal number into Go struct field ConfigMap.data of type string",
        ),
        (
            "Secret",
            {"metadata": {"name": "s"}, "data": {"a": "!!!!"}},
            'Secret in version "v1" cannot be handled as a Secret: illegal base64 data at input byte 0',
        ),
        (
            "Secret",
            {"metadata": {"name": "s"}, "data": {"a": "aGVsbG8"}},
            'Secret in version "v1" cannot be handled as a Secret: illegal base64 data at input byte 4',
        ),
        (
            "Pod",
            {"metadata": {"name": "p", "labels": {"a": 1}}},
            'Pod in version "v1" cannot be handled as a Pod: '
            "json: cannot unmarshal number into Go struct field ObjectMeta.metadata.labels of type string",
        ),
        (
            "Pod",
            {"metadata": {"name": "p"}, "spec": {"containers": "main"}},
            'Pod in version "v1" cannot be handled as a Pod: '
            "json: cannot unmarshal string into Go struct field PodSpec.spec.containers of type []v1.Container",
        ),
    ],
)
def test_undecodable_values_are_bad_requests(kind: str, obj: dict[str, Any], message: str) -> None:
    with pytest.raises(errors.ApiError) as caught:
        decoding.decode_body(RT[kind], obj, "Strict", None)
    assert (caught.value.code, caught.value.message) == (400, message)


def test_secret_string_data_is_folded_into_data() -> None:
    obj: dict[str, Any] = {"metadata": {"name": "s"}, "data": {"a": "eA=="}, "stringData": {"b": "hello"}}
    decoding.decode_body(RT["Secret"], obj, "Strict", None)
    assert obj == {"metadata": {"name": "s"}, "data": {"a": "eA==", "b": "aGVsbG8="}}


@pytest.mark.parametrize(
    ("directive", "outcome"),
    [("Ignore", "pruned"), ("Warn", "warned"), ("Strict", "rejected")],
)
def test_field_validation_directives(directive: str, outcome: str) -> None:
    obj = {"apiVersion": "test.dev/v1", "kind": "Widget", "metadata": {"name": "w", "tyop": 1}, "spec": {"sise": 2}}
    warnings: list[str] = []
    if outcome == "rejected":
        with pytest.raises(errors.ApiError) as caught:
            decoding.decode_body(WIDGETS, obj, directive, warnings)
        assert caught.value.code == 400
        assert caught.value.message == (
            'Widget in version "v1" cannot be handled as a Widget: strict decoding error: '
            'unknown field "metadata.tyop", unknown field "spec.sise"'
        )
        return
    decoding.decode_body(WIDGETS, obj, directive, warnings)
    assert obj["spec"] == {"size": 1}  # pruned, then defaulted
    assert warnings == ([] if outcome == "pruned" else ['unknown field "metadata.tyop"', 'unknown field "spec.sise"'])


def test_strict_patch_errors_are_422_naming_the_patched_object() -> None:
    obj = {"apiVersion": "test.dev/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"sise": 2}}
    with pytest.raises(errors.ApiError) as caught:
        decoding.decode_body(WIDGETS, obj, "Strict", None, patch=True)
    patched = '{"apiVersion":"test.dev/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"sise":2}}'
    quoted = patched.replace('"', '\\"')
    assert caught.value.code == 422
    assert caught.value.message == (
        f' "" is invalid: patch: Invalid value: "{quoted}": strict decoding error: unknown field "spec.sise"'
    )


def test_custom_resource_status_writes_validate_status_only() -> None:
    obj = {"metadata": {"name": "w"}, "spec": {"size": "bad"}, "status": {"ready": "yes"}}
    assert lines(WIDGETS, obj, "status") == [
        'status.ready: Invalid value: "string": ready in body must be of type boolean: "string"'
    ]
    assert lines(WIDGETS, obj) == [
        'spec.size: Invalid value: "string": spec.size in body must be of type integer: "string"',
        'status.ready: Invalid value: "string": status.ready in body must be of type boolean: "string"',
    ]


def test_volumes_and_mounts() -> None:
    obj = pod({**MAIN, "volumeMounts": [{"name": "data", "mountPath": "/data"}, {"name": "gone"}, {"mountPath": "/x"}]})
    obj["spec"]["volumes"] = [{"name": "data", "emptyDir": {}}, {"name": "data"}, {"emptyDir": {}}]
    assert lines(RT["Pod"], obj) == [
        'spec.volumes[1].name: Duplicate value: "data"',
        "spec.volumes[2].name: Required value",
        'spec.containers[0].volumeMounts[1].name: Not found: "gone"',
        "spec.containers[0].volumeMounts[1].mountPath: Required value",
        "spec.containers[0].volumeMounts[2].name: Required value",
    ]


@pytest.mark.parametrize(
    ("kind", "obj", "struct_field"),
    [
        ("Pod", pod({**MAIN, "ports": [{"containerPort": "80"}]}), "ContainerPort.spec.containers.ports.containerPort"),
        ("Pod", pod({"name": 5, "image": "x"}), "Container.spec.containers.name"),
        ("Service", {"metadata": {"name": "s"}, "spec": {"ports": [{"port": "80"}]}}, "ServicePort.spec.ports.port"),
    ],
)
def test_wrongly_typed_scalars_fail_decoding(kind: str, obj: dict[str, Any], struct_field: str) -> None:
    with pytest.raises(errors.ApiError) as caught:
        decoding.decode_body(RT[kind], obj, "Strict", None)
    assert caught.value.code == 400
    assert f"into Go struct field {struct_field} of type" in caught.value.message


# -- storage --------------------------------------------------------------------------------


def test_claims_and_volumes_need_access_modes_and_a_size() -> None:
    claim = {"metadata": {"name": "data", "namespace": "default"}, "spec": {"accessModes": ["ReadWriteAll"]}}
    assert lines(RT["PersistentVolumeClaim"], claim) == [
        'spec.accessModes: Unsupported value: "ReadWriteAll": supported values: "ReadOnlyMany", "ReadWriteMany", '
        '"ReadWriteOnce", "ReadWriteOncePod"',
        "spec.resources[storage]: Required value",
    ]
    claim["spec"] = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
    assert lines(RT["PersistentVolumeClaim"], claim) == []
    volume = {"metadata": {"name": "pv"}, "spec": {"capacity": {"storage": "lots"}}}
    assert lines(RT["PersistentVolume"], volume) == [
        "spec.accessModes: Required value: at least 1 access mode is required",
        'spec.capacity: Invalid value: "lots": quantities must match the regular expression '
        "'^([+-]?(?:\\d+\\.?\\d*|\\.\\d+))(?:([eE][+-]?\\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E))?$'",
    ]


def test_storage_objects_of_the_wrong_shape_cannot_be_decoded() -> None:
    with pytest.raises(decoding.DecodeError, match=r"spec of type v1\.PersistentVolumeClaimSpec"):
        decoding.decode(RT["PersistentVolumeClaim"], {"metadata": {}, "spec": 1.5})
    with pytest.raises(decoding.DecodeError, match=r"accessModes of type \[\]v1\.PersistentVolumeAccessMode"):
        decoding.decode(RT["PersistentVolume"], {"metadata": {}, "spec": {"accessModes": "ReadWriteOnce"}})
    with pytest.raises(decoding.DecodeError, match=r"StorageClass\.provisioner of type string"):
        decoding.decode(RT["StorageClass"], {"metadata": {}, "provisioner": 3})


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        ({"metadata": ["x"]}, "metadata: expected object, got array"),
        ({"metadata": {"name": "p", "labels": {"app": 3}}}, "metadata.labels[app]: expected string, got number"),
        (
            {"spec": {"containers": [{"name": "a"}, {"name": "b", "ports": [{"containerPort": "http"}]}]}},
            "spec.containers[1].ports[0].containerPort: expected integer, got string",
        ),
    ],
)
def test_a_field_of_the_wrong_type_is_named_by_its_whole_path(obj: dict[str, Any], message: str) -> None:
    with pytest.raises(errors.ApiError) as refused:
        shapes.check(RT["Pod"], {"apiVersion": "v1", "kind": "Pod", **obj})
    assert refused.value.code == 400
    assert refused.value.status()["message"].endswith(message)


def test_nulls_read_as_go_reads_them() -> None:
    pod = {"metadata": {"name": "p", "labels": {"a": None}, "annotations": None}, "spec": {"containers": None}}
    out = shapes.check(RT["Pod"], {"apiVersion": "v1", "kind": "Pod", **pod})
    # a map's null value is its zero value; a null struct field is dropped (omitempty); an unknown field is kept
    assert out["metadata"] == {"name": "p", "labels": {"a": ""}}
    assert out["spec"] == {}
