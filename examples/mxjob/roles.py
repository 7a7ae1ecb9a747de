"""What an MXJob's pods are told, shown without MXNet (retired; no wheel for Python 3.11).

A ps-lite job (MXNet's parameter server) starts from DMLC_ROLE and the scheduler's address,
DMLC_PS_ROOT_URI:DMLC_PS_ROOT_PORT. Here the Scheduler listens there, every Server and Worker
checks in with its role and index (from MX_CONFIG), and the Scheduler answers each with the
whole roster once all DMLC_NUM_SERVER + DMLC_NUM_WORKER have arrived: the wiring a real
MXNet job would use, proven end to end.
"""

from __future__ import annotations

import json
import os
import socket
import time


def scheduler(port: int, expected: int) -> None:
    with socket.create_server(("0.0.0.0", port)) as server:
        print(f"scheduler listening on port {port} for {expected} nodes", flush=True)
        peers: list[tuple[socket.socket, str]] = []
        while len(peers) < expected:
            conn, _ = server.accept()
            peers.append((conn, conn.makefile().readline().strip()))
            print(f"checked in: {peers[-1][1]}", flush=True)
        roster = ", ".join(sorted(name for _, name in peers))
        for conn, _ in peers:
            conn.sendall(f"{roster}\n".encode())
            conn.close()
    print(f"scheduler: all {expected} nodes checked in: {roster}", flush=True)


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
    task = json.loads(os.environ["MX_CONFIG"])["task"]
    role, me = os.environ["DMLC_ROLE"], f"{task['type']}-{task['index']}"
    uri, port = os.environ["DMLC_PS_ROOT_URI"], int(os.environ["DMLC_PS_ROOT_PORT"])
    print(f"{me}: DMLC_ROLE={role} scheduler={uri}:{port}", flush=True)
    if role == "scheduler":
        scheduler(port, int(os.environ["DMLC_NUM_SERVER"]) + int(os.environ["DMLC_NUM_WORKER"]))
    else:
        node(uri, port, me)


if __name__ == "__main__":
    main()
