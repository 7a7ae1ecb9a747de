"""JobSet's webhook in the plane: defaults, validation and update rules; the CRD's shape."""

from __future__ import annotations

from typing import Any

from trainyard.api import jobset as api


def obj(**spec: Any) -> dict[str, Any]:
    rjobs = [{"name": "workers", "replicas": 2, "template": {"spec": {"template": {"spec": {"containers": []}}}}}]
    return {"metadata": {"name": "js", "namespace": "ns"}, "spec": {"replicatedJobs": rjobs, **spec}}


def test_defaults_as_upstreams_webhook() -> None:
    js = obj(failurePolicy={"rules": [{"action": "FailJobSet"}]})
    api.default(js)
    spec = js["spec"]
    assert spec["successPolicy"] == {"operator": "All"}
    assert spec["startupPolicy"] == {"startupPolicyOrder": "AnyOrder"}
    assert spec["network"] == {"enableDNSHostnames": True, "publishNotReadyAddresses": True}
    job = spec["replicatedJobs"][0]["template"]["spec"]
    assert job["completionMode"] == "Indexed" and job["template"]["spec"]["restartPolicy"] == "OnFailure"
    assert spec["failurePolicy"]["rules"][0]["name"] == "failurePolicyRule0"


def test_explicit_values_are_kept() -> None:
    js = obj(network={"enableDNSHostnames": False}, successPolicy={"operator": "Any"})
    js["spec"]["replicatedJobs"][0]["template"]["spec"]["completionMode"] = "NonIndexed"
    api.default(js)
    assert js["spec"]["network"]["enableDNSHostnames"] is False and js["spec"]["successPolicy"]["operator"] == "Any"
    assert js["spec"]["replicatedJobs"][0]["template"]["spec"]["completionMode"] == "NonIndexed"


def test_a_valid_jobset_has_no_problems() -> None:
    js = obj(managedBy=api.CONTROLLER_NAME, network={"subdomain": "net"})
    api.default(js)
    assert api.validate(js) == []


def test_every_problem_at_once_with_field_paths() -> None:
    js = obj(
        managedBy="not a path",
        network={"subdomain": "Bad_Name"},
        successPolicy={"operator": "All", "targetReplicatedJobs": ["nope"]},
    )
    js["spec"]["replicatedJobs"].append(dict(js["spec"]["replicatedJobs"][0]))
    js["metadata"]["name"] = "x" * 60
    api.default(js)
    fields = [e.field for e in api.validate(js)]
    assert "spec.managedBy" in fields
    assert "spec.network.subdomain" in fields
    assert "spec.successPolicy.targetReplicatedJobs" in fields
    assert "spec.replicatedJobs[1].name" in fields  # duplicate, and too long
    messages = " ".join(e.message for e in api.validate(js))
    assert "job names generated for this JobSet will exceed 63 characters" in messages


def test_replicated_jobs_are_immutable_unless_suspended_scheduling_directives() -> None:
    old = obj()
    api.default(old)
    new = obj()
    api.default(new)
    new["spec"]["replicatedJobs"][0]["replicas"] = 3
    assert [e.field for e in api.validate(new, old)] == ["spec.replicatedJobs"]
    old["spec"]["suspend"] = True
    moved = obj(suspend=True)
    api.default(moved)
    moved["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["nodeSelector"] = {"a": "b"}
    assert api.validate(moved, old) == []


def test_the_crd_has_upstreams_columns_and_a_status_subresource() -> None:
    crd = api.crd()
    version = crd["spec"]["versions"][0]
    assert crd["metadata"]["name"] == "jobsets.jobset.x-k8s.io" and version["name"] == "v1alpha2"
    assert version["subresources"] == {"status": {}}
    names = [c["name"] for c in version["additionalPrinterColumns"]]
    assert names == ["TerminalState", "Restarts", "Completed", "Suspended", "Age"]


def with_depends_on(*deps: list[dict[str, str]]) -> dict[str, Any]:
    """A JobSet of replicated Jobs ``a``, ``b``, ... with ``deps[i]`` as the i-th one's ``dependsOn``."""
    js = obj()
    template = js["spec"]["replicatedJobs"][0]["template"]
    js["spec"]["replicatedJobs"] = [
        {"name": chr(ord("a") + i), "template": template, **({"dependsOn": d} if d else {})} for i, d in enumerate(deps)
    ]
    api.default(js)
    return js


def test_depends_on_an_earlier_replicated_job_is_valid() -> None:
    js = with_depends_on([], [{"name": "a", "status": "Ready"}], [{"name": "b", "status": "Complete"}])
    assert api.validate(js) == []


def test_depends_on_is_refused_on_the_first_and_for_later_or_unknown_or_own_names() -> None:
    js = with_depends_on(
        [{"name": "b", "status": "Ready"}],
        [{"name": "c", "status": "Ready"}, {"name": "b", "status": "Ready"}, {"name": "zz", "status": "Ready"}],
        [{"name": "a", "status": "Running"}],
    )
    problems = {(e.field, e.type.value) for e in api.validate(js)}
    assert problems == {
        ("spec.replicatedJobs[0].dependsOn", "FieldValueForbidden"),
        ("spec.replicatedJobs[1].dependsOn[0].name", "FieldValueInvalid"),
        ("spec.replicatedJobs[1].dependsOn[1].name", "FieldValueInvalid"),
        ("spec.replicatedJobs[1].dependsOn[2].name", "FieldValueInvalid"),
        ("spec.replicatedJobs[2].dependsOn[0].status", "FieldValueNotSupported"),
    }
    message = next(str(e) for e in api.validate(js) if e.field == "spec.replicatedJobs[1].dependsOn[0].name")
    assert "replicatedJob: b cannot depend on replicatedJob: c" in message


def test_depends_on_schema_is_a_list_map_of_at_most_five_with_a_status_enum() -> None:
    rjob = api.schema()["properties"]["spec"]["properties"]["replicatedJobs"]["items"]
    deps = rjob["properties"]["dependsOn"]
    assert deps["maxItems"] == 5 and deps["x-kubernetes-list-map-keys"] == ["name"]
    assert deps["items"]["required"] == ["name", "status"]
    assert deps["items"]["properties"]["status"]["enum"] == ["Ready", "Complete"]
    js = with_depends_on([], [{"name": "a", "status": "Ready"}] * 6)
    assert any("at most 5" in str(e) for e in api.validate(js))
