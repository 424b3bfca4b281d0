"""A TCP proxy on 127.0.0.1 in front of the test server, to cut the connection under a running agent.

It stands for the network, not for Neo4j: the driver speaks Bolt to the real
server through it. ``cut()`` closes the listening socket and every open
connection, so the next query finds the server gone (refused or reset), as in
an outage. ``pause()`` holds every byte in both directions until ``resume()``:
to the driver the server is stalled (a hung JVM, a frozen VM, a network that
drops packets), its connections open and silent.

Example:
    >>> proxy = await TcpProxy.start("127.0.0.1", 7687)  # doctest: +SKIP
    >>> driver = neo4j.AsyncGraphDatabase.driver(proxy.uri, auth=auth)  # doctest: +SKIP
    >>> await proxy.cut()  # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlsplit

import neo4j

from symfonic_graph import GraphMemoryStore


class TcpProxy:
    """Forwards every connection to ``(host, port)`` until :meth:`cut`."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._flowing = asyncio.Event()
        self._flowing.set()

    @classmethod
    async def start(cls, host: str, port: int) -> TcpProxy:
        proxy = cls(host, port)
        proxy._server = await asyncio.start_server(proxy._serve, "127.0.0.1", 0)
        return proxy

    @classmethod
    async def in_front_of(cls, uri: str) -> TcpProxy:
        """A proxy in front of the server a ``bolt://``/``neo4j://`` URI names."""
        parts = urlsplit(uri)
        return await cls.start(parts.hostname or "127.0.0.1", parts.port or 7687)

    @property
    def uri(self) -> str:
        """``bolt://127.0.0.1:PORT`` of the proxy (bolt: one server, no routing table)."""
        assert self._server is not None
        return f"bolt://127.0.0.1:{self._server.sockets[0].getsockname()[1]}"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(self.host, self.port)
        except OSError:
            writer.close()
            return
        self._writers.update((writer, up_writer))
        for source, sink in ((reader, up_writer), (up_reader, writer)):
            task = asyncio.get_running_loop().create_task(self._pipe(source, sink))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _pipe(self, source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError, asyncio.CancelledError):
            while data := await source.read(65536):
                await self._flowing.wait()  # paused: held here, delivered on resume
                sink.write(data)
                await sink.drain()
        sink.close()

    def pause(self) -> None:
        """Deliver nothing, either way, until :meth:`resume` (new connections are accepted, and wait too)."""
        self._flowing.clear()

    def resume(self) -> None:
        """Deliver what was held, and everything after it."""
        self._flowing.set()

    async def cut(self) -> None:
        """Stop listening and drop every connection: the server is gone for the driver."""
        if self._server is not None:
            self._server.close()
        for writer in list(self._writers):
            writer.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()


@contextlib.asynccontextmanager
async def proxied_store(settings: Any, *, query_timeout: float) -> AsyncIterator[tuple[GraphMemoryStore, TcpProxy]]:
    """A store whose own driver reaches the test server (``Neo4jSettings``) through a proxy the test can cut.

    On the way out the proxy is cut and the driver closed.
    """
    proxy = await TcpProxy.in_front_of(settings.uri)
    driver = neo4j.AsyncGraphDatabase.driver(proxy.uri, auth=(settings.user, settings.password))
    try:
        yield GraphMemoryStore(driver, database=settings.database, query_timeout=query_timeout), proxy
    finally:
        await proxy.cut()
        await driver.close()
