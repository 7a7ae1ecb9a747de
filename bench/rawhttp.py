"""A minimal HTTP/1.1 client for load generation: one keep-alive connection, one request at a time.

The benchmark's clients share a 2-core machine with the server, so a general-purpose client
(aiohttp's costs about as much CPU per request as the server) would measure mostly itself. This
one only writes a request and reads a ``Content-Length`` or chunked response, like wrk or hey.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from urllib.parse import urlsplit


class HttpError(Exception):
    pass


class Connection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, host: str) -> None:
        self.reader = reader
        self.writer = writer
        self.host = host

    @classmethod
    async def open(cls, url: str) -> Connection:
        parts = urlsplit(url)
        reader, writer = await asyncio.open_connection(parts.hostname, parts.port, limit=1 << 24)
        return cls(reader, writer, parts.netloc)

    def close(self) -> None:
        self.writer.close()

    def send(self, method: str, path: str, body: bytes = b"", content_type: str = "application/json") -> None:
        head = f"{method} {path} HTTP/1.1\r\nHost: {self.host}\r\nAccept: application/json\r\n"
        if body or method in ("POST", "PUT", "PATCH"):
            head += f"Content-Type: {content_type}\r\nContent-Length: {len(body)}\r\n"
        self.writer.write(head.encode() + b"\r\n" + body)

    async def request(
        self, method: str, path: str, body: bytes = b"", content_type: str = "application/json"
    ) -> tuple[int, bytes]:
        self.send(method, path, body, content_type)
        status, headers = await self._head()
        if headers.get("transfer-encoding") == "chunked":
            data = b"".join([chunk async for chunk in self._chunks()])
        else:
            data = await self.reader.readexactly(int(headers.get("content-length", "0")))
        return status, data

    async def stream(self, path: str) -> AsyncIterator[bytes]:
        """GET a chunked stream (a watch) and yield it line by line."""
        self.send("GET", path)
        status, _ = await self._head()
        if status != 200:
            raise HttpError(f"GET {path}: {status}")
        pending = b""
        async for chunk in self._chunks():
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                yield line

    async def _head(self) -> tuple[int, dict[str, str]]:
        raw = await self.reader.readuntil(b"\r\n\r\n")
        status_line, *lines = raw.decode("latin-1").split("\r\n")
        headers = {}
        for line in lines:
            if line:
                key, _, value = line.partition(":")
                headers[key.strip().lower()] = value.strip()
        return int(status_line.split(" ", 2)[1]), headers

    async def _chunks(self) -> AsyncIterator[bytes]:
        while True:
            size = int((await self.reader.readuntil(b"\r\n"))[:-2].split(b";")[0], 16)
            data = await self.reader.readexactly(size + 2)
            if size == 0:
                return
            yield data[:-2]
