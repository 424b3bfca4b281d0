"""Reliability suite: a private Neo4j for the fault tests, and the collected figures at the end of the run."""

from __future__ import annotations

import os
import signal
import socket
import time
from collections.abc import Iterator

import pytest

from symfonic_graph.server import LocalNeo4j
from tests.reliability._private_server import PrivateNeo4j
from tests.reliability._stats import summary_lines


@pytest.fixture(scope="session")
def private_neo4j(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrivateNeo4j]:
    """One private server per session, shared by the restart and stall tests (a start costs ~15-20 s)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    server = LocalNeo4j(home=tmp_path_factory.mktemp("private") / "neo4j-home")
    started = time.monotonic()
    server.start(port=port)
    try:
        yield PrivateNeo4j(server, port, time.monotonic() - started)
    finally:
        state = server.recorded()
        if state is not None:
            os.kill(state.pid, signal.SIGCONT)  # a stall test that failed mid-freeze
        server.stop()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    lines = summary_lines()
    if lines:
        terminalreporter.section("symfonic-graph reliability figures")
        for line in lines:
            terminalreporter.write_line(line)
