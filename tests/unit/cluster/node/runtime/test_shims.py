"""Container shims with real processes and no control plane: logs, exit statuses, memory limits, adoption.

Each test drives ``ShimRuntime`` (which starts the real fork server) the way the node agent does;
"restarting the agent" is a second runtime adopting a run from its state file alone.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

from trainyard.cluster.clients.node.runtime import shim, shims

T = TypeVar("T")


def spec(tmp: Path, argv: list[str], name: str = "c", **extra: Any) -> dict[str, Any]:
    return {
        "container": name,
        "argv": argv,
        "env": {"PATH": os.environ["PATH"]},
        "cwd": str(tmp),
        "log": str(tmp / f"{name}.log"),
        "state": str(tmp / f"{name}.json"),
        "restartCount": 0,
        **extra,
    }


def run(body: Callable[[shims.ShimRuntime], Awaitable[T]]) -> T:
    async def main() -> T:
        runtime = shims.ShimRuntime()
        try:
            return await asyncio.wait_for(body(runtime), timeout=60)
        finally:
            await runtime.close()

    return asyncio.run(main())


def records(path: Path) -> list[tuple[str, str, str]]:
    out = []
    for line in path.read_text().splitlines():
        _, stream, tag, *text = line.split(" ", 3)
        out.append((stream, tag, text[0] if text else ""))
    return out


def test_output_becomes_cri_records_and_the_exit_code_is_recorded(tmp_path: Path) -> None:
    script = "echo out; echo err >&2; printf 'no newline'; exit 3"
    ended = run(lambda rt: _start_and_wait(rt, spec(tmp_path, ["sh", "-c", script])))
    assert (ended.exit_code, ended.reason, ended.signal) == (3, "Error", None)
    assert sorted(records(tmp_path / "c.log")) == [
        ("stderr", "F", "err"),
        ("stdout", "F", "out"),
        ("stdout", "P", "no newline"),
    ]
    assert shim.read_state(tmp_path / "c.json")["exit"]["exitCode"] == 3  # type: ignore[index]


async def _start_and_wait(runtime: shims.ShimRuntime, body: dict[str, Any]) -> shims.Exit:
    handle = await runtime.start(body)
    return await handle.wait()


def test_long_lines_are_split_into_partial_records(tmp_path: Path) -> None:
    size = shim.MAX_LOG_LINE * 2 + 10
    script = f"import sys; sys.stdout.write('x' * {size} + '\\n')"
    run(lambda rt: _start_and_wait(rt, spec(tmp_path, [sys.executable, "-c", script])))
    got = records(tmp_path / "c.log")
    assert [tag for _, tag, _ in got] == ["P", "P", "F"]
    assert "".join(text for _, _, text in got) == "x" * size


def test_the_pods_working_directory_is_made_by_the_container_owner_only(tmp_path: Path) -> None:
    work = tmp_path / "pod" / "work"
    old = os.umask(0o077)  # the plane's
    try:
        body = spec(tmp_path, ["sh", "-c", "pwd; touch made-here"], cwd=str(work), workDir=str(work))
        ended = run(lambda rt: _start_and_wait(rt, body))
    finally:
        os.umask(old)
    assert ended.exit_code == 0
    assert records(tmp_path / "c.log") == [("stdout", "F", str(work))]
    assert (work / "made-here").is_file()
    assert (work.stat().st_mode & 0o777, work.parent.stat().st_mode & 0o777) == (0o700, 0o700)


def test_a_command_that_cannot_start_is_a_start_error(tmp_path: Path) -> None:
    async def body(runtime: shims.ShimRuntime) -> shims.Handle:
        return await runtime.start(spec(tmp_path, ["no-such-command-here"]))

    handle = run(body)
    assert handle.exit is not None
    assert (handle.exit.exit_code, handle.exit.reason) == (shim.START_ERROR_CODE, "StartError")
    assert handle.exit.message == "no-such-command-here: No such file or directory"


def test_a_signal_reaches_the_whole_group_and_is_reported_as_128_plus_signal(tmp_path: Path) -> None:
    # The shell's child (sleep) is in the same group: it must be gone too once the run has ended.
    async def body(runtime: shims.ShimRuntime) -> tuple[shims.Exit, int]:
        handle = await runtime.start(spec(tmp_path, ["sh", "-c", "sleep 300 & echo $!; wait"]))
        child = await _eventually(lambda: _first_line(tmp_path / "c.log"))
        handle.signal(signal.SIGTERM)
        return await handle.wait(), int(child)

    ended, child = run(body)
    assert (ended.exit_code, ended.signal) == (143, signal.SIGTERM)
    assert not shim.alive(child, None)


def test_memory_over_the_limit_is_oom_killed(tmp_path: Path) -> None:
    script = "import time\nkeep = [b'x' * (16 << 20) for _ in range(16)]\nprint('survived', flush=True)\ntime.sleep(30)"
    limit = 64 << 20
    ended = run(lambda rt: _start_and_wait(rt, spec(tmp_path, [sys.executable, "-c", script], memoryLimit=limit)))
    assert (ended.exit_code, ended.reason, ended.signal) == (137, "OOMKilled", signal.SIGKILL)
    assert ended.oom is not None and ended.oom["limit"] == limit and ended.oom["used"] > limit
    assert "survived" not in (tmp_path / "c.log").read_text()


def test_a_second_runtime_adopts_a_running_container(tmp_path: Path) -> None:
    go = tmp_path / "go"
    script = f"while [ ! -e {go} ]; do sleep 0.05; done; echo bye; exit 7"

    async def first(runtime: shims.ShimRuntime) -> int:
        handle = await runtime.start(spec(tmp_path, ["sh", "-c", script]))
        return handle.pid

    pid = run(first)
    # The first runtime (and its fork server) are gone; the container is not.
    assert shim.alive(pid, None)

    async def second(runtime: shims.ShimRuntime) -> shims.Exit:
        handle = runtime.adopt(tmp_path / "c.json")
        assert handle is not None and handle.exit is None and handle.pid == pid
        go.touch()
        return await handle.wait()

    ended = run(second)
    assert (ended.exit_code, ended.reason) == (7, "Error")
    assert records(tmp_path / "c.log") == [("stdout", "F", "bye")]


def test_a_run_whose_shim_vanished_is_lost_and_its_processes_killed(tmp_path: Path) -> None:
    async def body(runtime: shims.ShimRuntime) -> tuple[shims.Exit, int]:
        handle = await runtime.start(spec(tmp_path, ["sleep", "300"]))
        os.kill(handle.state["shimPid"], signal.SIGKILL)
        adopted = runtime.adopt(tmp_path / "c.json")
        assert adopted is not None
        return await adopted.wait(), handle.pid

    ended, pid = run(body)
    assert (ended.exit_code, ended.reason) == (137, shims.LOST_REASON)
    assert ended.message == shims.LOST_MESSAGE
    assert not shim.alive(pid, None)


def test_stop_all_stops_containers_from_their_state_files(tmp_path: Path) -> None:
    pod = tmp_path / "ns_pod_uid" / "state"
    pod.mkdir(parents=True)

    async def body(runtime: shims.ShimRuntime) -> int:
        handle = await runtime.start(spec(tmp_path, ["sleep", "300"], state=str(pod / "c.json")))
        return handle.pid

    pid = run(body)
    assert shim.alive(pid, None)
    assert shims.stop_all(tmp_path, grace=5) == 1
    assert not shim.alive(pid, None)
    assert shim.read_state(pod / "c.json")["exit"]["exitCode"] == 143  # type: ignore[index]


def _first_line(path: Path) -> str | None:
    found = records(path) if path.exists() else []
    return found[0][2] if found else None


async def _eventually(probe: Callable[[], T | None], timeout: float = 30) -> T:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if (value := probe()) is not None:
            return value
        await asyncio.sleep(0.05)
    raise AssertionError("timed out")
