"""The ``yard`` CLI end to end: subprocesses against a real plane, their output and exit codes asserted.

Jobs are real PyTorchJobs whose replicas are short ``python3 -c`` processes; each test names its
own jobs so they can share the module's plane.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import REPO, Plane, eventually, own_plane

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Plane]:
    yield from own_plane(tmp_path_factory, "yard-cli", "--restart-backoff", "0.2", "--pending-timeout", "2")


def argv(plane: Plane, *args: str) -> list[str]:
    return [sys.executable, "-m", "trainyard.cli.main", "--home", str(plane.home), *args]


def yard(
    plane: Plane, *args: str, input: str = "", env: dict[str, str] | None = None, timeout: float = 240
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv(plane, *args),
        capture_output=True,
        text=True,
        input=input,
        cwd=REPO,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, f"exit {result.returncode}\n{result.stdout}\n{result.stderr}"
    assert "Traceback" not in result.stderr
    return result.stdout


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:5]}"


HELLO = (
    "import os, time; r = os.environ['RANK']; print('hello from', r, flush=True); time.sleep(1); print('bye from', r)"
)


def job(name: str, *, workers: int = 2, script: str | None = None, policy: str = "OnFailure", **extra: Any) -> str:
    """A PyTorchJob manifest whose replicas print their rank twice (or run ``script``)."""
    code = script or HELLO

    def spec(replicas: int) -> dict[str, Any]:
        container = {"name": "pytorch", "image": "python:3.11", "command": ["python3", "-c", code], **extra}
        return {"replicas": replicas, "restartPolicy": policy, "template": {"spec": {"containers": [container]}}}

    specs = {"Master": spec(1), **({"Worker": spec(workers)} if workers else {})}
    body = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name, "labels": {"suite": "yard-cli", "job": name}},
        "spec": {"pytorchReplicaSpecs": specs},
    }
    return yaml.safe_dump(body)


def write(tmp_path: Path, text: str, name: str = "job.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_run_streams_every_replica_and_exits_0_then_get_logs_describe_delete(plane: Plane, tmp_path: Path) -> None:
    name = unique("hello")
    result = yard(plane, "run", "-f", str(write(tmp_path, job(name))))
    stdout = ok(result)
    lines = stdout.splitlines()
    for replica, rank in (("master-0", 0), ("worker-0", 1), ("worker-1", 2)):
        assert f"[{replica}] hello from {rank}" in lines, stdout
        assert f"[{replica}] bye from {rank}" in lines, stdout
    assert f"pytorchjob.kubeflow.org/{name} created" in result.stderr
    assert f"pytorchjob/{name} succeeded in" in result.stderr
    # The progress line, one per change off a terminal, shows the job or its replicas running (a job
    # that finishes between two operator passes is never Running itself, as upstream).
    assert re.search(rf"pytorchjob/{name}: (Running|\w+ \(.*Running)", result.stderr), result.stderr

    merged = ok(yard(plane, "logs", name)).splitlines()
    assert sorted(merged) == sorted(line for line in lines if line.startswith("[")), merged
    assert ok(yard(plane, "logs", name, "--replica", "worker-1")) == "hello from 2\nbye from 2\n"
    assert ok(yard(plane, "logs", f"pytorchjob/{name}", "--tail", "1")).count("bye from") == 3
    assert ok(yard(plane, "logs", name, "--since", "1h", "-r", "worker")).count("hello from") == 2
    coloured = ok(yard(plane, "logs", name, env={"FORCE_COLOR": "1", "TERM": "xterm"}))
    assert "\x1b[" in coloured and "hello from 0" in coloured
    assert ok(yard(plane, "logs", f"{name}-worker-0")) == "hello from 1\nbye from 1\n"  # a pod's own log
    missing = yard(plane, "logs", name, "--replica", "worker-7")
    assert (
        missing.returncode == 1 and "has no replica 'worker-7' (it has: master-0, worker-0, worker-1)" in missing.stderr
    )

    table = ok(yard(plane, "get", "jobs")).splitlines()
    # "jobs" spans every served kind; PROGRESS and EPOCH stay empty for a job that reports no training.
    assert table[0].split() == ["NAME", "STATE", "PROGRESS", "EPOCH", "AGE", "REPLICAS", "KIND"]
    assert any(line.split()[:2] == [name, "Succeeded"] for line in table), table
    wide = ok(yard(plane, "get", "ptj", name, "-o", "wide")).splitlines()
    assert wide[0].split()[-3:] == ["DURATION", "RESTARTS", "KIND"] and wide[1].split()[-1] == "PyTorchJob"
    as_json = json.loads(ok(yard(plane, "get", "pytorchjobs", name, "-o", "json")))
    assert as_json["kind"] == "PyTorchJob" and as_json["metadata"]["name"] == name
    as_yaml = yaml.safe_load(ok(yard(plane, "get", "jobs", "-l", f"job={name}", "-o", "yaml")))
    assert [i["metadata"]["name"] for i in as_yaml["items"]] == [name]
    assert ok(yard(plane, "get", "jobs", "-l", "job=nobody")) == ""
    everywhere = ok(yard(plane, "get", "jobs", "-A")).splitlines()
    assert everywhere[0].split()[:2] == ["NAMESPACE", "NAME"] and any(
        line.split()[:2] == ["default", name] for line in everywhere
    )

    pods = ok(yard(plane, "get", "pods", "--job", name, "-o", "wide")).splitlines()
    assert pods[0].split() == ["NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE", "JOB", "REPLICA"]
    assert sorted(line.split()[0] for line in pods[1:]) == [f"{name}-master-0", f"{name}-worker-0", f"{name}-worker-1"]
    assert all(line.split()[2] == "Completed" for line in pods[1:]), pods
    events = ok(yard(plane, "get", "events", "--job", name))
    assert "SuccessfulCreatePod" in events and f"pytorchjob/{name}" in events

    described = ok(yard(plane, "describe", "job", name))
    assert "State:        Succeeded" in described and "Why:" not in described
    for heading in ("Conditions:", "Replicas:", "Events:"):
        assert heading in described
    replica_rows = [
        line.split() for line in described.split("Replicas:")[1].split("Events:")[0].splitlines()[2:] if line
    ]
    assert [row[0] for row in replica_rows] == ["master-0", "worker-0", "worker-1"], described
    assert all(row[2] == "Completed" and row[4] == "0" for row in replica_rows), described

    assert ok(yard(plane, "delete", "pytorchjob", name)) == f"pytorchjob.kubeflow.org/{name} deleted\n"
    gone = yard(plane, "get", "pytorchjob", name)
    assert gone.returncode == 1 and gone.stderr == f'error: pytorchjob "{name}" not found in namespace default\n'
    assert yard(plane, "delete", "ptj", name, "--ignore-not-found").returncode == 0
    assert yard(plane, "delete", "ptj", name).returncode == 1


def test_run_of_a_failing_job_exits_1_with_the_reason(plane: Plane, tmp_path: Path) -> None:
    name = unique("crash")
    script = (
        "import os, sys, time; r = os.environ['RANK']; print('rank', r, 'gives up', flush=True); "
        "time.sleep(20) if r == '0' else sys.exit(3)"
    )
    result = yard(plane, "run", "-f", str(write(tmp_path, job(name, workers=1, script=script, policy="Never"))))
    assert result.returncode == 1, result
    assert "[worker-0] rank 1 gives up" in result.stdout
    assert f"error: pytorchjob/{name} failed:" in result.stderr and "Traceback" not in result.stderr
    assert "worker-0 exited with code 3." in result.stderr
    described = ok(yard(plane, "describe", f"pytorchjob/{name}"))
    assert "State:        Failed" in described and "Why:" in described and "The job failed:" in described
    again = yard(plane, "run", "-f", str(tmp_path / "job.yaml"))
    assert (
        again.returncode == 1
        and f"already exists and Failed; delete it first (`yard delete pytorchjob {name}`)" in again.stderr
    )
    ok(yard(plane, "delete", "ptj", name))


def test_describe_says_why_a_job_is_pending(plane: Plane, tmp_path: Path) -> None:
    name = unique("huge")
    ok(yard(plane, "apply", "-f", str(write(tmp_path, job(name, workers=0, resources={"requests": {"cpu": "5000"}})))))
    try:

        def why() -> str:
            text = ok(yard(plane, "describe", name))
            return text if "Pending" in text.split("Why:")[-1] and "Why:" in text else ""

        described = eventually(why, timeout=120, what="describe to explain the pending job")
        assert "State:        Pending" in described
        assert "master-0 (" in described and "is Unschedulable: 0/1 nodes are available" in described, described
        assert "Recent warning" not in described  # the scheduler's words are said once, not again as events
        assert "lower the job's resource requests" in described
    finally:
        ok(yard(plane, "delete", "ptj", name))


def test_apply_files_directories_and_stdin(plane: Plane, tmp_path: Path) -> None:
    first, second = unique("dir-a"), unique("dir-b")
    folder = tmp_path / "jobs"
    folder.mkdir()
    write(folder, job(first, workers=0), "a.yaml")
    write(folder, job(second, workers=0), "b.yml")
    assert ok(yard(plane, "apply", "-f", str(folder))).splitlines() == [
        f"pytorchjob.kubeflow.org/{first} created",
        f"pytorchjob.kubeflow.org/{second} created",
    ]
    assert (
        ok(yard(plane, "apply", "-f", "-", input=job(first, workers=0)))
        == f"pytorchjob.kubeflow.org/{first} unchanged\n"
    )
    changed = job(first, workers=0).replace("suite: yard-cli", "suite: changed")
    assert ok(yard(plane, "apply", "-f", "-", input=changed)) == f"pytorchjob.kubeflow.org/{first} configured\n"
    ok(yard(plane, "delete", f"ptj/{first}", second))


def one_line_error(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 1, result
    assert "Traceback" not in result.stderr and result.stderr.count("\n") == 1, result.stderr
    return result.stderr


def test_bad_manifests_get_one_line_naming_file_and_field(plane: Plane, tmp_path: Path) -> None:
    name = unique("bad")
    unknown = write(tmp_path, job(name).replace("kind: PyTorchJob", "kind: RayJob"), "rayjob.yaml")
    assert one_line_error(yard(plane, "apply", "-f", str(unknown))).startswith(
        f"error: {unknown}: kind: unknown kind 'RayJob': yard handles training jobs "
        "(Experiment, JAXJob, MPIJob, MXJob, OptimizationJob, PaddleJob, PyTorchJob, TFJob, TrainJob, TrainingJob, "
        "XGBoostJob)"
    )
    # TrainJob is served, by another group than a v1 job's.
    version = write(tmp_path, job(name).replace("kind: PyTorchJob", "kind: TrainJob"), "trainjob.yaml")
    assert one_line_error(yard(plane, "apply", "-f", str(version))).startswith(
        f"error: {version}: apiVersion: 'kubeflow.org/v1' is not served for TrainJob; use trainer.kubeflow.org/v1alpha1"
    )
    schema = write(tmp_path, job(name).replace("replicas: 2", "replicas: two"), "schema.yaml")
    error = one_line_error(yard(plane, "apply", "-f", str(schema)))
    assert error.startswith(f"error: {schema}: spec.pytorchReplicaSpecs.Worker.replicas: "), error
    rules = write(tmp_path, job(name).replace("Worker:", "Chief:"), "rules.yaml")
    error = one_line_error(yard(plane, "run", "-f", str(rules)))
    assert error.startswith(f"error: {rules}: spec.pytorchReplicaSpecs"), error
    malformed = write(tmp_path, "kind: PyTorchJob\n  metadata: x\n", "malformed.yaml")
    assert one_line_error(yard(plane, "run", "-f", str(malformed))).startswith(
        f"error: {malformed}:2:11: malformed YAML"
    )
    # The first document's error stops the apply before anything is sent.
    mixed = write(tmp_path, job(name) + "---\n" + job("x").replace("kind: PyTorchJob", "kind: Nope"), "mixed.yaml")
    assert f"{mixed} (document 2): kind: unknown kind 'Nope'" in one_line_error(yard(plane, "apply", "-f", str(mixed)))
    assert yard(plane, "get", "ptj", name).returncode == 1
    assert "unknown job kind 'rayjobs'" in one_line_error(yard(plane, "get", "rayjobs"))
    assert one_line_error(yard(plane, "logs", name)) == f"error: no job or pod named {name!r} in namespace default\n"
    assert "not found" in one_line_error(yard(plane, "describe", "job", name))


def test_follow_and_watch_end_with_the_job(plane: Plane, tmp_path: Path) -> None:
    name = unique("follow")
    watch_out = tmp_path / "watch.txt"
    with watch_out.open("w") as sink:
        watcher = subprocess.Popen(
            argv(plane, "get", "jobs", "-w", "-l", f"job={name}"), stdout=sink, stderr=subprocess.STDOUT, cwd=REPO
        )
    # The replicas say bye only once the test has seen the job Running: a job that finishes between
    # two operator passes is never recorded Running (as upstream), which a loaded machine makes likely.
    gate = tmp_path / "seen-running"
    script = HELLO.replace("time.sleep(1)", f'exec("while not os.path.exists({str(gate)!r}): time.sleep(0.1)")')

    def rows() -> list[list[str]]:
        return [line.split() for line in watch_out.read_text().splitlines()]

    try:
        ok(yard(plane, "apply", "-f", str(write(tmp_path, job(name, workers=1, script=script)))))
        eventually(lambda: any(r[:2] == [name, "Running"] for r in rows()), timeout=120, what="-w to show Running")
        gate.touch()
        follow = yard(plane, "logs", name, "-f")  # returns by itself once the job is over
        assert sorted(ok(follow).splitlines()) == sorted(
            ["[master-0] hello from 0", "[master-0] bye from 0", "[worker-0] hello from 1", "[worker-0] bye from 1"]
        )

        seen = eventually(
            lambda: any(r[:2] == [name, "Succeeded"] for r in rows()) and rows(),
            timeout=60,
            what="-w to show Succeeded",
        )
        assert seen[0] == ["NAME", "STATE", "PROGRESS", "EPOCH", "AGE", "REPLICAS", "KIND"]
        assert any(r[:2] == [name, "Running"] for r in seen), seen
    finally:
        watcher.send_signal(signal.SIGINT)
        try:
            assert watcher.wait(timeout=30) == 0
        finally:
            watcher.kill()  # nothing once it has exited; otherwise it would outlive the test
    ok(yard(plane, "delete", "ptj", name))


def test_ctrl_c_during_run_offers_to_delete_the_job(plane: Plane, tmp_path: Path) -> None:
    name = unique("interrupt")
    script = "import time; print('started', flush=True); time.sleep(600)"
    path = write(tmp_path, job(name, workers=0, script=script))
    err_file, out_file = tmp_path / "err.txt", tmp_path / "out.txt"
    with err_file.open("w") as err_sink, out_file.open("w") as out_sink:
        run = subprocess.Popen(
            argv(plane, "run", "-f", str(path)),
            stdin=subprocess.PIPE,
            stdout=out_sink,
            stderr=err_sink,
            text=True,
            cwd=REPO,
        )
    try:
        eventually(lambda: "started" in out_file.read_text(), timeout=120, what="the job's first log line")
        run.send_signal(signal.SIGINT)
        run.communicate(input="y\n", timeout=60)
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode == 130, err_file.read_text()
    assert out_file.read_text() == "[master-0] started\n"
    assert f"Delete pytorchjob/{name}?" in err_file.read_text()
    assert f"pytorchjob.kubeflow.org/{name} deleted" in err_file.read_text()
    eventually(lambda: yard(plane, "get", "ptj", name).returncode == 1, timeout=60, what="the job to be gone")
