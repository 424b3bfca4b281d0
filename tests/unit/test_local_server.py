"""The local server's checks that need no running Neo4j.

Start, stop and status run end to end against a fake ``java`` (a small Python
script): it answers ``-version``, listens on the Bolt port and prints
``READY``, like ``Launcher.java``, in well under a second.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from symfonic_graph.cli import main
from symfonic_graph.errors import LocalServerError
from symfonic_graph.server import LocalNeo4j, _local, checkout_root, default_home
from symfonic_graph.server._local import ServerState
from tests._ports import free_port

FAKE_JAVA = """#!{python}
import os, signal, socket, sys, time
if sys.argv[1:] == ["-version"]:
    sys.stderr.write('openjdk version "17.0.9" 2023-10-17\\n')
    sys.exit(0)
if os.environ.get("FAKE_JAVA_IGNORE_TERM"):
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
i = sys.argv.index("Launcher")
host, port = sys.argv[i + 2], int(sys.argv[i + 3])
sock = socket.socket()
sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
sock.bind((host, port))
sock.listen()
if not os.environ.get("FAKE_JAVA_NEVER_READY"):
    print("READY 5.26-fake", flush=True)
while True:
    time.sleep(1)
"""


def _alive(pid: int) -> bool:
    """Running (not a zombie waiting to be reaped)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return False
    return fields[0] != "Z"


def _spawn(*argv: str) -> subprocess.Popen[bytes]:
    """A sleeping process with ``argv`` on its command line, once it is there (after the exec)."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", *argv])
    deadline = time.monotonic() + 10
    while b"time.sleep(60)" not in Path(f"/proc/{proc.pid}/cmdline").read_bytes():
        assert time.monotonic() < deadline
        time.sleep(0.01)
    return proc


def _wait_dead(pid: int, timeout: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout
    while _alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


@pytest.fixture
def checkout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fake symfonic-graph checkout with a subfolder; SYMFONIC_GRAPH_HOME unset."""
    root = tmp_path / "checkout"
    (root / "tests" / "unit").mkdir(parents=True)
    (root / "pyproject.toml").write_text('[project]\nname = "symfonic-graph"\n')
    monkeypatch.delenv("SYMFONIC_GRAPH_HOME", raising=False)
    monkeypatch.delenv("SYMFONIC_NEO4J_PORT", raising=False)
    return root


