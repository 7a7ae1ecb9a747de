"""Image → local environment: how image references are spelled and matched, and the file's round trip."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainyard.cluster import environments
from trainyard.cluster.environments import Environment, Environments, EnvironmentsError, spellings


def venv(tmp_path: Path, name: str) -> Path:
    (tmp_path / name / "bin").mkdir(parents=True)
    (tmp_path / name / "bin" / "python").touch()
    return tmp_path / name


@pytest.mark.parametrize(
    ("image", "also"),
    [
        ("python", {"python:latest", "docker.io/library/python:latest", "docker.io/library/python"}),
        ("tensorflow/tensorflow:2.21.0", {"docker.io/tensorflow/tensorflow:2.21.0"}),
        ("docker.io/library/python:3.11", {"python:3.11"}),
        ("ghcr.io/trainyard/examples-jax", {"ghcr.io/trainyard/examples-jax:latest"}),
        ("localhost:5000/team/img:v1", {"localhost:5000/team/img:v1"}),
        ("busybox@sha256:abc", {"docker.io/library/busybox@sha256:abc"}),
        ("img:1.0@sha256:abc", {"img@sha256:abc", "docker.io/library/img:1.0", "img:1.0@sha256:abc"}),
    ],
)
def test_an_image_goes_by_its_runtime_spellings(image: str, also: set[str]) -> None:
    assert also <= spellings(image)


def test_a_registry_with_a_port_is_not_a_tag() -> None:
    assert not any(s.startswith("docker.io/") for s in spellings("localhost:5000/img"))
    assert "localhost:5000/img:latest" in spellings("localhost:5000/img")


def test_first_matching_entry_wins_and_unmatched_images_get_none(tmp_path: Path) -> None:
    file = tmp_path / "environments.yaml"
    environments.record(file, Environment("tf", venv(tmp_path, "tf"), ("tensorflow/tensorflow:*", "kubeflow/tf-*")))
    environments.record(file, Environment("any", venv(tmp_path, "any"), ("*",)))
    envs = Environments(file)
    match = envs.resolve("docker.io/tensorflow/tensorflow:2.9.1")
    assert match is not None and (match.environment.name, match.glob) == ("tf", "tensorflow/tensorflow:*")
    # a tagless image is :latest, as a container runtime reads it
    assert envs.resolve("tensorflow/tensorflow").environment.name == "tf"  # type: ignore[union-attr]
    assert envs.resolve("kubeflow/tf-mnist-with-summaries:latest").environment.name == "tf"  # type: ignore[union-attr]
    assert envs.resolve("python:3.11").environment.name == "any"  # type: ignore[union-attr]
    environments.forget(file, "any")
    assert envs.resolve("python:3.11") is None


def test_record_replaces_in_place_and_forget_reports_what_it_removed(tmp_path: Path) -> None:
    file = tmp_path / "environments.yaml"
    a, b = venv(tmp_path, "a"), venv(tmp_path, "b")
    environments.record(file, Environment("a", a, ("x:*",)))
    environments.record(file, Environment("b", b, ("y:*",)))
    environments.record(file, Environment("a", a, ("z:*",)))
    assert [(e.name, e.images) for e in environments.load(file)] == [("a", ("z:*",)), ("b", ("y:*",))]
    assert environments.forget(file, "nope") is None
    gone = environments.forget(file, "a")
    assert gone is not None and gone.path == a
    assert [e.name for e in environments.load(file)] == ["b"]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".environments.")], "no temporary file left"


def test_a_missing_environment_is_reported_as_such(tmp_path: Path) -> None:
    assert not Environment("x", tmp_path / "nowhere").exists
    assert Environment("y", venv(tmp_path, "y")).exists


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ("environments: {}", "no list `environments:`"),
        ("environments:\n- name: a\n", "needs a string `name` and `path`"),
        ("environments:\n- {name: a, path: /x, images: x}\n", "environments[0].images must be a list"),
        ("environments: [", "cannot be read"),
    ],
)
def test_a_broken_file_says_what_is_wrong(tmp_path: Path, body: str, words: str) -> None:
    file = tmp_path / "environments.yaml"
    file.write_text(body)
    with pytest.raises(EnvironmentsError, match=words.replace("[", r"\[").replace("]", r"\]")):
        Environments(file).resolve("python")


def test_the_file_is_reread_when_it_changes(tmp_path: Path) -> None:
    file = tmp_path / "environments.yaml"
    envs = Environments(file)
    assert envs.resolve("python") is None
    environments.record(file, Environment("py", venv(tmp_path, "py"), ("python:*",)))
    assert envs.resolve("python") is not None


def test_a_tagged_image_is_not_latest_and_a_digest_is_not_a_tag() -> None:
    assert "python:latest" not in spellings("python:3.11")
    assert not any(s.endswith(":latest") for s in spellings("busybox@sha256:abc"))


def test_the_project_globs_match_the_upstream_example_images(tmp_path: Path) -> None:
    file = tmp_path / "environments.yaml"
    repo = Path(__file__).resolve().parents[3]
    for name in ("tensorflow", "xgboost", "jax", "paddle"):
        line = next(x for x in (repo / "envs" / f"{name}.txt").read_text().splitlines() if x.startswith("# images:"))
        environments.record(file, Environment(name, venv(tmp_path, name), tuple(line.split()[2:])))
    envs = Environments(file)
    for image, name in [
        ("ghcr.io/trainyard/examples-tensorflow:latest", "tensorflow"),
        ("docker.io/tensorflow/tensorflow:2.21.0", "tensorflow"),
        ("tensorflow/tensorflow", "tensorflow"),
        ("docker.io/kubeflowkatib/tf-mnist-with-summaries:latest", "tensorflow"),
        ("docker.io/kubeflow/xgboost-dist-iris:latest", "xgboost"),
        ("docker.io/kubeflow/jaxjob-simple:latest", "jax"),
        ("registry.baidubce.com/paddlepaddle/paddle:2.4.0rc0-cpu", "paddle"),
        ("docker.io/paddlepaddle/paddle:3.0.0", "paddle"),
    ]:
        match = envs.resolve(image)
        assert match is not None and match.environment.name == name, image
    assert envs.resolve("docker.io/kubeflow/pytorch-mnist:latest") is None


def test_a_relative_path_is_relative_to_the_file(tmp_path: Path) -> None:
    file = tmp_path / "environments.yaml"
    file.write_text("environments:\n- {name: a, path: envs/a, images: ['a:*']}\n")
    assert environments.load(file)[0].path == tmp_path / "envs" / "a"
