"""A container's environment on the local node follows its image: the mapped venv, else trainyard's own."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from trainyard.cluster import environments
from trainyard.cluster.clients.node.capacity import Capacity
from trainyard.cluster.clients.node.containerconfig import ContainerConfig
from trainyard.cluster.clients.node.runs import PodRun
from trainyard.cluster.environments import Environment, EnvironmentsError
from trainyard.cluster.paths import Layout


def venv(tmp_path: Path, name: str) -> Path:
    (tmp_path / name / "bin").mkdir(parents=True)
    (tmp_path / name / "bin" / "python").touch()
    return tmp_path / name


def config(home: Path) -> ContainerConfig:
    return ContainerConfig(
        Layout(home),
        home,
        node_name="n",
        address="127.0.0.1",
        capacity=Capacity(cpu=2000, memory=2**30, gpus=0),
        running=list,
    )


def pod_and_container(image: str) -> tuple[PodRun, dict[str, Any], dict[str, Any]]:
    container = {"name": "main", "image": image, "command": ["python", "-c", "pass"]}
    pod = {"metadata": {"name": "p", "namespace": "default", "uid": "u"}, "spec": {"containers": [container]}}
    return PodRun("default", "p", "u"), pod, container


@pytest.fixture
def home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    environments.record(
        Layout(home).environments_file,
        Environment("tensorflow", venv(tmp_path, "tf"), ("ghcr.io/trainyard/examples-tensorflow:*", "tensorflow/*")),
    )
    return home


def test_a_mapped_image_runs_with_its_environment_first_on_path(home: Path, tmp_path: Path) -> None:
    run, pod, container = pod_and_container("docker.io/tensorflow/tensorflow")
    env, pulled, _ = config(home).start(run, pod, container)
    assert env["PATH"].split(":")[0] == str(tmp_path / "tf" / "bin")
    assert env["VIRTUAL_ENV"] == str(tmp_path / "tf")
    assert pulled == (
        'Container image "docker.io/tensorflow/tensorflow" runs in local environment "tensorflow" '
        f'({tmp_path / "tf"}): environments.yaml maps "tensorflow/*"'
    )


def test_an_unmapped_image_runs_in_trainyards_own_environment(home: Path) -> None:
    run, pod, container = pod_and_container("busybox:1.36")
    env, pulled, _ = config(home).start(run, pod, container)
    assert env["PATH"].split(":")[0] == str(Path(sys.executable).parent)
    assert "VIRTUAL_ENV" not in env
    assert pulled == (
        f'Container image "busybox:1.36" runs in trainyard\'s own environment ({sys.prefix}): '
        f"no environment in {home / 'environments.yaml'} maps it"
    )


def test_without_a_mapping_file_every_image_is_trainyards_own(tmp_path: Path) -> None:
    run, pod, container = pod_and_container("ghcr.io/trainyard/examples-tensorflow:latest")
    env, _, _ = config(tmp_path).start(run, pod, container)
    assert "VIRTUAL_ENV" not in env and config(tmp_path).config_error(run, pod, container) is None


def test_a_mapping_to_a_missing_environment_is_a_config_error_never_a_fallback(home: Path, tmp_path: Path) -> None:
    (tmp_path / "tf" / "bin" / "python").unlink()
    run, pod, container = pod_and_container("ghcr.io/trainyard/examples-tensorflow:latest")
    problem = config(home).config_error(run, pod, container)
    assert problem == (
        'image "ghcr.io/trainyard/examples-tensorflow:latest" maps to local environment "tensorflow" '
        f'({home / "environments.yaml"}: entry "tensorflow", image glob "ghcr.io/trainyard/examples-tensorflow:*"), '
        f"but {tmp_path / 'tf' / 'bin' / 'python'} does not exist; create it (`yard env create tensorflow --path "
        f"{tmp_path / 'tf'} -r REQUIREMENTS`, or `make envs` for the project's) or remove the entry "
        "(`yard env remove tensorflow`)"
    )
    with pytest.raises(EnvironmentsError):
        config(home).start(run, pod, container)
    # An exec probe of a run adopted from an earlier agent reports it as a probe error.
    with pytest.raises(OSError, match="does not exist"):
        config(home).exec_environment(run, pod, container)


def test_a_broken_mapping_file_stops_containers_with_what_to_fix(home: Path) -> None:
    (home / "environments.yaml").write_text("environments: [")
    run, pod, container = pod_and_container("python:3.11")
    problem = config(home).config_error(run, pod, container)
    assert problem is not None and problem.startswith(f"{home / 'environments.yaml'} cannot be read")


def test_a_new_entry_applies_to_the_next_start_without_a_restart(home: Path, tmp_path: Path) -> None:
    node = config(home)
    run, pod, container = pod_and_container("example.test/other:v1")
    assert "VIRTUAL_ENV" not in node.start(run, pod, container)[0]
    environments.record(home / "environments.yaml", Environment("other", venv(tmp_path, "o"), ("example.test/*",)))
    assert node.start(run, pod, container)[0]["VIRTUAL_ENV"] == str(tmp_path / "o")