@pytest.fixture
def fake_java(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """JAVA_HOME with the fake java; the cache already holds the jars and the compiled Launcher."""
    jdk = tmp_path / "jdk"
    (jdk / "bin").mkdir(parents=True)
    java = jdk / "bin" / "java"
    java.write_text(FAKE_JAVA.format(python=os.path.realpath(sys.executable)))
    java.chmod(0o755)
    monkeypatch.setenv("JAVA_HOME", str(jdk))
    monkeypatch.setenv("SYMFONIC_GRAPH_CACHE", str(tmp_path / "cache"))
    lib, classes = LocalNeo4j(home=tmp_path / "unused").installed_paths()
    lib.mkdir(parents=True)
    (lib / ".complete").write_text("fake")
    classes.mkdir(parents=True)
    (classes / "Launcher.class").write_bytes(b"")
    monkeypatch.setattr(_local, "TERMINATE_GRACE", 1.0)
    return java


@pytest.fixture
def started(checkout: Path, fake_java: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[LocalNeo4j]:
    """A fake server started from the checkout's root; stopped afterwards."""
    monkeypatch.chdir(checkout)
    server = LocalNeo4j()
    server.start(port=free_port(), timeout=20)
    try:
        yield server
    finally:
        LocalNeo4j(home=server.home).stop(timeout=5)


# -- exports and state ------------------------------------------------------------


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
    assert not (tmp_path / "home").exists(), "stop creates nothing"


def test_a_state_file_of_an_older_version_still_reads(tmp_path: Path) -> None:
    server = LocalNeo4j(home=tmp_path, cache=tmp_path / "cache")
    server.state_file.write_text(json.dumps({"pid": os.getpid(), "host": "127.0.0.1", "port": 7999, "user": "neo4j",
                                             "password": "pw", "version": "5.26.30", "home": str(tmp_path)}))
    assert server._read_state() == ServerState(os.getpid(), "127.0.0.1", 7999, "neo4j", "pw", "5.26.30",
                                                str(tmp_path), ready=True)


# -- where the state lives ----------------------------------------------------------


def test_the_home_is_found_from_any_subfolder_of_the_checkout(checkout: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (checkout / "tests" / "pyproject.toml").write_text('[project]\nname = "another-project"\n')  # not ours
    (checkout / "tests" / "unit" / ".symfonic-graph").mkdir()  # a stray one below the root loses too
    for folder in (checkout, checkout / "tests", checkout / "tests" / "unit"):
        monkeypatch.chdir(folder)
        assert checkout_root() == checkout.resolve()
        assert LocalNeo4j().home == checkout.resolve() / ".symfonic-graph"


def test_symfonic_graph_home_overrides_the_checkout(checkout: Path, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(checkout / "tests")
    monkeypatch.setenv("SYMFONIC_GRAPH_HOME", str(tmp_path / "elsewhere"))
    assert LocalNeo4j().home == (tmp_path / "elsewhere").resolve()


def test_outside_a_checkout_the_nearest_existing_home_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SYMFONIC_GRAPH_HOME", raising=False)
    project = tmp_path / "project"
    (project / "a" / "b").mkdir(parents=True)
    assert default_home(project / "a" / "b") == (project / "a" / "b" / ".symfonic-graph").resolve()
    (project / ".symfonic-graph").mkdir()
    assert default_home(project / "a" / "b") == (project / ".symfonic-graph").resolve()


def test_status_and_stop_work_from_a_subfolder(started: LocalNeo4j, checkout: Path, monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    state = started.state()
    assert state is not None
    monkeypatch.chdir(checkout / "tests" / "unit")
    assert main(["server", "status"]) == 0
    assert f"at {state.uri} (pid {state.pid}, data in {started.home})" in capsys.readouterr().out
    assert main(["server", "status", "--uri"]) == 0
    assert capsys.readouterr().out.strip() == state.uri
    assert main(["server", "stop"]) == 0
    assert f"stopped the Neo4j of {started.home}" in capsys.readouterr().out
    assert _wait_dead(state.pid)
    assert main(["server", "status"]) == 1
    assert f"not running (no server recorded in {started.home})" in capsys.readouterr().out


# -- start: the port, and what a failed start leaves --------------------------------


def test_the_port_is_checked_before_java_and_the_maven_fetch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no mvn
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "nojava"))
    for variable in ("SYMFONIC_NEO4J_PORT", "SYMFONIC_TEST_NEO4J_PORT"):  # as a user who exported them has
        monkeypatch.delenv(variable, raising=False)
    server = LocalNeo4j(home=tmp_path / "home", cache=tmp_path / "cache")
    monkeypatch.setattr(server, "_fetch", lambda lib: pytest.fail("fetched before checking the port"))
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        with pytest.raises(LocalServerError, match=f"port {port} on 127.0.0.1 is taken by another process; "
                                                   r"choose a free one, e.g. \d+"):
            server.start(port=port)
        monkeypatch.setenv("SYMFONIC_NEO4J_PORT", str(port))  # how ./dev and `demo` pass the port
        with pytest.raises(LocalServerError, match=f"port {port} on 127.0.0.1 is taken by another process; "
                                                   r"set SYMFONIC_NEO4J_PORT=\d+ and rerun$") as taken:
            server.start()
        monkeypatch.setenv("SYMFONIC_TEST_NEO4J_PORT", str(port))
        with pytest.raises(LocalServerError, match=r"set SYMFONIC_TEST_NEO4J_PORT=\d+ and rerun$"):
            server.start(port_variable="SYMFONIC_TEST_NEO4J_PORT")
    suggested = int(str(taken.value).rsplit("=", 1)[1].split()[0])
    assert suggested not in (port, 7687, 7688)
    assert not (tmp_path / "cache").exists()


def test_the_port_is_checked_again_after_the_fetch(tmp_path: Path, fake_java: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    server = LocalNeo4j(home=tmp_path / "home")
    port = free_port()
    squatter = socket.socket()

    def fetch_while_someone_takes_the_port(java: str) -> str:
        squatter.bind(("127.0.0.1", port))
        squatter.listen()
        return "unused-classpath"

    monkeypatch.setattr(server, "_ensure_installed", fetch_while_someone_takes_the_port)
    monkeypatch.setattr(server, "_launch", lambda *a: pytest.fail("launched on a taken port"))
    with squatter, pytest.raises(LocalServerError, match=f"port {port} on 127.0.0.1 is taken"):
        server.start(port=port)


def test_missing_java_names_the_fix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "nojava"))
    with pytest.raises(LocalServerError, match="Java not found: install a JDK 17"):
        LocalNeo4j(home=tmp_path, cache=tmp_path / "cache").start(port=free_port())


def test_missing_maven_names_the_fix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # java still found through JAVA_HOME below
    java = shutil.which("java", path="/usr/bin:/usr/local/bin")
    if java is None:
        pytest.skip("no java on this machine")
    monkeypatch.setenv("JAVA_HOME", str(Path(java).resolve().parent.parent))
    with pytest.raises(LocalServerError, match=r"Maven \(mvn\) is not on PATH"):
        LocalNeo4j(home=tmp_path, cache=tmp_path / "cache").start(port=free_port())


def test_a_start_on_another_port_than_the_running_one_is_refused(started: LocalNeo4j,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    state = started.state()
    assert state is not None
    other = free_port()
    with pytest.raises(LocalServerError, match=(
        f"already runs on port {state.port} \\(pid {state.pid}\\), not on the requested port {other} "
        f"\\(--port {other}\\); use port {state.port}, or stop it first with `symfonic-graph server stop`")):
        started.start(port=other)
    monkeypatch.setenv("SYMFONIC_NEO4J_PORT", str(other))
    with pytest.raises(LocalServerError, match=f"\\(SYMFONIC_NEO4J_PORT={other}\\)"):
        started.start()
    assert started.start(port=state.port) == state, "the same port: reused"
    monkeypatch.delenv("SYMFONIC_NEO4J_PORT")
    assert started.start() == state, "no port asked for: reused"


def test_the_stop_advice_names_a_home_other_than_the_checkouts(tmp_path: Path, checkout: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(checkout)
    assert LocalNeo4j().stop_command() == "symfonic-graph server stop"
    monkeypatch.setenv("SYMFONIC_GRAPH_HOME", str(checkout / ".symfonic-graph" / "test"))
    assert LocalNeo4j().stop_command() == (
        f"SYMFONIC_GRAPH_HOME={checkout.resolve() / '.symfonic-graph' / 'test'} symfonic-graph server stop")


def test_the_state_file_is_written_atomically_with_mode_0600(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    server = LocalNeo4j(home=tmp_path, cache=tmp_path / "cache")
    server.state_file.write_text("{}")
    before = server.state_file.stat().st_ino
    real_open, real_replace = os.open, os.replace
    created: list[tuple[str, int]] = []
    replaced: list[int] = []

    def spy_open(path: str | os.PathLike[str], flags: int, mode: int = 0o777, **kw: object) -> int:
        if flags & os.O_CREAT:
            created.append((os.fspath(path), mode))
        return real_open(path, flags, mode)

    def spy_replace(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
        replaced.append(stat.S_IMODE(os.stat(src).st_mode))  # the temp file, complete, before it is visible
        real_replace(src, dst)

    monkeypatch.setattr(os, "open", spy_open)
    monkeypatch.setattr(os, "replace", spy_replace)
    old_umask = os.umask(0)  # even with a permissive umask
    try:
        server._write_state(ServerState(123, "127.0.0.1", 7999, "neo4j", "secret", "5.26.30", str(tmp_path)))
    finally:
        os.umask(old_umask)
    assert [mode for _, mode in created] == [0o600], "created 0600, never chmod-ed afterwards"
    assert Path(created[0][0]).parent == tmp_path and created[0][0] != str(server.state_file)
    assert replaced == [0o600]
    assert stat.S_IMODE(server.state_file.stat().st_mode) == 0o600
    assert server.state_file.stat().st_ino != before, "a new file renamed over the old one"
    assert json.loads(server.state_file.read_text())["password"] == "secret"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["server.json"], "no temp file left"


def test_a_real_start_writes_state_and_password_0600(started: LocalNeo4j) -> None:
    for path in (started.state_file, started.home / "password"):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    state = started.state()
    assert state is not None and state.ready and state.version == "5.26-fake"


def test_a_start_that_times_out_leaves_nothing_running(tmp_path: Path, fake_java: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_JAVA_NEVER_READY", "1")
    monkeypatch.setenv("FAKE_JAVA_IGNORE_TERM", "1")  # so the kill after the grace period is needed
    server = LocalNeo4j(home=tmp_path / "home")
    spawned: list[subprocess.Popen[bytes]] = []
    real_popen = subprocess.Popen

    def spy_popen(*args: object, **kwargs: object) -> subprocess.Popen[bytes]:
        proc: subprocess.Popen[bytes] = real_popen(*args, **kwargs)  # type: ignore[call-overload]
        if "Launcher" in list(proc.args):  # type: ignore[arg-type]  # not `java -version`
            spawned.append(proc)
        return proc

    monkeypatch.setattr(subprocess, "Popen", spy_popen)
    with pytest.raises(LocalServerError, match="did not become ready within 1s"):
        server.start(port=free_port(), timeout=1)
    [proc] = spawned
    assert proc.returncode == -signal.SIGKILL, "terminated, waited, then killed"
    assert not server.state_file.exists()


def test_ctrl_c_while_starting_leaves_nothing_running(tmp_path: Path, fake_java: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_JAVA_NEVER_READY", "1")
    server = LocalNeo4j(home=tmp_path / "home")
    seen: list[int] = []
    real_sleep = time.sleep

    def interrupted_sleep(seconds: float) -> None:
        state = server.recorded()
        if state is not None and not seen:  # recorded while starting: a killed `start` leaves it for `stop`
            assert not state.ready
            seen.append(state.pid)
            raise KeyboardInterrupt
        real_sleep(seconds)

    monkeypatch.setattr(time, "sleep", interrupted_sleep)
    with pytest.raises(KeyboardInterrupt):
        server.start(port=free_port(), timeout=20)
    monkeypatch.setattr(time, "sleep", real_sleep)
    assert seen and not _alive(seen[0])
    assert not server.state_file.exists()


def test_stop_ends_a_server_whose_start_was_killed(tmp_path: Path, fake_java: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_JAVA_NEVER_READY", "1")
    server = LocalNeo4j(home=tmp_path / "home")

    def killed(proc: subprocess.Popen[bytes], timeout: float) -> str:
        raise _Killed

    monkeypatch.setattr(server, "_wait_ready", killed)
    monkeypatch.setattr(_local, "_end", lambda proc: None)  # as if `start` died by kill -9: no cleanup ran
    with pytest.raises(_Killed):
        server.start(port=free_port())
    state = server.recorded()
    assert state is not None and not state.ready
    assert server.state() is None, "not handed out to clients"
    assert LocalNeo4j(home=server.home).stop(timeout=5) is True
    assert _wait_dead(state.pid)


@pytest.mark.parametrize("becomes_ready", [True, False])
def test_a_start_after_a_killed_start_waits_for_its_server(tmp_path: Path, fake_java: Path,
                                                          monkeypatch: pytest.MonkeyPatch, becomes_ready: bool) -> None:
    if not becomes_ready:
        monkeypatch.setenv("FAKE_JAVA_NEVER_READY", "1")
    server, port = LocalNeo4j(home=tmp_path / "home"), free_port()

    def killed(proc: subprocess.Popen[bytes], timeout: float) -> str:
        raise _Killed

    with monkeypatch.context() as m:
        m.setattr(server, "_wait_ready", killed)
        m.setattr(_local, "_end", lambda proc: None)
        with pytest.raises(_Killed):
            server.start(port=port)
    left = json.loads(server.state_file.read_text())["pid"]
    try:
        orphan = server.recorded()
        assert orphan is not None and orphan.pid == left
        if becomes_ready:
            state = LocalNeo4j(home=server.home).start(port=port, timeout=20)
            assert (state.pid, state.ready, state.version) == (orphan.pid, True, "5.26-fake")
            assert server.state() == state
        else:
            with pytest.raises(LocalServerError, match=f"pid {orphan.pid} was left by an interrupted start"):
                LocalNeo4j(home=server.home).start(port=port, timeout=1)
    finally:
        stopped = LocalNeo4j(home=server.home).stop(timeout=5)
        if _alive(left):  # never leave the fake behind, whatever failed above
            os.kill(left, signal.SIGKILL)
    assert stopped is True


def test_a_process_still_in_exec_is_recognised(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Right after ``Popen`` returns, ``/proc/<pid>/cmdline`` can still be empty for a moment."""
    server = LocalNeo4j(home=tmp_path / "home", cache=tmp_path / "cache")
    argv = b"\0".join([b"java", b"-cp", b"x", b"Launcher", os.fsencode(server.home / "neo4j"), b"h", b"1"])
    reads = iter([b"", b"", argv])
    monkeypatch.setattr(Path, "read_bytes", lambda self: next(reads))
    assert server._is_ours(os.getpid()) is True
    reads = iter([b""] * 1000)
    monkeypatch.setattr(_local, "_EXEC_GRACE", 0.05)
    assert server._is_ours(os.getpid()) is False  # a kernel thread, or an exec that never finishes


class _Killed(BaseException):
    """The start dies where no Python cleanup runs (kill -9)."""


# -- stop: only our own process, once ------------------------------------------------


def test_a_pid_file_naming_a_foreign_process_is_ignored(tmp_path: Path) -> None:
    server = LocalNeo4j(home=tmp_path, cache=tmp_path / "cache")
    state = ServerState(1, "127.0.0.1", 7999, "neo4j", "pw", "5.26.30", str(tmp_path))  # pid 1 is not ours
    server.state_file.write_text(json.dumps(state.__dict__))
    assert server.state() is None
    assert server.stop() is False  # never signals a process it did not start


@pytest.mark.parametrize("argv_tail", [
    [],  # a reused pid: some other program
    ["Launcher", "/somewhere/else/neo4j"],  # our launcher, but another home's
    ["Launcher"],  # the word alone
])
def test_stop_signals_only_our_launcher_of_this_home(tmp_path: Path, argv_tail: list[str]) -> None:
    other = _spawn(*argv_tail)
    try:
        server = LocalNeo4j(home=tmp_path, cache=tmp_path / "cache")
        server.state_file.write_text(json.dumps(
            ServerState(other.pid, "127.0.0.1", 7999, "neo4j", "pw", "5.26.30", str(tmp_path)).__dict__))
        assert server.recorded() is None
        assert server.stop(timeout=2) is False
        assert other.poll() is None, "the foreign process was not signalled"
        assert not server.state_file.exists()
    finally:
        other.kill()
        other.wait()


def test_stop_ends_our_launcher(tmp_path: Path) -> None:
    ours = _spawn("Launcher", str(tmp_path.resolve() / "neo4j"), "127.0.0.1", "7999")
    try:
        server = LocalNeo4j(home=tmp_path, cache=tmp_path / "cache")
        server.state_file.write_text(json.dumps(
            ServerState(ours.pid, "127.0.0.1", 7999, "neo4j", "pw", "5.26.30", str(tmp_path)).__dict__))
        assert server.recorded() is not None
        assert server.stop(timeout=5) is True
        assert ours.wait(5) == -signal.SIGTERM
        assert not server.state_file.exists()
    finally:
        if ours.poll() is None:
            ours.kill()
            ours.wait()


def test_two_stops_at_once_stop_it_once(started: LocalNeo4j) -> None:
    state = started.state()
    assert state is not None
    results: list[bool] = []
    barrier = threading.Barrier(2)

    def stop() -> None:
        barrier.wait()
        results.append(LocalNeo4j(home=started.home).stop(timeout=10))

    threads = [threading.Thread(target=stop) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert sorted(results) == [False, True]
    assert _wait_dead(state.pid)
    assert not started.state_file.exists()


def test_a_stop_waits_for_a_start_in_progress(started: LocalNeo4j) -> None:
    """Start and stop of one home take turns: a stop during a start ends the started server."""
    state = started.state()
    assert state is not None
    assert started.stop(timeout=10) is True
    events: list[str] = []
    start_running = threading.Event()
    real_wait = started._wait_ready

    def slow_wait(proc: subprocess.Popen[bytes], timeout: float) -> str:
        start_running.set()
        time.sleep(1)
        events.append("ready")
        return real_wait(proc, timeout)

    started._wait_ready = slow_wait  # type: ignore[method-assign]
    starter = threading.Thread(target=lambda: started.start(port=state.port, timeout=20))
    starter.start()
    assert start_running.wait(20)
    stopper, waits = LocalNeo4j(home=started.home), list[str]()
    stopper.on_wait = waits.append
    stopped = stopper.stop(timeout=10)
    events.append("stopped")
    starter.join(30)
    assert stopped is True
    assert events == ["ready", "stopped"]
    assert waits == [f"waiting for another start or stop of the Neo4j in {started.home}..."]
    assert LocalNeo4j(home=started.home).recorded() is None


# -- the Java a Neo4j version needs ----------------------------------------------


def _jdk(root: Path, name: str, release: int, *, javac: bool = True) -> Path:
    """A fake JDK folder whose java reports ``release``."""
    bin_dir = root / name / "bin"
    bin_dir.mkdir(parents=True)
    java = bin_dir / "java"
    java.write_text(f"#!/bin/sh\necho 'openjdk version \"{release}.0.1\" 2025-01-01' >&2\n")
    java.chmod(0o755)
    if javac:
        (bin_dir / "javac").write_text("#!/bin/sh\n")
    return java


def test_a_calendar_release_needs_java_21_and_5_26_needs_17() -> None:
    assert [_local.java_needed(v) for v in ("5.26.30", "2025.01.0", "2026.08.1")] == [17, 21, 21]


def test_a_2025_release_finds_a_newer_jdk_beside_the_java_17_on_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    old = _jdk(tmp_path / "path", "jdk17", 17)
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(old.parent))
    jvm = tmp_path / "jvm"
    _jdk(jvm, "jre-25", 25, javac=False)  # no javac: cannot compile the launcher
    newer = _jdk(jvm, "temurin-21", 21)
    monkeypatch.setattr(_local, "JVM_ROOTS", (jvm,))
    assert _local._java("5.26.30") == str(old)
    assert _local._java("2026.08.1") == str(newer)


def test_a_java_home_too_old_for_the_version_names_the_fix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JAVA_HOME", str(_jdk(tmp_path, "jdk17", 17).parent.parent))
    monkeypatch.setattr(_local, "JVM_ROOTS", ())
    with pytest.raises(LocalServerError, match=r"Neo4j 2026.08.1 needs Java 21 or newer; .* reports Java 17\. "
                                               r"Install a JDK 21\+ and set JAVA_HOME to it"):
        _local._java("2026.08.1")
