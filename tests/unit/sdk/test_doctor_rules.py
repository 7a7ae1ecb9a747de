"""``yard doctor``'s rules over snapshots of real jobs: each failure provoked on a real plane and read
back by ``sdk.doctor.gather`` (``doctor_snapshots/capture.py``; the jobs are in ``doctor_snapshots/jobs``).

The expensive failures are real too: the rendezvous and gloo snapshots come from jobs whose replicas
ran torch's gloo backend on the plane (a master whose peer joins too late, a rank that skips an
all_reduce). Variants no plane here can provoke (NCCL on GPUs, torchrun's elastic rendezvous, a
node that stops reporting) take those snapshots and change only what the variant changes, with
text torch printed (torchrun's, captured by running it; NCCL's watchdog line as a real job logged it).
"""

from __future__ import annotations

import copy
import json
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from trainyard.api.meta import parse_time
from trainyard.sdk.diagnosis import Finding, Settings, Snapshot, diagnose
from trainyard.sdk.diagnosis.model import field_path
from trainyard.sdk.explain import why
from trainyard.sdk.kinds import builtin_kinds, default_kind

HERE = Path(__file__).parent / "doctor_snapshots"
KIND = default_kind()


def snapshot(name: str, **changes: Any) -> Snapshot:
    raw = json.loads((HERE / f"{name}.json").read_text())
    kind = next(k for k in builtin_kinds() if k.kind == raw.get("kind", KIND.kind))
    snap = Snapshot(
        job=raw["job"],
        view=kind.view,
        now=datetime.fromisoformat(raw["now"]),
        container=kind.default_container,
        pods=raw["pods"],
        events=raw["events"],
        logs=raw["logs"],
        previous=raw["previous"],
        nodes=raw["nodes"],
        node_pods=raw["node_pods"],
        claims=raw["claims"],
        workload=raw["workload"],
        queue_lines=[tuple(x) for x in raw["queue_lines"]],
    )
    return replace(snap, **changes)


def only(snap: Snapshot) -> Finding:
    found = diagnose(snap)
    assert len(found) == 1, [f.lines() for f in found]
    return found[0]


def test_a_gang_that_does_not_fit_says_which_resource_how_much_and_where() -> None:
    finding = only(snapshot("huge"))
    assert finding.rule == "GangDoesNotFit" and finding.severity == "error"
    # Two pods of 64 cpu each; the one node has its 2 cores less what its running pods request.
    assert finding.cause.startswith("The gang of 2 pods does not fit the nodes: cpu: 128 requested (64 per pod), ")
    assert "free (vm " in finding.cause
    assert "spec.pytorchReplicaSpecs.Master.template.spec.containers[0].resources.requests.cpu" in finding.remedy
    assert any("is Unschedulable: 0/1 nodes are available: resource gap: cpu 126" in e for e in finding.evidence)
    assert any(e.startswith("event FailedScheduling on pod/huge-master-0") for e in finding.evidence)
    assert set(finding.pods) == {"huge-master-0", "huge-worker-0"}


def test_free_resources_count_what_the_nodes_pods_request() -> None:
    base = snapshot("huge")
    busy = copy.deepcopy(base.node_pods[0])
    busy["metadata"]["name"] = "other"
    busy["spec"]["containers"] = [{"name": "c", "resources": {"requests": {"cpu": "1500m"}}}]
    busy["status"]["phase"] = "Running"
    finished = copy.deepcopy(busy)
    finished["status"]["phase"] = "Succeeded"  # a finished pod frees what it asked
    before = only(base).cause
    after = only(replace(base, node_pods=[*base.node_pods, busy, finished])).cause
    assert before != after
    assert "450m free (vm 450m)" in after, after


def test_no_node_matching_the_selector_says_which_label() -> None:
    finding = only(snapshot("selector"))
    assert finding.rule == "NoNodeMatches"
    assert "accelerator=a100" in finding.cause
    assert "spec.pytorchReplicaSpecs.Master.template.spec.nodeSelector" in finding.remedy
    assert "kubectl label node NODE accelerator=a100" in finding.remedy


