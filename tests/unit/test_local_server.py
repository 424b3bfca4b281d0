"""The local server's checks that need no running Neo4j."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from symfonic_graph.errors import LocalServerError
from symfonic_graph.server import LocalNeo4j
from symfonic_graph.server._local import ServerState


def test_exports_are_eval_ready() -> None:
    state = ServerState(1, "127.0.0.1", 7999, "neo4j", "pw", "5.26.30", "/tmp/x")
    assert state.exports().splitlines() == [
        "export NEO4J_URI=bolt://127.0.0.1:7999",
        "export NEO4J_USER=neo4j",
        "export NEO4J_PASSWORD=pw",
    ]


def test_no_state_means_not_running(tmp_path: Path) -> None:
    server = LocalNeo4j(home=tmp_path / "home", cache=tmp_path / "cache")
    assert server.state() is None
    assert server.stop() is False


def test_a_pid_file_naming_a_foreign_process_is_ignored(tmp_path: Path) -> None:
    server = LocalNeo4j(home=tmp_path, cache=tmp_path / "cache")
    state = ServerState(1, "127.0.0.1", 7999, "neo4j", "pw", "5.26.30", str(tmp_path))  # pid 1 is not ours
    server.state_file.write_text(__import__("json").dumps(state.__dict__))
    assert server.state() is None
    assert server.stop() is False  # never signals a process it did not start


def test_missing_java_names_the_fix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "nojava"))
    with pytest.raises(LocalServerError, match="Java not found: install a JDK 17"):
        LocalNeo4j(home=tmp_path, cache=tmp_path / "cache").start()


def test_missing_maven_names_the_fix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # java still found through JAVA_HOME below
    import shutil

    java = shutil.which("java", path="/usr/bin:/usr/local/bin")
    if java is None:
        pytest.skip("no java on this machine")
    monkeypatch.setenv("JAVA_HOME", str(Path(java).resolve().parent.parent))
    with pytest.raises(LocalServerError, match=r"Maven \(mvn\) is not on PATH"):
        LocalNeo4j(home=tmp_path, cache=tmp_path / "cache").start()


def test_taken_port_names_the_fix(tmp_path: Path) -> None:
    server = LocalNeo4j(home=tmp_path / "home")  # the shared cache: jars already fetched by the session
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        with pytest.raises(LocalServerError, match=f"port {port} on 127.0.0.1 is taken; pass --port"):
            server.start(port=port)
