"""A real Neo4j Community 5.26 on loopback, without Docker.

Maven fetches the embedded DBMS from Maven Central into a cache outside the
repo (``~/.cache/symfonic-graph`` or ``$SYMFONIC_GRAPH_CACHE``); our small
Java launcher (``Launcher.java``) runs it with the Bolt connector on. Data,
log and the pid file live in ``$SYMFONIC_GRAPH_HOME`` (default
``./.symfonic-graph``, git-ignored). ``stop`` ends exactly the pid it started.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from symfonic_graph.errors import LocalServerError

NEO4J_VERSION = "5.26.30"
_HERE = Path(__file__).parent
_READY = re.compile(r"^READY (\S+)$", re.MULTILINE)


@dataclass(frozen=True)
class ServerState:
    """What ``start`` recorded about the running server."""

    pid: int
    host: str
    port: int
    user: str
    password: str
    version: str
    home: str

    @property
    def uri(self) -> str:
        return f"bolt://{self.host}:{self.port}"

    def exports(self) -> str:
        """Shell lines for ``eval "$(symfonic-graph server start)"``."""
        return (
            f"export NEO4J_URI={self.uri}\n"
            f"export NEO4J_USER={self.user}\n"
            f"export NEO4J_PASSWORD={self.password}"
        )


class LocalNeo4j:
    """Fetch, start, stop and inspect the local development Neo4j.

    Example:
        >>> state = LocalNeo4j().start(port=7687)
        >>> print(state.exports())
    """

    def __init__(self, home: Path | None = None, cache: Path | None = None, version: str | None = None) -> None:
        self.version = version or os.environ.get("SYMFONIC_NEO4J_VERSION", NEO4J_VERSION)
        self.home = (home or Path(os.environ.get("SYMFONIC_GRAPH_HOME", ".symfonic-graph"))).resolve()
        base = cache or Path(os.environ.get("SYMFONIC_GRAPH_CACHE", Path.home() / ".cache" / "symfonic-graph"))
        self.cache = base / f"neo4j-{self.version}"
        self.state_file = self.home / "server.json"
        self.log_file = self.home / "neo4j.log"

    # -- state ------------------------------------------------------------

    def state(self) -> ServerState | None:
        """The recorded server, if its process is still ours and alive."""
        try:
            state = ServerState(**json.loads(self.state_file.read_text()))
        except (OSError, ValueError, TypeError):
            return None
        return state if self._is_ours(state.pid) else None

    def _is_ours(self, pid: int) -> bool:
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            return False
        return b"Launcher" in cmdline and str(self.home / "neo4j").encode() in cmdline

    # -- start ------------------------------------------------------------

    def start(self, *, host: str = "127.0.0.1", port: int = 7687, timeout: float = 180.0) -> ServerState:
        """Start the server (or reuse the running one) and wait for Bolt."""
        running = self.state()
        if running is not None:
            if _bolt_answers(running.host, running.port):
                return running
            raise LocalServerError(
                f"pid {running.pid} is our Neo4j but Bolt on {running.uri} does not answer; "
                f"see {self.log_file}, or run `symfonic-graph server stop` and start again"
            )
        java = _java()
        classpath = self._ensure_installed(java)
        if not _port_free(host, port):
            raise LocalServerError(f"port {port} on {host} is taken; pass --port with a free port")
        self.home.mkdir(parents=True, exist_ok=True)
        password = self._password()
        env = {**os.environ, "SYMFONIC_NEO4J_PASSWORD": password}
        heap = os.environ.get("SYMFONIC_NEO4J_HEAP", "1g")
        with open(self.log_file, "wb") as log:
            proc = subprocess.Popen(
                [java, f"-Xmx{heap}", "-cp", classpath, "Launcher", str(self.home / "neo4j"), host, str(port)],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                start_new_session=True,
            )
        version = self._wait_ready(proc, timeout)
        state = ServerState(proc.pid, host, port, "neo4j", password, version, str(self.home))
        self.state_file.write_text(json.dumps(asdict(state)))
        self.state_file.chmod(0o600)
        return state

    def _password(self) -> str:
        """The home's password: made once, kept across restarts so clients reconnect."""
        path = self.home / "password"
        if path.exists():
            return path.read_text().strip()
        password = secrets.token_urlsafe(18)
        path.touch(mode=0o600)
        path.write_text(password)
        return password

    def _wait_ready(self, proc: subprocess.Popen[bytes], timeout: float) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise LocalServerError(
                    f"Neo4j exited with code {proc.returncode} while starting; last log lines:\n{self._log_tail()}"
                )
            match = _READY.search(self.log_file.read_text(errors="replace"))
            if match:
                return match[1]
            time.sleep(0.25)
        proc.terminate()
        raise LocalServerError(f"Neo4j did not become ready within {timeout:.0f}s; see {self.log_file}")

    def _log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_file.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def _ensure_installed(self, java: str) -> str:
        source = _HERE / "Launcher.java"
        digest = hashlib.sha256(source.read_bytes()).hexdigest()[:12]
        lib, classes = self.cache / "lib", self.cache / f"classes-{digest}"
        if not (lib / ".complete").exists():
            self._fetch(lib)
        if not (classes / "Launcher.class").exists():
            javac = shutil.which("javac", path=str(Path(java).parent)) or shutil.which("javac")
            if javac is None:
                raise LocalServerError("javac not found: install a JDK 17+ (not only a JRE) or set JAVA_HOME")
            classes.mkdir(parents=True, exist_ok=True)
            _run([javac, "-d", str(classes), "-cp", f"{lib}/*", str(source)], "compiling Launcher.java")
        return f"{lib}/*:{classes}"

    def _fetch(self, lib: Path) -> None:
        mvn = shutil.which("mvn")
        if mvn is None:
            raise LocalServerError(
                "Maven (mvn) is not on PATH; install it (e.g. `apt-get install maven`) or use docker-compose.yml"
            )
        lib.mkdir(parents=True, exist_ok=True)
        _run(
            [mvn, "-B", "-q", "-f", str(_HERE / "pom.xml"), "dependency:copy-dependencies",
             f"-Dneo4j.version={self.version}", f"-DoutputDirectory={lib}", "-DincludeScope=runtime"],
            f"downloading Neo4j {self.version} from Maven Central (check network access to Maven Central)",
        )
        (lib / ".complete").write_text(self.version)

    # -- stop -------------------------------------------------------------

    def stop(self, timeout: float = 60.0) -> bool:
        """Stop the server this home started; False if none was running."""
        state = self.state()
        if state is None:
            self.state_file.unlink(missing_ok=True)
            return False
        os.kill(state.pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self._is_ours(state.pid):
            time.sleep(0.2)
        if self._is_ours(state.pid):
            os.kill(state.pid, signal.SIGKILL)
        self.state_file.unlink(missing_ok=True)
        return True


def _java() -> str:
    java_home = os.environ.get("JAVA_HOME")
    java = str(Path(java_home) / "bin" / "java") if java_home else shutil.which("java")
    if not java or not Path(java).exists():
        raise LocalServerError("Java not found: install a JDK 17 or 21 and put it on PATH (or set JAVA_HOME)")
    out = subprocess.run([java, "-version"], capture_output=True, text=True, check=False).stderr
    match = re.search(r'version "(\d+)', out)
    if not match or int(match[1]) < 17:
        raise LocalServerError(f"Neo4j 5.26 needs Java 17 or newer; {java} reports: {out.strip()[:120]}")
    return java


def _run(cmd: list[str], what: str) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-15:])
        raise LocalServerError(f"failed {what}:\n{tail}")


def _port_free(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def _bolt_answers(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=2):
            return True
    except OSError:
        return False
