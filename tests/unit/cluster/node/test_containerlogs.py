"""The kubelet's log rotation settings as ``yard up`` passes them to the plane: defaults, quantities, refusals."""

from __future__ import annotations

import pytest

from trainyard.cluster.clients.node import containerlogs
from trainyard.cluster.clients.node.containerlogs import FILES_ENV, SIZE_ENV, LogRotation


def test_the_kubelets_defaults_hold_unless_set() -> None:
    assert containerlogs.from_env({}) == LogRotation(10 * 1024 * 1024, 5)
    assert containerlogs.from_env({SIZE_ENV: "", FILES_ENV: ""}) == LogRotation(10 * 1024 * 1024, 5)
    assert containerlogs.from_env({SIZE_ENV: "8Ki", FILES_ENV: "3"}) == LogRotation(8192, 3)
    assert containerlogs.from_env({SIZE_ENV: "1M"}) == LogRotation(1_000_000, 5)


@pytest.mark.parametrize(
    ("environ", "message"),
    [
        (
            {FILES_ENV: "1"},
            "containerLogMaxFiles (yard up --container-log-max-files, $TRAINYARD_CONTAINER_LOG_MAX_FILES) "
            "must be greater than 1, not 1",
        ),
        (
            {FILES_ENV: "many"},
            "containerLogMaxFiles (yard up --container-log-max-files, "
            "$TRAINYARD_CONTAINER_LOG_MAX_FILES) must be a whole number, not 'many'",
        ),
        (
            {SIZE_ENV: "10Zi"},
            "containerLogMaxSize (yard up --container-log-max-size, $TRAINYARD_CONTAINER_LOG_MAX_SIZE) "
            "must be a quantity of bytes (e.g. 10Mi), not '10Zi'",
        ),
        ({SIZE_ENV: "0"}, "must be a positive number of bytes (e.g. 10Mi), not 0"),
    ],
)
def test_a_setting_that_cannot_be_is_refused_by_name(environ: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError) as refused:
        containerlogs.from_env(environ)
    assert message in str(refused.value)
