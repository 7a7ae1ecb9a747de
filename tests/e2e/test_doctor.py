"""``yard doctor`` end to end: jobs provoked into the failures users meet, on a real plane, and the
doctor naming each cause and remedy (exit status 1), as ``yard describe``'s Why does.

The jobs' replicas are plain ``sh -c``/``python3 -c`` commands: a gang asking for more cpu than the
node has, a crash (``exit 3``), an OOM under a small memory limit, a script that keeps running after
it reported 100 %, and an image no local environment maps. They are all applied when the module's
plane is up and run side by side; each test polls its own job. (The rendezvous, gloo and NCCL cases
are unit tests over snapshots of real runs: ``tests/unit/sdk/test_doctor_rules.py``.)
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from conftest import Plane, eventually, own_plane
from trainyard.sdk import TrainingClient

pytestmark = pytest.mark.e2e

DONE_THEN_LINGER = (
    "import time; from trainyard import runtime; runtime.report(epoch=2, total_epochs=2); runtime.flush(); "
    "print('training done', flush=True); time.sleep(600)"
)
Obj = dict[str, Any]
HOG = "import time; hog = bytearray(300 * 1024 * 1024); hog[::4096] = b'x' * len(hog[::4096]); time.sleep(60)"


def job(name: str, command: list[str], *, workers: int = 0, image: str = "python:3.11", **container: Any) -> Obj:
    def spec(replicas: int) -> Obj:
        body = {"name": "pytorch", "image": image, "command": command, **container}
        return {"replicas": replicas, "restartPolicy": "Never", "template": {"spec": {"containers": [body]}}}

    specs = {"Master": spec(1), **({"Worker": spec(workers)} if workers else {})}
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name},
        "spec": {"pytorchReplicaSpecs": specs},
    }


JOBS = [
    job("gang", ["sh", "-c", "sleep 60"], workers=1, resources={"requests": {"cpu": "64"}}),
    job("crash", ["sh", "-c", "echo loading data; echo 'ValueError: bad config' >&2; exit 3"]),
    job("oom", ["python3", "-c", HOG], resources={"limits": {"memory": "64Mi"}}),
    job("linger", ["python3", "-c", DONE_THEN_LINGER]),
    job("unmapped", ["python3", "-c", "import tensorflow"], image="tensorflow/tensorflow:2.15.0"),
    job("healthy", ["sh", "-c", "echo training; sleep 120"], workers=1),
]


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Plane]:
    for started in own_plane(tmp_path_factory, "yard-doctor"):
        manifest = started.home / "jobs.yaml"
        manifest.write_text(yaml.safe_dump_all(JOBS))
        started.yard("apply", "-f", str(manifest))
        yield started


def doctor(plane: Plane, name: str, *flags: str) -> subprocess.CompletedProcess[str]:
    return plane.yard("doctor", name, *flags, check=False)


def told(plane: Plane, name: str, rule: str, *flags: str) -> str:
    """The doctor's report once it names ``rule`` (it exits 1 then)."""

    def probe() -> str | None:
        result = doctor(plane, name, *flags)
        assert "Traceback" not in result.stderr, result.stderr
        return result.stdout if result.returncode == 1 and rule in result.stdout else None

    return eventually(probe, timeout=120, interval=1, what=f"yard doctor {name} to say {rule}")


def test_a_gang_that_does_not_fit_names_the_resource_and_amounts(plane: Plane) -> None:
    out = told(plane, "pytorchjob/gang", "GangDoesNotFit")
    assert "The gang of 2 pods does not fit the nodes: cpu: 128 requested (64 per pod)" in out, out
    assert "spec.pytorchReplicaSpecs.Master.template.spec.containers[0].resources.requests.cpu" in out
    body = json.loads(doctor(plane, "gang", "-o", "json").stdout)
    assert body["job"]["name"] == "gang" and body["findings"][0]["rule"] == "GangDoesNotFit"


def test_a_crash_names_the_exit_code_and_its_last_lines(plane: Plane) -> None:
    out = told(plane, "crash", "ContainerFailed")
    assert "master-0 (pod crash-master-0) failed: exit code 3: ValueError: bad config." in out, out
    assert "crash-master-0 log: loading data" in out


def test_an_oom_names_the_limit_and_the_peak_and_describe_says_the_same(plane: Plane) -> None:
    out = told(plane, "oom", "OOMKilled")
    assert "master-0 (pod oom-master-0) was OOM-killed: peak " in out and "over its memory limit 64Mi" in out, out
    assert "raise resources.limits.memory above " in out
    findings = TrainingClient(config_file=str(plane.kubeconfig)).get_job_findings("oom")
    assert [f["rule"] for f in findings] == ["OOMKilled"] and findings[0]["pods"] == ["oom-master-0"]
    described = plane.yard("describe", "oom").stdout
    why = described.split("Why:")[1].split("Conditions:")[0]
    assert "was OOM-killed: peak" in why and "fix: raise resources.limits.memory" in why, described


def test_a_script_that_never_exits_after_training(plane: Plane) -> None:
    out = told(plane, "linger", "NeverExits", "--grace", "1")
    assert "Training reported 100% done (epoch 2/2)" in out and "master-0 (pod linger-master-0) still runs" in out
    assert "destroy_process_group" in out


def test_a_healthy_job_has_no_finding(plane: Plane) -> None:
    def running() -> str | None:
        result = doctor(plane, "healthy")
        return result.stdout if result.returncode == 0 and "(Running)" in result.stdout else None

    out = eventually(running, timeout=120, interval=1, what="yard doctor healthy to find nothing")
    assert out == "pytorchjob/healthy (Running): no problem found\n"


def test_an_image_no_environment_maps(plane: Plane) -> None:
    # Framework packages live in their own environments (envs/), never in trainyard's.
    assert importlib.util.find_spec("tensorflow") is None, "trainyard's own environment holds tensorflow"
    out = told(plane, "unmapped", "ModuleNotFound")
    assert "image tensorflow/tensorflow:2.15.0 maps to no local environment" in out, out
    assert "yard env create NAME tensorflow --image 'tensorflow/tensorflow:*'" in out
