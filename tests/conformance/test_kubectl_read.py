"""kubectl's read commands against the embedded plane: discovery, server-side Tables, output
formats, label and field selectors, sorting, label columns, ``describe`` and ``events``.

Only the real ``kubectl`` is driven; every assertion reads what it printed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import pytest
import yaml
from kubectl_helpers import (
    SLEEPER,
    apply,
    by_name,
    configmap,
    create,
    ensure_widget_crd,
    headers,
    namespace,
    new_namespace,
    pod,
    table,
    wait_running,
    widget,
)

from conftest import Kubectl, eventually
from trainyard.api.kinds import KINDS

pytestmark = pytest.mark.e2e

AGE = re.compile(r"^\d+(s|m\d*s?)$")


@pytest.fixture
def ns(kubectl: Kubectl) -> Iterator[str]:
    yield from namespace(kubectl, "read")


def names(output: str) -> list[str]:
    return output.split()


def test_version_healthz_and_raw_paths(kubectl: Kubectl) -> None:
    assert re.search(r"^Server Version: v1\.32\.\S+$", kubectl("version"), re.M)
    assert json.loads(kubectl("version", "-o", "json"))["serverVersion"]["minor"] == "32"
    assert kubectl("get", "--raw", "/healthz") == "ok"
    assert kubectl("get", "--raw", "/readyz") == "ok"
    raw = json.loads(kubectl("get", "--raw", "/version"))
    assert (raw["major"], raw["minor"]) == ("1", "32") and raw["gitVersion"].startswith("v1.32.")


def test_api_resources_lists_served_kinds_with_short_names_and_scope(kubectl: Kubectl) -> None:
    # metrics.k8s.io serves `pods` and `nodes` too (kubectl top): each row is keyed by name and group.
    listed = table(kubectl("api-resources"))
    rows = {r["NAME"]: r for r in listed if r["APIVERSION"] != "metrics.k8s.io/v1beta1"}
    metrics = {r["NAME"]: r["KIND"] for r in listed if r["APIVERSION"] == "metrics.k8s.io/v1beta1"}
    assert metrics == {"pods": "PodMetrics", "nodes": "NodeMetrics"}
    expected = {
        "pods": ("po", "v1", "true", "Pod"),
        "services": ("svc", "v1", "true", "Service"),
        "configmaps": ("cm", "v1", "true", "ConfigMap"),
        "secrets": ("", "v1", "true", "Secret"),
        "events": ("ev", "v1", "true", "Event"),
        "namespaces": ("ns", "v1", "false", "Namespace"),
        "nodes": ("no", "v1", "false", "Node"),
        "customresourcedefinitions": ("crd,crds", "apiextensions.k8s.io/v1", "false", "CustomResourceDefinition"),
        **{info.plural: (",".join(info.short_names), info.api_version, "true", info.kind) for info in KINDS.values()},
    }
    for name, (short, version, namespaced, kind) in expected.items():
        row = rows[name]
        assert (row["SHORTNAMES"], row["APIVERSION"], row["NAMESPACED"], row["KIND"]) == (
            short,
            version,
            namespaced,
            kind,
        ), row
    assert "deployments" not in rows and "replicasets" not in rows

    wide = {r["NAME"]: r for r in table(kubectl("api-resources", "-o", "wide")) if r["APIVERSION"] == "v1"}
    assert set(wide["pods"]["VERBS"].split(",")) >= {"create", "delete", "get", "list", "patch", "update", "watch"}
    assert wide["pods"]["CATEGORIES"] == "all"
    # The v1 kinds and Katib's three (kubeflow.org/v1beta1) share the group.
    v1 = [f"{info.plural}.{info.group}" for info in KINDS.values() if info.group == "kubeflow.org"]
    served = sorted([*v1, *(f"{plural}.kubeflow.org" for plural in ("experiments", "suggestions", "trials"))])
    assert names(kubectl("api-resources", "--api-group=kubeflow.org", "-o", "name")) == served
    cluster_scoped = set(names(kubectl("api-resources", "--namespaced=false", "-o", "name")))
    assert {"namespaces", "nodes", "customresourcedefinitions.apiextensions.k8s.io"} <= cluster_scoped
    assert "pods" not in cluster_scoped


def test_apps_group_is_not_served(kubectl: Kubectl) -> None:
    for resource in ("deployments", "replicasets"):
        result = kubectl.run("get", resource)
        assert result.returncode == 1
        assert f'error: the server doesn\'t have a resource type "{resource}"' in result.stderr


def test_builtin_kinds_print_server_side_tables(kubectl: Kubectl, ns: str) -> None:
    create(kubectl, configmap("settings", ns, {"a": "1", "b": "2"}))
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "creds", "namespace": ns},
        "data": {"password": "aHVudGVyMg=="},
        "stringData": {"user": "admin"},
    }
    create(kubectl, secret)
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "web", "namespace": ns},
        "spec": {
            "selector": {"app": "web"},
            "ports": [{"name": "http", "port": 80}, {"name": "dns", "port": 53, "protocol": "UDP"}],
        },
    }
    create(kubectl, service)
    create(kubectl, pod("runner", ns, SLEEPER))
    # Without a command the local node cannot run the container: it waits, like a kubelet would.
    create(kubectl, {**pod("stuck", ns, ""), "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
    wait_running(kubectl, ns, "runner")
    eventually(
        lambda: "CreateContainerConfigError" in kubectl("get", "pod", "stuck", "-n", ns),
        what="the pod without a command to report CreateContainerConfigError",
    )

    pods_out = kubectl("get", "pods", "-n", ns)
    assert headers(pods_out) == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    pods = by_name(table(pods_out))
    assert (pods["runner"]["READY"], pods["runner"]["STATUS"], pods["runner"]["RESTARTS"]) == ("1/1", "Running", "0")
    assert AGE.match(pods["runner"]["AGE"]), pods["runner"]
    assert (pods["stuck"]["READY"], pods["stuck"]["STATUS"]) == ("0/1", "CreateContainerConfigError")

    node = kubectl("get", "nodes", "-o", "jsonpath={.items[0].metadata.name}")
    wide_out = kubectl("get", "pods", "-n", ns, "-o", "wide")
    assert headers(wide_out) == [
        "NAME",
        "READY",
        "STATUS",
        "RESTARTS",
        "AGE",
        "IP",
        "NODE",
        "NOMINATED NODE",
        "READINESS GATES",
    ]
    runner = by_name(table(wide_out))["runner"]
    assert (runner["IP"], runner["NODE"], runner["NOMINATED NODE"]) == ("127.0.0.1", node, "<none>")

    one = table(kubectl("get", "pod", "runner", "-n", ns))
    assert [r["NAME"] for r in one] == ["runner"] and one[0]["STATUS"] == "Running"

    svc_out = kubectl("get", "services", "-n", ns, "-o", "wide")
    assert headers(svc_out) == ["NAME", "TYPE", "CLUSTER-IP", "EXTERNAL-IP", "PORT(S)", "AGE", "SELECTOR"]
    web = by_name(table(svc_out))["web"]
    assert (web["TYPE"], web["PORT(S)"], web["SELECTOR"]) == ("ClusterIP", "80/TCP,53/UDP", "app=web")

    assert by_name(table(kubectl("get", "configmaps", "-n", ns)))["settings"]["DATA"] == "2"
    creds = by_name(table(kubectl("get", "secrets", "-n", ns)))["creds"]
    # stringData is write-only: the server folds it into data (base64), as a real API server does.
    assert (creds["TYPE"], creds["DATA"]) == ("Opaque", "2")
    stored = kubectl.json("get", "secret", "creds", "-n", ns)
    assert stored["data"] == {"password": "aHVudGVyMg==", "user": "YWRtaW4="} and "stringData" not in stored
    assert stored["type"] == "Opaque"

    ns_out = kubectl("get", "namespace", ns)
    assert headers(ns_out) == ["NAME", "STATUS", "AGE"] and table(ns_out)[0]["STATUS"] == "Active"

    def events() -> list[dict[str, str]]:
        out = kubectl("get", "events", "-n", ns)
        assert headers(out) == ["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
        return table(out)

    # The node records its Warning just after reporting the status, so poll for it.
    seen = eventually(
        lambda: (found := events()) and any(e["REASON"] == "Failed" for e in found) and found,
        what="the Warning event of the pod that cannot start",
    )
    assert any(e["REASON"] == "Scheduled" and e["OBJECT"] == "pod/runner" and e["TYPE"] == "Normal" for e in seen)
    assert any(e["REASON"] == "Failed" and e["OBJECT"] == "pod/stuck" and e["TYPE"] == "Warning" for e in seen)

    wide_events = kubectl("get", "events", "-n", ns, "-o", "wide", "--field-selector", "reason=Scheduled")
    assert headers(wide_events) == [
        "LAST SEEN",
        "TYPE",
        "REASON",
        "OBJECT",
        "SUBOBJECT",
        "SOURCE",
        "MESSAGE",
        "FIRST SEEN",
        "COUNT",
        "NAME",
    ]
    scheduled = by_name(table(wide_events), "OBJECT")["pod/runner"]
    assert (scheduled["SOURCE"], scheduled["COUNT"]) == ("default-scheduler", "1")

    nodes = by_name(table(kubectl("get", "nodes")))
    assert nodes[node]["STATUS"] == "Ready" and nodes[node]["VERSION"].startswith("v1.32")
    wide_nodes = by_name(table(kubectl("get", "nodes", "-o", "wide")))
    assert (wide_nodes[node]["INTERNAL-IP"], wide_nodes[node]["CONTAINER-RUNTIME"]) == (
        "127.0.0.1",
        "trainyard-process://1",
    )
    crds = by_name(table(kubectl("get", "crds")))
    assert re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$", crds["pytorchjobs.kubeflow.org"]["CREATED AT"])


def test_output_formats(kubectl: Kubectl, ns: str) -> None:
    for name in ("alpha", "beta"):
        create(kubectl, configmap(name, ns, {"k": name}))

    assert kubectl("get", "configmaps", "-n", ns, "-o", "name").split() == ["configmap/alpha", "configmap/beta"]
    as_json = kubectl.json("get", "configmaps", "-n", ns)
    assert as_json["kind"] == "List" and as_json["apiVersion"] == "v1"
    assert [(i["kind"], i["metadata"]["name"], i["data"]["k"]) for i in as_json["items"]] == [
        ("ConfigMap", "alpha", "alpha"),
        ("ConfigMap", "beta", "beta"),
    ]
    as_yaml = yaml.safe_load(kubectl("get", "configmap", "beta", "-n", ns, "-o", "yaml"))
    assert (as_yaml["kind"], as_yaml["metadata"]["namespace"], as_yaml["data"]) == ("ConfigMap", ns, {"k": "beta"})
    assert as_yaml["metadata"]["resourceVersion"].isdigit() and as_yaml["metadata"]["uid"]
    assert kubectl("get", "configmap", "alpha", "-n", ns, "-o", "jsonpath={.data.k}") == "alpha"
    custom = table(kubectl("get", "cm", "-n", ns, "-o", "custom-columns=N:.metadata.name,V:.data.k"))
    assert [(r["N"], r["V"]) for r in custom] == [("alpha", "alpha"), ("beta", "beta")]


def test_crd_additional_printer_columns_and_sort_by(kubectl: Kubectl, ns: str) -> None:
    ensure_widget_crd(kubectl)
    create(kubectl, widget("a-large", ns, size=10, color="blue"))
    create(kubectl, widget("b-small", ns, size=2, color="red"))
    patch = {"status": {"conditions": [{"type": "Ready", "status": "True"}]}}
    kubectl("patch", "widget", "a-large", "-n", ns, "--subresource=status", "--type=merge", "-p", json.dumps(patch))

    out = kubectl("get", "widgets", "-n", ns)
    assert headers(out) == ["NAME", "SIZE", "READY", "AGE"]
    rows = by_name(table(out))
    assert (rows["a-large"]["SIZE"], rows["a-large"]["READY"]) == ("10", "True")
    assert (rows["b-small"]["SIZE"], rows["b-small"]["READY"]) == ("2", "<none>")
    assert AGE.match(rows["b-small"]["AGE"]), rows

    wide = kubectl("get", "wd", "-n", ns, "-o", "wide")
    assert headers(wide) == ["NAME", "SIZE", "COLOR", "READY", "AGE"]
    assert by_name(table(wide))["b-small"]["COLOR"] == "red"

    # Numbers sort numerically (2 before 10), which needs the full objects in the Table rows.
    by_size = table(kubectl("get", "widgets", "-n", ns, "--sort-by=.spec.size"))
    assert [r["NAME"] for r in by_size] == ["b-small", "a-large"]
    assert kubectl("get", "widget", "b-small", "-n", ns, "-o", "name").strip() == "widget.example.com/b-small"


def test_all_namespaces_adds_a_namespace_column(kubectl: Kubectl, ns: str) -> None:
    other = new_namespace(kubectl, "read-other")
    try:
        create(kubectl, configmap("here", ns, labels={"suite": ns}))
        create(kubectl, configmap("there", other, labels={"suite": ns}))
        out = kubectl("get", "configmaps", "-A", "-l", f"suite={ns}")
        assert headers(out) == ["NAMESPACE", "NAME", "DATA", "AGE"]
        assert {(r["NAMESPACE"], r["NAME"]) for r in table(out)} == {(ns, "here"), (other, "there")}
        listed = kubectl.json("get", "configmaps", "--all-namespaces", "-l", f"suite={ns}")
        assert sorted(i["metadata"]["namespace"] for i in listed["items"]) == sorted([ns, other])
    finally:
        kubectl("delete", "namespace", other, "--wait=false")


def test_label_selectors_equality_and_set_based(kubectl: Kubectl, ns: str) -> None:
    labels = {"a": {"env": "a"}, "b": {"env": "b", "x": "1"}, "c": {"env": "c"}, "none": {}}
    for name, lab in labels.items():
        create(kubectl, configmap(name, ns, labels=lab))

    def select(selector: str) -> set[str]:
        return {n.split("/")[1] for n in kubectl("get", "cm", "-n", ns, "-l", selector, "-o", "name").split()}

    assert select("env=a") == {"a"}
    assert select("env!=a") == {"b", "c", "none"}
    assert select("env in (a,b)") == {"a", "b"}
    assert select("env notin (a,b)") == {"c", "none"}
    assert select("!x") == {"a", "c", "none"}
    assert select("x") == {"b"}
    assert select("env,!x") == {"a", "c"}
    empty = kubectl.run("get", "cm", "-n", ns, "-l", "env in (zzz)")
    assert empty.returncode == 0 and f"No resources found in {ns} namespace." in empty.stderr
    bad = kubectl.run("get", "cm", "-n", ns, "-l", "env in (a")
    assert bad.returncode != 0 and "unable to parse requirement" in bad.stderr


def test_field_selectors(kubectl: Kubectl, ns: str) -> None:
    create(kubectl, pod("running", ns, SLEEPER, labels={"app": "f"}))
    create(kubectl, {**pod("waiting", ns, ""), "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
    wait_running(kubectl, ns, "running")

    def select(*args: str) -> list[str]:
        return kubectl("get", "pods", "-n", ns, *args, "-o", "name").split()

    assert select("--field-selector", "status.phase=Running") == ["pod/running"]
    assert select("--field-selector", "status.phase!=Running") == ["pod/waiting"]
    assert select("--field-selector", "status.phase=Pending") == ["pod/waiting"]
    assert select("--field-selector", "metadata.name=waiting") == ["pod/waiting"]
    assert select("--field-selector", "status.phase=Running,spec.restartPolicy=Never", "-l", "app=f") == ["pod/running"]
    rows = table(kubectl("get", "pods", "-n", ns, "--field-selector=status.phase==Running"))
    assert [(r["NAME"], r["STATUS"]) for r in rows] == [("running", "Running")]

    unsupported = kubectl.run("get", "pods", "-n", ns, "--field-selector", "spec.containers=x")
    assert unsupported.returncode == 1
    assert "Error from server (BadRequest)" in unsupported.stderr
    assert "field label not supported: spec.containers" in unsupported.stderr
    cm_unsupported = kubectl.run("get", "configmaps", "-n", ns, "--field-selector", "status.phase=Running")
    # ConfigMaps word it differently upstream: their selectable fields come from a generic table.
    assert '"status.phase" is not a known field selector: only "metadata.name", "metadata.namespace"' in (
        cm_unsupported.stderr
    )


def test_show_labels_and_label_columns(kubectl: Kubectl, ns: str) -> None:
    create(kubectl, configmap("one", ns, labels={"tier": "fe", "app": "web"}))
    create(kubectl, configmap("two", ns, labels={"app": "db"}))

    shown = kubectl("get", "cm", "-n", ns, "--show-labels")
    assert headers(shown) == ["NAME", "DATA", "AGE", "LABELS"]
    rows = by_name(table(shown))
    assert rows["one"]["LABELS"] == "app=web,tier=fe" and rows["two"]["LABELS"] == "app=db"

    columns = kubectl("get", "cm", "-n", ns, "-L", "tier", "-L", "app")
    assert headers(columns) == ["NAME", "DATA", "AGE", "TIER", "APP"]
    rows = by_name(table(columns))
    assert (rows["one"]["TIER"], rows["one"]["APP"]) == ("fe", "web")
    assert (rows["two"]["TIER"], rows["two"]["APP"]) == ("", "db")


def test_describe_shows_events_of_pods_and_custom_resources(kubectl: Kubectl, ns: str) -> None:
    create(kubectl, pod("described", ns, SLEEPER, labels={"app": "d"}))
    wait_running(kubectl, ns, "described")
    described = kubectl("describe", "pod", "described", "-n", ns)
    assert re.search(rf"^Namespace:\s+{ns}$", described, re.M)
    assert re.search(r"^Status:\s+Running$", described, re.M)
    assert re.search(r"^Labels:\s+app=d$", described, re.M)
    assert re.search(r"^IP:\s+127\.0\.0\.1$", described, re.M)
    events = described[described.index("\nEvents:") :]
    assert re.search(rf"Normal\s+Scheduled\s+\S+\s+\S+\s+Successfully assigned {ns}/described to ", events)
    assert re.search(r"Normal\s+Started\s+\S+\s+kubelet\s+Started container c", events)

    ensure_widget_crd(kubectl)
    create(kubectl, widget("shiny", ns, size=3))
    uid = kubectl("get", "widget", "shiny", "-n", ns, "-o", "jsonpath={.metadata.uid}")
    event = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": "shiny.polished", "namespace": ns},
        "involvedObject": {
            "apiVersion": "example.com/v1",
            "kind": "Widget",
            "name": "shiny",
            "namespace": ns,
            "uid": uid,
        },
        "reason": "Polished",
        "message": "the widget shines",
        "type": "Normal",
        "source": {"component": "polisher"},
        "count": 1,
    }
    apply(kubectl, event)
    described = kubectl("describe", "widget", "shiny", "-n", ns)
    assert re.search(r"^Kind:\s+Widget$", described, re.M)
    assert re.search(r"^\s+Size:\s+3$", described, re.M)
    assert re.search(r"Normal\s+Polished\s+\S+\s+polisher\s+the widget shines", described)


def test_events_command(kubectl: Kubectl, ns: str) -> None:
    create(kubectl, pod("evented", ns, SLEEPER))
    wait_running(kubectl, ns, "evented")
    out = kubectl("events", "-n", ns, "--for", "pod/evented")
    assert headers(out) == ["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    reasons = {(r["REASON"], r["OBJECT"]) for r in table(out)}
    assert {("Scheduled", "Pod/evented"), ("Started", "Pod/evented")} <= reasons
    warnings = kubectl.run("events", "-n", ns, "--types=Warning")
    assert warnings.returncode == 0 and "Scheduled" not in warnings.stdout