def test_oom_names_the_limit_the_peak_and_the_field_to_raise() -> None:
    finding = only(snapshot("oom"))
    assert finding.rule == "OOMKilled"
    assert finding.cause == "master-0 (pod oom-master-0) was OOM-killed: peak 115.7Mi, over its memory limit 64Mi."
    assert finding.remedy.startswith(
        "raise resources.limits.memory above 115.7Mi "
        "(spec.pytorchReplicaSpecs.Master.template.spec.containers[0].resources.limits.memory: 64Mi)"
    )
    assert "oom-master-0: state.terminated OOMKilled, exit code 137" in finding.evidence


def test_a_gang_restarted_crash_gives_exit_code_restarts_and_last_lines() -> None:
    finding = only(snapshot("crash"))
    assert finding.rule == "CrashLoop"
    assert finding.cause == "master-0 (pod crash-master-0) keeps crashing: exit code 3: ValueError: bad config."
    assert "crash-master-0: exit code 3; the job restarted its replicas 20 time(s)" in finding.evidence
    assert "crash-master-0 log: ValueError: bad config" in finding.evidence
    assert "backoffLimit 20" in finding.remedy and "kubectl logs crash-master-0" in finding.remedy


def test_a_crash_loop_in_place_reads_the_previous_run() -> None:
    finding = only(snapshot("loop"))
    assert finding.rule == "CrashLoop"
    assert "exit code 3: RuntimeError: CUDA error: device-side assert" in finding.cause
    assert any("restarted" in e and "in place (CrashLoopBackOff: back-off" in e for e in finding.evidence)
    assert "loop-worker-0 previous log: RuntimeError: CUDA error: device-side assert" in finding.evidence
    assert "kubectl logs loop-worker-0 --previous" in finding.remedy


def test_a_replica_that_restarted_and_runs_again_is_a_warning() -> None:
    base = snapshot("loop")
    worker = copy.deepcopy(next(p for p in base.pods if p["metadata"]["name"] == "loop-worker-0"))
    worker["status"]["phase"] = "Running"
    worker["status"]["containerStatuses"][0]["state"] = {"running": {"startedAt": "2026-12-03T12:55:00Z"}}
    pods = [worker if p["metadata"]["name"] == "loop-worker-0" else p for p in base.pods]
    finding = only(replace(base, pods=pods))
    assert finding.rule == "Restarted" and finding.severity == "warning"
    assert finding.cause.startswith("worker-0 (pod loop-worker-0) restarted after it failed: exit code 3")


def test_an_image_mapped_to_no_environment_says_which_command_maps_it() -> None:
    finding = only(snapshot("unmapped"))
    assert finding.rule == "ModuleNotFound"
    assert "image tensorflow/tensorflow:2.15.0 maps to no local environment" in finding.cause
    assert "has no module 'tensorflow'" in finding.cause
    assert "yard env create NAME tensorflow --image 'tensorflow/tensorflow:*'" in finding.remedy
    assert "unmapped-master-0 log: ModuleNotFoundError: No module named 'tensorflow'" in finding.evidence


def test_a_mapping_to_an_environment_that_is_not_there_gives_the_nodes_remedy() -> None:
    finding = only(snapshot("badenv"))
    assert finding.rule == "EnvironmentMissing"
    assert 'maps to local environment "jax"' in finding.cause and "does not exist." in finding.cause
    assert finding.remedy.startswith("create it (`yard env create jax --path")
    assert "yard env remove jax" in finding.remedy


@pytest.mark.parametrize("name", ["nocmd", "sh127"])
def test_a_command_that_is_not_there(name: str) -> None:
    finding = only(snapshot(name))
    assert finding.rule == "CommandNotFound"
    assert "spec.pytorchReplicaSpecs.Master.template.spec.containers[0].command" in finding.remedy
    said = {"nocmd": "no-such-command: No such file or directory", "sh127": "sh: 1: trainer: not found"}[name]
    assert said in finding.cause


def test_an_image_a_clusters_kubelet_cannot_pull() -> None:
    base = snapshot("loop")  # the same pod, as a real cluster's kubelet reports a bad tag (its words)
    worker = copy.deepcopy(next(p for p in base.pods if p["metadata"]["name"] == "loop-worker-0"))
    status = worker["status"]["containerStatuses"][0]
    status.update(lastState={}, restartCount=0)
    status["state"] = {"waiting": {"reason": "ImagePullBackOff", "message": 'Back-off pulling image "python:3.11"'}}
    worker["status"]["phase"] = "Pending"
    pods = [worker if p["metadata"]["name"] == "loop-worker-0" else p for p in base.pods]
    finding = only(replace(base, pods=pods, logs={}, previous={}))
    assert finding.rule == "ImagePull"
    assert (
        finding.cause
        == "worker-0 (pod loop-worker-0) cannot start: its image python:3.11 cannot be pulled (ImagePullBackOff)."
    )
    assert "spec.pytorchReplicaSpecs.Worker.template.spec.containers[0].image" in finding.remedy


