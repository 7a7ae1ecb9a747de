"""``sdk.logs.follow`` against a scripted API client (the races here depend on timing a real plane
cannot be made to repeat): a stand-in for lightkube's ``Client.log`` and ``Client.get``."""

from __future__ import annotations

from typing import Any

from lightkube.core.exceptions import ApiError
from lightkube.models.meta_v1 import Status
from lightkube.resources.core_v1 import Pod

from trainyard.sdk.logs import follow, when

POD = {
    "metadata": {"name": "job-worker-1", "namespace": "ns", "uid": "u1", "labels": {}},
    "spec": {"containers": [{"name": "main"}]},
}


class ScriptedClient:
    """Answers ``log`` from a script (an exception to raise, or lines) and ``get`` with a phase."""

    def __init__(self, logs: list[Exception | list[str]], phase: str) -> None:
        self.logs = logs
        self.phase = phase
        self.log_calls = 0

    def log(self, name: str, **_: Any) -> list[str]:
        answer = self.logs[min(self.log_calls, len(self.logs) - 1)]
        self.log_calls += 1
        if isinstance(answer, Exception):
            raise answer
        return answer

    def get(self, res: Any, name: str, **_: Any) -> Pod:
        return Pod.from_dict({**POD, "status": {"phase": self.phase}})


def waiting() -> ApiError:
    message = 'container "main" in pod "job-worker-1" is waiting to start: ContainerCreating'
    return ApiError(status=Status(code=400, reason="BadRequest", message=message))


def test_a_pod_that_ends_while_its_container_was_starting_still_shows_its_log() -> None:
    # The first read comes while the container starts; by the next look the pod has Succeeded.
    client = ScriptedClient(
        [waiting(), ["2026-11-26T10:00:00.000000001Z hello", "2026-11-26T10:00:00.2Z done"]], "Succeeded"
    )
    lines = list(follow(client, lambda: [POD], lambda: True, poll=0.01))  # type: ignore[arg-type]
    assert [(line.replica, line.text) for line in lines] == [("job-worker-1", "hello"), ("job-worker-1", "done")]
    assert client.log_calls == 2


def test_lines_already_shown_are_not_shown_again_by_the_last_read() -> None:
    first = ["2026-11-26T10:00:00.1Z one", "2026-11-26T10:00:00.2Z two"]
    client = ScriptedClient([first, [*first, "2026-11-26T10:00:00.3Z three"]], "Succeeded")
    lines = list(follow(client, lambda: [POD], lambda: True, poll=0.01))  # type: ignore[arg-type]
    assert [line.text for line in lines] == ["one", "two", "three"]


def test_stamps_compare_in_time_order_whatever_their_width() -> None:
    # RFC3339Nano drops trailing zeros: .1 is after .09, and a whole second is before any fraction of the next.
    stamps = ["2026-11-26T10:00:05.1Z", "2026-11-26T10:00:05.09Z", "2026-11-26T10:00:05Z", "2026-11-26T10:00:04.999Z"]
    assert sorted(stamps, key=when) == [stamps[3], stamps[2], stamps[1], stamps[0]]


def test_a_line_read_again_after_a_shorter_stamp_is_not_shown_twice() -> None:
    first = ["2026-11-26T10:00:00.1Z one", "2026-11-26T10:00:00.12Z two"]
    client = ScriptedClient([first, first], "Succeeded")
    lines = list(follow(client, lambda: [POD], lambda: True, poll=0.01))  # type: ignore[arg-type]
    assert [line.text for line in lines] == ["one", "two"]
