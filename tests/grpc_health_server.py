"""A gRPC health server (``grpc.health.v1.Health/Check``) on plain HTTP/2, for probe tests.

It answers SERVING while the file ``flag`` exists and NOT_SERVING otherwise, NOT_FOUND for a
named service other than ``""`` and ``"trainer"``, and UNIMPLEMENTED for any other method. Run as
``python3 grpc_health_server.py PORT FLAG`` inside a test pod, or serve ``handler(flag)`` in-process.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

import h2.config
import h2.connection
import h2.events

CHECK = "/grpc.health.v1.Health/Check"

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


def handler(flag: str) -> Handler:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False, header_encoding="utf-8"))
        conn.initiate_connection()
        writer.write(conn.data_to_send())
        paths: dict[int, str] = {}
        bodies: dict[int, bytes] = {}
        while data := await reader.read(65535):
            for event in conn.receive_data(data):
                if isinstance(event, h2.events.RequestReceived):
                    paths[event.stream_id] = dict(event.headers)[":path"]
                elif isinstance(event, h2.events.DataReceived):
                    bodies[event.stream_id] = bodies.get(event.stream_id, b"") + event.data
                    conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
                elif isinstance(event, h2.events.StreamEnded):
                    respond(conn, event.stream_id, paths[event.stream_id], bodies.get(event.stream_id, b""), flag)
            writer.write(conn.data_to_send())
            await writer.drain()
        writer.close()

    return handle


def respond(conn: h2.connection.H2Connection, stream: int, path: str, body: bytes, flag: str) -> None:
    head = [(":status", "200"), ("content-type", "application/grpc")]
    service = body[7:].decode()  # 5-byte prefix, then field 1's tag and (short) length
    if path != CHECK:
        conn.send_headers(stream, [*head, ("grpc-status", "12"), ("grpc-message", "unknown method")], end_stream=True)
        return
    if service not in ("", "trainer"):
        conn.send_headers(stream, [*head, ("grpc-status", "5"), ("grpc-message", "unknown service")], end_stream=True)
        return
    status = 1 if Path(flag).exists() else 2
    conn.send_headers(stream, head)
    conn.send_data(stream, b"\x00\x00\x00\x00\x02\x08" + bytes([status]))
    conn.send_headers(stream, [("grpc-status", "0")], end_stream=True)


async def main(port: int, flag: str) -> None:
    server = await asyncio.start_server(handler(flag), "127.0.0.1", port)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]), sys.argv[2]))