def test_a_claim_that_is_missing() -> None:
    finding = only(snapshot("claim"))
    assert finding.rule == "ClaimNotBound"
    assert finding.cause == "master-0 (pod claim-master-0) waits for PersistentVolumeClaim datasets, which is missing."
    assert any("FailedMount" in e and '"datasets" not found' in e for e in finding.evidence)


def test_a_resource_quota_that_refuses_the_pods() -> None:
    finding = only(snapshot("overquota"))
    assert finding.rule == "QuotaExceeded"
    assert finding.cause == (
        "ResourceQuota small in namespace quota refuses the job's pods: they request requests.cpu=2, "
        "requests.cpu=0 is in use, the quota allows requests.cpu=1."
    )
    assert "kubectl describe resourcequota small -n quota" in finding.remedy


def test_a_kueue_wait_names_the_queue_and_what_is_short() -> None:
    snap = snapshot("queued")
    finding = only(snap)
    assert finding.rule == "QueueWait" and finding.severity == "warning"
    assert "user-queue (ClusterQueue team)" in finding.cause and "waiting for 2 cpu" in finding.cause
    assert "kubectl edit clusterqueue team" in finding.remedy
    assert any("insufficient unused quota for cpu in flavor default-flavor" in e for e in finding.evidence)
    # describe's Why says the queue's finding, not "suspended: clear it".
    lines = why(snap.job, list(snap.pods), list(snap.events), view=KIND.view, findings=[finding]) or []
    assert lines[0] == finding.cause and not any("suspended" in line for line in lines)


def test_a_rendezvous_that_never_completes_counts_who_joined() -> None:
    finding = only(snapshot("rdzv"))
    assert finding.rule == "RendezvousIncomplete"
    # The master counted who joined; the worker, started too late, could not reach it once it had given up.
    assert finding.cause == (
        "The rendezvous never completes for master-0 (pod rdzv-master-0): 1 of 2 replicas joined within 6s; "
        "every other replica runs, so one has not joined: it starts slowly or dials another MASTER_ADDR/PORT."
    )
    assert any("DistStoreError: Timed out after" in e and "1/2 clients joined" in e for e in finding.evidence)
    assert any(e.startswith("rdzv-worker-0 log:") and "DistNetworkError" in e for e in finding.evidence)
    assert finding.pods == ("rdzv-master-0", "rdzv-worker-0")


