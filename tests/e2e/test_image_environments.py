"""A container's image picks a local Python environment (``yard env``), driven with kubectl like any pod."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from conftest import REPO, Kubectl, Plane, eventually
from framework_envs import register

pytestmark = pytest.mark.e2e

SAY_PREFIX = "import os, sys; print(sys.prefix, os.environ.get('VIRTUAL_ENV', '-'), flush=True)"


def pod(name: str, image: str, code: str = SAY_PREFIX) -> str:
    spec = {
        "restartPolicy": "Never",
        "containers": [{"name": "main", "image": image, "command": ["python", "-c", code]}],
    }
    return json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec})


READY = "jsonpath={.status.conditions[?(@.type=='Ready')].status}"


def init_and_probe(name: str, image: str, env: Path) -> str:
    """Its init container says its prefix; its main container is ready only if its exec probe runs in ``env``."""
    in_env = f"import sys; sys.exit(sys.prefix != {str(env)!r})"
    probe = {"exec": {"command": ["python", "-c", in_env]}, "periodSeconds": 1}
    spec = {
        "initContainers": [{"name": "init", "image": image, "command": ["python", "-c", SAY_PREFIX]}],
        "containers": [
            {
                "name": "main",
                "image": image,
                "command": ["python", "-c", "import time; time.sleep(120)"],
                "readinessProbe": probe,
            }
        ],
    }
    return json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec})


def succeeded(kubectl: Kubectl, name: str) -> None:
    eventually(lambda: kubectl("get", "pod", name, "-o", "jsonpath={.status.phase}") == "Succeeded", what=name)


def events(kubectl: Kubectl, name: str, reason: str) -> list[str]:
    found = kubectl.json(
        "get", "events", "--field-selector", f"involvedObject.name={name},reason={reason}", "-o", "json"
    )
    return [e["message"] for e in found["items"]]


def test_an_image_runs_in_the_environment_it_maps_to(plane: Plane, kubectl: Kubectl, tmp_path: Path) -> None:
    env = tmp_path / "probe-env"
    # A venv with nothing but pip: `yard env create` makes and records it (pip's own progress is shown).
    plane.yard("env", "create", "probe", "--path", str(env), "--image", "example.test/env-probe:*")
    listed = plane.yard("env", "list").stdout
    assert "probe" in listed and "example.test/env-probe:*" in listed and "yes" in listed, listed

    kubectl("apply", "-f", "-", input=pod("env-mapped", "example.test/env-probe:v1"))
    kubectl("apply", "-f", "-", input=pod("env-unmapped", "example.test/other:v1"))
    kubectl("apply", "-f", "-", input=init_and_probe("env-probed", "example.test/env-probe:v2", env))
    for name in ("env-mapped", "env-unmapped"):
        succeeded(kubectl, name)
    assert kubectl("logs", "env-mapped").split() == [str(env), str(env)]
    # No entry maps the other image: it runs in trainyard's own environment, as every image did before.
    assert kubectl("logs", "env-unmapped").split() == [sys.prefix, "-"]

    pulled = eventually(lambda: events(kubectl, "env-mapped", "Pulled"), what="Pulled event")
    assert pulled == [
        f'Container image "example.test/env-probe:v1" runs in local environment "probe" ({env}): '
        'environments.yaml maps "example.test/env-probe:*"'
    ], pulled
    # The init container ran in the environment too, and the exec probe passes only inside it.
    eventually(lambda: kubectl("get", "pod", "env-probed", "-o", READY) == "True", what="ready by its exec probe")
    assert kubectl("logs", "env-probed", "-c", "init").split() == [str(env), str(env)]
    kubectl("delete", "pod", "env-probed", "--grace-period=0")
    own = eventually(lambda: events(kubectl, "env-unmapped", "Pulled"), what="Pulled event")
    assert own == [
        f'Container image "example.test/other:v1" runs in trainyard\'s own environment ({sys.prefix}): '
        f"no environment in {plane.home / 'environments.yaml'} maps it"
    ], own


def test_an_image_mapped_to_a_missing_environment_never_runs_elsewhere(
    plane: Plane, kubectl: Kubectl, tmp_path: Path
) -> None:
    env = tmp_path / "gone-env"
    plane.yard("env", "create", "gone", "--path", str(env), "--image", "example.test/env-gone:*")
    (env / "bin" / "python").unlink()
    kubectl("apply", "-f", "-", input=pod("env-gone", "example.test/env-gone:v1"))

    def waiting() -> dict[str, str] | None:
        statuses = kubectl.json("get", "pod", "env-gone", "-o", "json")["status"].get("containerStatuses") or []
        return (statuses[0].get("state") or {}).get("waiting") if statuses else None

    state = eventually(
        lambda: (w := waiting()) and w.get("reason") == "CreateContainerConfigError" and w, what="config error"
    )
    assert state["message"].startswith(
        f'image "example.test/env-gone:v1" maps to local environment "gone" ({plane.home / "environments.yaml"}: '
        'entry "gone", image glob "example.test/env-gone:*"), but '
    ), state
    assert "`yard env remove gone`" in state["message"], state
    plane.yard("env", "remove", "gone")
    # Unmapped, the image runs in trainyard's own environment: the kubelet-like retry picks that up.
    succeeded(kubectl, "env-gone")


def test_a_project_environment_registered_for_a_test_plane_runs_the_examples_image(
    plane: Plane, kubectl: Kubectl
) -> None:
    # What every kind's real-training test does first (tests/framework_envs.py, `make framework-envs`).
    register(plane, "xgboost")
    code = "import sys, xgboost; print(sys.prefix, xgboost.__version__)"
    kubectl("apply", "-f", "-", input=pod("env-xgboost", "ghcr.io/trainyard/examples-xgboost:latest", code))
    succeeded(kubectl, "env-xgboost")
    assert kubectl("logs", "env-xgboost").split() == [str(REPO / ".venv" / "envs" / "xgboost"), "3.2.0"]
