"""Container shims on a disk that is full (a real tmpfs with its blocks and files all taken): a
container whose files cannot be made fails to start with a message naming the file and the disk,
and a run's exit is still recorded when its state file cannot be replaced.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

from small_disk import fill, fill_inodes, small_disk
from trainyard.cluster.clients.node.runtime import shim, shims

FREE_SPACE = "No space left on device; free space on the disk that holds the plane's home ($TRAINYARD_HOME)"


def spec(tmp: Path, **extra: Any) -> dict[str, Any]:
    return {
        "container": "c",
        "argv": ["true"],
        "env": {"PATH": os.environ["PATH"]},
        "cwd": str(tmp),
        "log": str(tmp / "c.log"),
        "state": str(tmp / "c.json"),
        "restartCount": 0,
        **extra,
    }


def start(body: dict[str, Any]) -> shims.Exit:
    async def main() -> shims.Exit:
        runtime = shims.ShimRuntime()
        try:
            handle = await runtime.start(body)
            return await asyncio.wait_for(handle.wait(), 60)
        finally:
            await runtime.close()

    return asyncio.run(main())


def test_a_container_whose_files_have_no_room_fails_to_start_saying_which_and_why(tmp_path: Path) -> None:
    with small_disk(tmp_path / "disk", "64k", inodes=16) as disk:
        fill(disk)
        fill_inodes(disk)
        work = disk / "pod" / "work"
        ended = start(spec(tmp_path, workDir=str(work)))
        assert ended.reason == "StartError" and ended.exit_code == shim.START_ERROR_CODE
        assert ended.message == f"cannot make the pod's working directory {work}: {FREE_SPACE}"

        log = disk / "logs" / "c.log"
        ended = start(spec(tmp_path, log=str(log)))
        assert ended.reason == "StartError"
        assert ended.message == f"cannot create the container's log or state {log.parent}: {FREE_SPACE}"


def test_an_exit_is_recorded_when_the_state_file_cannot_be_replaced(tmp_path: Path) -> None:
    with small_disk(tmp_path / "disk", "64k") as disk:
        path = disk / "c.json"
        shim.write_state(path, {"key": "k", "pid": 1})
        fill(disk)
        shim.write_state(path, {"key": "k", "pid": 1, "exit": {"exitCode": 0, "reason": "Completed"}})
        assert shim.read_state(path) == {"key": "k", "pid": 1, "exit": {"exitCode": 0, "reason": "Completed"}}
        assert [p.name for p in disk.iterdir() if p.name.startswith(".")] == []  # no temporary file left