def test_a_rendezvous_names_the_replica_that_is_not_running() -> None:
    base = snapshot("rdzv")
    worker = copy.deepcopy(next(p for p in base.pods if p["metadata"]["name"] == "rdzv-worker-0"))
    worker["status"] = {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False"}]}
    pods = [p if p["metadata"]["name"] != "rdzv-worker-0" else worker for p in base.pods]
    logs = {"rdzv-master-0": base.logs["rdzv-master-0"]}  # a pending worker has no log
    rendezvous = only(replace(base, pods=pods, logs=logs))
    said = "1 of 2 replicas joined within 6s; not running: worker-0 (pod rdzv-worker-0) Unschedulable."
    assert said in rendezvous.cause
    gone = only(replace(base, pods=[p for p in base.pods if p["metadata"]["name"] != "rdzv-worker-0"], logs=logs))
    assert "not running: worker-0 (no pod)" in gone.cause


TORCHRUN = [  # torchrun --nnodes=2 --rdzv-backend=c10d --rdzv-conf join_timeout=5, one node only (torch 2.13)
    '  File "/venv/lib/python3.11/site-packages/torch/distributed/elastic/rendezvous/dynamic_rendezvous.py", '
    "line 680, in run",
    "    raise RendezvousTimeoutError",
    "torch.distributed.elastic.rendezvous.api.RendezvousTimeoutError",
]
CLIENT = [  # a rank whose master never listened (init_process_group, env://, timeout 4 s)
    "torch.distributed.DistNetworkError: The client socket has timed out after 4000ms while trying to connect to "
    "(127.0.0.1, 29613).",
]


@pytest.mark.parametrize(
    ("lines", "said"),
    [(TORCHRUN, "torchrun's rendezvous timed out"), (CLIENT, "could not reach the rendezvous at 127.0.0.1:29613")],
    ids=["torchrun", "client"],
)
def test_other_rendezvous_words(lines: list[str], said: str) -> None:
    base = snapshot("rdzv")
    master = [p for p in base.pods if p["metadata"]["name"] == "rdzv-master-0"]
    finding = only(replace(base, pods=master, logs={"rdzv-master-0": lines}))
    assert finding.rule == "RendezvousIncomplete" and said in finding.cause
    assert "not running: worker-0 (no pod)" in finding.cause


REFUSED = (
    "[W1203 12:56:50.123456789 socket.cpp:755] [c10d] The client socket has failed to connect to "
    "[localhost]:29500 (errno: 111 - Connection refused)."
)


def test_a_replica_still_dialing_the_master_but_not_once_it_got_through() -> None:
    base = snapshot("rdzv")
    master = [p for p in base.pods if p["metadata"]["name"] == "rdzv-master-0"]
    dialing = replace(base, pods=master, logs={"rdzv-master-0": ["starting", REFUSED, REFUSED]})
    assert "could not connect to the rendezvous at localhost:29500" in only(dialing).cause
    through = [REFUSED, "epoch 1 loss 0.5", *(f"step {i}" for i in range(10))]
    assert "RendezvousIncomplete" not in [f.rule for f in diagnose(replace(dialing, logs={"rdzv-master-0": through}))]


def test_a_gloo_timeout_says_which_replica_and_which_peer() -> None:
    base = snapshot("gloo")
    finding = only(base)
    assert finding.rule == "CollectiveTimeout"
    # Rank 1 slept instead of joining the all_reduce, then ended (exit 0): the peer that did not take part.
    assert finding.cause == (
        "A collective failed on master-0 (pod gloo-master-0): gloo timed out waiting 3s for a recv from a peer; "
        "not running: worker-0 (pod gloo-worker-0) Completed, exit code 0."
    )
    assert "NCCL_SOCKET_IFNAME" in finding.remedy
    assert any("Timed out waiting 3000ms for recv operation to complete" in e for e in finding.evidence)
    worker = copy.deepcopy(next(p for p in base.pods if p["metadata"]["name"] == "gloo-worker-0"))
    worker["status"]["phase"] = "Running"
    worker["status"]["containerStatuses"][0]["state"] = {"running": {"startedAt": "2026-12-03T12:56:44Z"}}
    pods = [p if p["metadata"]["name"] != "gloo-worker-0" else worker for p in base.pods]
    assert "every other replica still runs (a hang)" in only(replace(base, pods=pods)).cause


# The line torch's ProcessGroupNCCL writes when its watchdog gives up (written here in its format:
# no GPU on this machine to provoke it).
NCCL = (
    "[rank0]:[E1203 12:58:02.117204331 ProcessGroupNCCL.cpp:632] [Rank 0] Watchdog caught collective operation "
    "timeout: WorkNCCL(SeqNum=1, OpType=BROADCAST, NumelIn=4096, NumelOut=4096, Timeout(ms)=600000) ran "
    "for 600012 milliseconds before timing out."
)


def test_an_nccl_watchdog_timeout() -> None:
    base = snapshot("gloo")
    finding = only(replace(base, logs={**base.logs, "gloo-master-0": ["step 0", NCCL]}))
    assert "NCCL's watchdog timed out WorkNCCL(SeqNum=1, OpType=BROADCAST" in finding.cause
    assert "after 600s" in finding.cause


def test_a_script_that_never_exits_after_training() -> None:
    base = snapshot("forever")
    updated = parse_time(base.job["status"]["trainingProgress"]["lastUpdateTime"])
    assert diagnose(replace(base, now=updated + timedelta(seconds=10))) == []  # within the grace
    finding = only(replace(base, now=updated + timedelta(seconds=90)))
    assert finding.rule == "NeverExits" and finding.severity == "warning"
    assert finding.cause == (
        "Training reported 100% done (epoch 3/3) 90s ago, but master-0 (pod forever-master-0) still runs."
    )
    assert "destroy_process_group" in finding.remedy and "activeDeadlineSeconds" in finding.remedy
    short = replace(base, now=updated + timedelta(seconds=10), settings=Settings(finished_grace_seconds=5))
    assert only(short).rule == "NeverExits"


def test_a_node_that_stopped_reporting_or_is_gone() -> None:
    base = snapshot("forever")
    node = copy.deepcopy(base.nodes[0])
    for c in node["status"]["conditions"]:
        if c["type"] == "Ready":  # the node lifecycle controller's words, upstream's
            c.update(status="Unknown", reason="NodeStatusUnknown", message="Kubelet stopped posting node status.")
    updated = parse_time(base.job["status"]["trainingProgress"]["lastUpdateTime"])
    early = updated + timedelta(seconds=1)
    finding = only(replace(base, nodes=[node], now=early))
    assert finding.rule == "NodeNotReady"
    assert finding.cause == (
        "Node vm under master-0 (pod forever-master-0) is NotReady "
        "(NodeStatusUnknown: Kubelet stopped posting node status.)."
    )
    assert "gone (no Node object)" in only(replace(base, nodes=[], now=early)).cause


def test_a_pod_one_rule_explains_is_not_explained_again() -> None:
    rules = [f.rule for f in diagnose(snapshot("oom"))]
    assert rules == ["OOMKilled"]  # not also ContainerFailed for its exit code 137
    assert [f.rule for f in diagnose(snapshot("unmapped"))] == ["ModuleNotFound"]


def test_a_job_that_succeeded_has_no_findings() -> None:
    base = snapshot("crash")
    job = copy.deepcopy(base.job)
    job["status"]["conditions"].append({"type": "Succeeded", "status": "True", "reason": "PyTorchJobSucceeded"})
    assert diagnose(replace(base, job=job)) == []


def test_field_paths_are_read_from_the_job_not_a_kind() -> None:
    base = snapshot("oom")
    pod = base.pods[0]
    assert field_path(base, pod, "resources.limits.memory") == (
        "spec.pytorchReplicaSpecs.Master.template.spec.containers[0].resources.limits.memory"
    )
    plain = replace(base, job={**base.job, "spec": {"template": {}}})
    assert field_path(plain, pod, "resources.limits.memory") == "resources.limits.memory of container pytorch"


def test_describes_why_says_the_findings_in_place_of_its_own_pod_lines() -> None:
    snap = snapshot("huge")
    findings = diagnose(snap)
    lines = why(snap.job, list(snap.pods), list(snap.events), view=KIND.view, findings=findings) or []
    assert lines[0].startswith("The job is Pending (Unschedulable)")
    assert findings[0].cause in lines and f"  fix: {findings[0].remedy}" in lines
    assert not any("operator has created no pods" in line for line in lines)
    assert not any(line.startswith("Recent warning") for line in lines)  # the scheduler's words are said once
    plain = why(snap.job, list(snap.pods), list(snap.events), view=KIND.view) or []
    assert any("is Unschedulable" in line and "lower the job's resource requests" in line for line in plain)


def test_a_running_job_with_a_finding_gets_a_why() -> None:
    snap = snapshot("loop")
    assert why(snap.job, list(snap.pods), list(snap.events), view=KIND.view) is None  # Running: nothing said before
    lines = why(snap.job, list(snap.pods), list(snap.events), view=KIND.view, findings=diagnose(snap)) or []
    assert lines and "keeps crashing" in lines[0]


def test_a_trainjob_is_read_by_its_own_family() -> None:
    finding = only(snapshot("tj-oom"))  # a TrainJob's node pod, run by a JobSet's Job
    assert finding.rule == "OOMKilled"
    assert finding.cause.startswith("node-0 (pod tj-oom-node-0-0-") and "over its memory limit 64Mi" in finding.cause
    assert "(resources.limits.memory of container node: 64Mi)" in finding.remedy  # no *ReplicaSpecs to name


def test_findings_as_json() -> None:
    body = only(snapshot("oom")).to_dict()
    assert body["rule"] == "OOMKilled" and body["pods"] == ["oom-master-0"] and isinstance(body["evidence"], list)
