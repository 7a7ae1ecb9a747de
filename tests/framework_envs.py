"""The project's framework environments (``make framework-envs``: ``.venv/envs/<name>``) for a test plane.

``register(plane, "tensorflow")`` records ``<repo>/.venv/envs/tensorflow`` in the plane's
``environments.yaml`` with the images its requirements file names (``# images:``), as
``make envs`` does for a user's home, so the examples' images run in the real framework.
"""

from __future__ import annotations

from pathlib import Path

from conftest import REPO, Plane
from trainyard.cluster import environments
from trainyard.cluster.environments import Environment
from trainyard.cluster.paths import Layout

ENVS = REPO / ".venv" / "envs"


def images(name: str) -> tuple[str, ...]:
    for line in (REPO / "envs" / f"{name}.txt").read_text().splitlines():
        if line.startswith("# images:"):
            return tuple(line.removeprefix("# images:").split())
    raise AssertionError(f"envs/{name}.txt has no '# images:' line")


def path(name: str) -> Path:
    env = ENVS / name
    stamp = env / ".installed-stamp"
    # Never a skip: a kind's real run is what its test is for.
    assert stamp.exists(), f"the {name} environment is not built ({stamp} is missing): run `make framework-envs`"
    return env


def register(plane: Plane, *names: str) -> None:
    for name in names:
        environments.record(Layout(plane.home).environments_file, Environment(name, path(name), images(name)))
