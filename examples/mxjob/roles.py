"""What an MXJob's pods are told, shown without MXNet (retired; no wheel for Python 3.11).

A ps-lite job (MXNet's parameter server) starts from DMLC_ROLE and the scheduler's address,
DMLC_PS_ROOT_URI:DMLC_PS_ROOT_PORT. Here the Scheduler listens there, every Server and Worker
checks in with its role and index (from MX_CONFIG), and the Scheduler answers each with the
whole roster once every node MX_CONFIG's cluster lists has arrived (DMLC_NUM_SERVER +
DMLC_NUM_WORKER of them), then exits: the wiring a real MXNet job would use, proven end to end.
"""

from __future__ import annotations

import json
import os
import socket
import time


def scheduler(port: int, expected: set[str]) -> None:
    with socket.create_server(("0.0.0.0", port)) as server:
        print(f"scheduler: listening on port {port} for {len(expected)} nodes", flush=True)
        peers: dict[str, socket.socket] = {}
        while set(peers) != expected:
            conn, _ = server.accept()
            name = conn.makefile().readline().strip()
            if name not in expected:
                raise SystemExit(f"scheduler: {name!r} is not in MX_CONFIG's cluster {sorted(expected)}")
            peers[name] = conn
            print(f"scheduler: {name} checked in", flush=True)
        roster = ", ".join(sorted(peers))
        for conn in peers.values():
            conn.sendall(f"{roster}\n".encode())
            conn.close()
    print(f"scheduler: all {len(expected)} nodes checked in: {roster}", flush=True)


def node(uri: str, port: int, me: str) -> None:
    deadline = time.monotonic() + 120
    while True:
        try:
            conn = socket.create_connection((uri, port), timeout=120)
            break
        except OSError:
            # the scheduler may not listen yet: ps-lite retries the same way
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)
    with conn:
        conn.sendall(f"{me}\n".encode())
        print(f"{me}: roster from the scheduler: {conn.makefile().readline().strip()}", flush=True)


def main() -> None:
    config = json.loads(os.environ["MX_CONFIG"])
    cluster, task = config["cluster"], config["task"]
    role, me = os.environ["DMLC_ROLE"], f"{task['type']}-{task['index']}"
    uri, port = os.environ["DMLC_PS_ROOT_URI"], int(os.environ["DMLC_PS_ROOT_PORT"])
    print(f"{me}: DMLC_ROLE={role} scheduler={uri}:{port}", flush=True)
    # MX_CONFIG and the DMLC_* variables must tell the same story.
    assert role == task["type"], (role, task)
    assert (cluster["scheduler"][0]["url"], cluster["scheduler"][0]["port"]) == (uri, port), cluster
    nodes = {f"{rtype}-{i}" for rtype in ("server", "worker") for i in range(len(cluster.get(rtype, [])))}
    assert len(nodes) == int(os.environ["DMLC_NUM_SERVER"]) + int(os.environ["DMLC_NUM_WORKER"]), nodes
    if role == "worker":
        assert os.environ["DMLC_WORKER_ID"] == str(task["index"])
    if role == "scheduler":
        scheduler(port, nodes)
    else:
        node(uri, port, me)


if __name__ == "__main__":
    main()
