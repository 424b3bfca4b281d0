"""A real Neo4j Community (5.26 LTS, or ``$SYMFONIC_NEO4J_VERSION``) on loopback, without Docker.

Maven fetches the embedded DBMS from Maven Central into a cache outside the
repo (``~/.cache/symfonic-graph`` or ``$SYMFONIC_GRAPH_CACHE``); our small
Java launcher (``Launcher.java``) runs it with the Bolt connector on. Data,
log, password and the state file live in one *home* folder:
``$SYMFONIC_GRAPH_HOME`` when set, else ``.symfonic-graph`` at the root of the
symfonic-graph checkout the current folder is in (so ``status`` and ``stop``
work from any of its subfolders), else the nearest existing
``.symfonic-graph`` above the current folder, else ``./.symfonic-graph``.

Start and stop hold a lock on the home, so two of them never interleave; the
state file is written atomically with mode 0600; ``stop`` signals only a
process whose command line is our Launcher for this home.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import itertools
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import time
import tomllib
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from symfonic_graph.errors import LocalServerError

NEO4J_VERSION = "5.26.30"
DEFAULT_PORT = 7687
PORT_VARIABLE = "SYMFONIC_NEO4J_PORT"
HOME_VARIABLE = "SYMFONIC_GRAPH_HOME"
HOME_DIRNAME = ".symfonic-graph"
PROJECT_NAME = "symfonic-graph"
# Ports other tools of this project use by default: never suggested as "free".
_RESERVED_PORTS = frozenset({7687, 7688})
# Seconds between SIGTERM and SIGKILL when a start is abandoned.
TERMINATE_GRACE = 10.0
_HERE = Path(__file__).parent
_READY = re.compile(r"^READY (\S+)$", re.MULTILINE)
_EXEC_GRACE = 1.0  # seconds an empty /proc/<pid>/cmdline is read again (a process still in exec)
# The JIT's inlining limits, lowered (defaults 325 bytecodes, 15 levels, 2500 bytes): a local server lives
# minutes, and with the defaults its C2 compiler spends about as much CPU as the queries themselves
# (docs/decisions.md, *Local server*). Compiled code stays as fast; the compiles are cheaper.
JIT_FLAGS = ("-XX:FreqInlineSize=100", "-XX:MaxInlineLevel=6", "-XX:InlineSmallCode=1000")


@dataclass(frozen=True)
class ServerState:
    """What ``start`` recorded about the server (``ready`` is False while it starts)."""

    pid: int
    host: str
    port: int
    user: str
    password: str
    version: str
    home: str
    ready: bool = True

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


def checkout_root(start: Path | None = None) -> Path | None:
    """The nearest folder at or above ``start`` whose pyproject.toml names symfonic-graph."""
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        pyproject = folder / "pyproject.toml"
        if not pyproject.is_file():
            continue
        try:
            name = tomllib.loads(pyproject.read_text(encoding="utf-8")).get("project", {}).get("name")
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
            continue
        if name == PROJECT_NAME:
            return folder
    return None


def default_home(cwd: Path | None = None, *, use_env: bool = True) -> Path:
    """The home folder ``LocalNeo4j()`` uses when given none (see the module docstring)."""
    override = os.environ.get(HOME_VARIABLE) if use_env else None
    if override:
        return Path(override).resolve()
    here = (cwd or Path.cwd()).resolve()
    root = checkout_root(here)
    if root is not None:
        return root / HOME_DIRNAME
    for folder in (here, *here.parents):
        if (folder / HOME_DIRNAME).is_dir():
            return folder / HOME_DIRNAME
    return here / HOME_DIRNAME


class LocalNeo4j:
    """Fetch, start, stop and inspect the local development Neo4j.

    Example:
        >>> state = LocalNeo4j().start(port=7687)
        >>> print(state.exports())
    """

    def __init__(self, home: Path | None = None, cache: Path | None = None, version: str | None = None) -> None:
        self.version = version or os.environ.get("SYMFONIC_NEO4J_VERSION", NEO4J_VERSION)
        self.home = Path(home).resolve() if home is not None else default_home()
        base = cache or Path(os.environ.get("SYMFONIC_GRAPH_CACHE", Path.home() / ".cache" / "symfonic-graph"))
        self.cache = base / f"neo4j-{self.version}"
        self.state_file = self.home / "server.json"
        self.log_file = self.home / "neo4j.log"
        self.lock_file = self.home / "server.lock"
        # Told (e.g. printed by the CLI) when another start or stop of this home makes us wait.
        self.on_wait: Callable[[str], None] | None = None

    # -- state ------------------------------------------------------------

    def state(self) -> ServerState | None:
        """The recorded server, if it is ready and its process is still ours and alive."""
        state = self.recorded()
        return state if state is not None and state.ready else None

    def recorded(self) -> ServerState | None:
        """The recorded server, ready or still starting, if its process is still ours and alive."""
        state = self._read_state()
        return state if state is not None and self._is_ours(state.pid) else None

    def _read_state(self) -> ServerState | None:
        try:
            state = ServerState(**json.loads(self.state_file.read_text()))
        except (OSError, ValueError, TypeError):
            return None
        return state if isinstance(state.pid, int) and state.pid > 0 else None

    def _is_ours(self, pid: int) -> bool:
        """Whether ``pid`` runs our Launcher on this home: ``... Launcher <home>/neo4j <host> <port>``.

        A process still inside ``exec`` shows an empty command line for a
        moment (the kernel sets it after the point where ``Popen`` returns):
        that is read again for up to ``_EXEC_GRACE`` seconds, unless the
        process is a zombie.
        """
        deadline = time.monotonic() + _EXEC_GRACE
        while True:
            try:
                raw = Path(f"/proc/{pid}/cmdline").read_bytes()
                if raw or _zombie(pid) or time.monotonic() >= deadline:
                    break
            except OSError:
                return False
            time.sleep(0.01)
        argv = raw.split(b"\0")
        data = os.fsencode(self.home / "neo4j")
        return any(arg == b"Launcher" and argv[i + 1 : i + 2] == [data] for i, arg in enumerate(argv))

    def _write_state(self, state: ServerState) -> None:
        _write_private(self.state_file, json.dumps(asdict(state)))

    def stop_command(self) -> str:
        """The shell command that stops this home's server."""
        if self.home == default_home(use_env=False):
            return "symfonic-graph server stop"
        return f"{HOME_VARIABLE}={self.home} symfonic-graph server stop"

    @contextlib.contextmanager
    def _lock(self) -> Iterator[None]:
        """Exclusive use of this home for one start or stop (other processes wait)."""
        self.home.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(self.lock_file, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if self.on_wait is not None:
                    self.on_wait(f"waiting for another start or stop of the Neo4j in {self.home}...")
                fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # releases the lock

    # -- start ------------------------------------------------------------

    def start(
        self,
        *,
        host: str = "127.0.0.1",
        port: int | None = None,
        timeout: float = 180.0,
        port_variable: str = PORT_VARIABLE,
    ) -> ServerState:
        """Start the server (or reuse the running one) and wait for Bolt.

        ``port`` None means: ``$<port_variable>`` when set, else reuse the
        running server whatever its port, else 7687. A requested port other
        than the running server's is an error, never a silent reuse.

        Raises:
            LocalServerError: the port is taken, another port runs already,
                Java or Maven is missing, or Neo4j did not become ready (then
                nothing it started is left running).
        """
        requested, source = _requested_port(port, port_variable)
        with self._lock():
            running = self.recorded()
            if running is not None:
                return self._reuse(running, requested, source, timeout)
            self.state_file.unlink(missing_ok=True)  # names no live server of ours
            chosen = requested if requested is not None else DEFAULT_PORT
            # The port first: it is the common failure, and the first fetch takes minutes.
            self._check_port(host, chosen, port_variable, explicit=port is not None)
            java = _java(self.version)
            classpath = self._ensure_installed(java)
            self._check_port(host, chosen, port_variable, explicit=port is not None)  # taken while fetching?
            return self._launch(java, classpath, host, chosen, timeout)

    def _reuse(self, running: ServerState, requested: int | None, source: str, timeout: float) -> ServerState:
        if requested is not None and requested != running.port:
            raise LocalServerError(
                f"the local Neo4j of {self.home} already runs on port {running.port} (pid {running.pid}), "
                f"not on the requested port {requested} ({source}); use port {running.port}, "
                f"or stop it first with `{self.stop_command()}` and start again"
            )
        if not running.ready:
            # The process that started it died (we hold the lock, so no start is in progress): wait for it.
            deadline = time.monotonic() + timeout
            while (ready := _READY.search(self._log_text())) is None and self._is_ours(running.pid):
                if time.monotonic() >= deadline:
                    break
                time.sleep(0.25)
            if ready is None or not self._is_ours(running.pid):
                raise LocalServerError(
                    f"pid {running.pid} was left by an interrupted start of the local Neo4j and is not ready; "
                    f"see {self.log_file}, run `{self.stop_command()}` and start again"
                )
            running = replace(running, version=ready[1], ready=True)
            self._write_state(running)
        if not _bolt_answers(running.host, running.port):
            raise LocalServerError(
                f"pid {running.pid} is our Neo4j but Bolt on {running.uri} does not answer; "
                f"see {self.log_file}, or run `{self.stop_command()}` and start again"
            )
        return running

    def _check_port(self, host: str, port: int, port_variable: str, *, explicit: bool) -> None:
        if _port_free(host, port):
            return
        free = _suggest_port(host, port)
        fix = f"choose a free one, e.g. {free}" if explicit else f"set {port_variable}={free} and rerun"
        raise LocalServerError(f"port {port} on {host} is taken by another process; {fix}")

    def _launch(self, java: str, classpath: str, host: str, port: int, timeout: float) -> ServerState:
        password = self._password()
        env = {**os.environ, "SYMFONIC_NEO4J_PASSWORD": password}
        heap = os.environ.get("SYMFONIC_NEO4J_HEAP", "1g")
        with open(self.log_file, "wb") as log:
            proc = subprocess.Popen(
                [java, f"-Xmx{heap}", *JIT_FLAGS, "-cp", classpath, "Launcher", str(self.home / "neo4j"), host,
                 str(port)],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                start_new_session=True,  # Ctrl-C in the terminal reaches us, not Neo4j: we end it below
            )
        try:
            # Recorded at once: if this process dies now (kill -9, a closed terminal), `stop` can end it.
            state = ServerState(proc.pid, host, port, "neo4j", password, "", str(self.home), ready=False)
            self._write_state(state)
            state = replace(state, version=self._wait_ready(proc, timeout), ready=True)
            self._write_state(state)
        except BaseException:  # a timeout, a failed start, or KeyboardInterrupt: leave nothing running
            try:
                _end(proc)
            finally:  # even when a second Ctrl-C cut the grace period short (_end killed it then)
                if proc.poll() is not None:
                    self.state_file.unlink(missing_ok=True)
            raise
        return state

    def _password(self) -> str:
        """The home's password: made once, kept across restarts so clients reconnect."""
        path = self.home / "password"
        if path.exists():
            return path.read_text().strip()
        password = secrets.token_urlsafe(18)
        _write_private(path, password)
        return password

    def _wait_ready(self, proc: subprocess.Popen[bytes], timeout: float) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise LocalServerError(
                    f"Neo4j exited with code {proc.returncode} while starting; last log lines:\n{self._log_tail()}"
                )
            match = _READY.search(self._log_text())
            if match:
                return match[1]
            time.sleep(0.25)
        raise LocalServerError(f"Neo4j did not become ready within {timeout:.0f}s (stopped it); see {self.log_file}")

    def _log_text(self) -> str:
        try:
            return self.log_file.read_text(errors="replace")
        except OSError:
            return ""

    def _log_tail(self, lines: int = 20) -> str:
        return "\n".join(self._log_text().splitlines()[-lines:]) or "(no log)"

    def installed_paths(self) -> tuple[Path, Path]:
        """(jar folder, compiled Launcher folder) in the cache for this version and Launcher.java."""
        digest = hashlib.sha256((_HERE / "Launcher.java").read_bytes()).hexdigest()[:12]
        return self.cache / "lib", self.cache / f"classes-{digest}"

    def _ensure_installed(self, java: str) -> str:
        lib, classes = self.installed_paths()
        if not (lib / ".complete").exists():
            self._fetch(lib)
        if not (classes / "Launcher.class").exists():
            javac = shutil.which("javac", path=str(Path(java).parent)) or shutil.which("javac")
            if javac is None:
                raise LocalServerError("javac not found: install a JDK 17+ (not only a JRE) or set JAVA_HOME")
            classes.mkdir(parents=True, exist_ok=True)
            _run([javac, "-d", str(classes), "-cp", f"{lib}/*", str(_HERE / "Launcher.java")],
                 "compiling Launcher.java")
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
        """Stop the server this home started; False if none was running.

        Safe against races: stops and starts of one home take turns (a lock),
        and the process is signalled through a pidfd opened before its command
        line is checked, so a pid reused by another process is never signalled.
        """
        if not self.home.is_dir():
            return False
        with self._lock():
            state = self._read_state()
            if state is None:
                self.state_file.unlink(missing_ok=True)
                return False
            stopped = self._end_recorded(state.pid, timeout)
            self.state_file.unlink(missing_ok=True)
            return stopped

    def _end_recorded(self, pid: int, timeout: float) -> bool:
        with _pidfd(pid) as fd:
            if not self._is_ours(pid):  # gone, or the pid now belongs to another process
                return False
            _signal(pid, fd, signal.SIGTERM)
            if not self._wait_gone(pid, timeout):
                _signal(pid, fd, signal.SIGKILL)
                self._wait_gone(pid, TERMINATE_GRACE)
        return True

    def _wait_gone(self, pid: int, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while self._is_ours(pid):  # a zombie has an empty command line: gone
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.1)
        return True


def _requested_port(port: int | None, port_variable: str) -> tuple[int | None, str]:
    """The port asked for, and where it came from (for error messages)."""
    if port is not None:
        return port, f"--port {port}"
    raw = os.environ.get(port_variable, "").strip()
    if not raw:
        return None, ""
    if not raw.isdigit() or not 0 < int(raw) < 65536:
        raise LocalServerError(f"{port_variable}={raw!r} is not a port number (1-65535)")
    return int(raw), f"{port_variable}={raw}"


def _write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically, mode 0600 from the first byte (temp file + rename)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.fchmod(fd, 0o600)  # whatever the umask
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            fd = -1
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        if fd != -1:
            os.close(fd)
        tmp.unlink(missing_ok=True)
        raise


def _zombie(pid: int) -> bool:
    """Whether ``pid`` has exited and waits to be reaped (its command line stays empty)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True


def _end(proc: subprocess.Popen[bytes]) -> None:
    """Terminate, wait, then kill: a child we started never outlives a failed start."""
    try:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(TERMINATE_GRACE)
    except subprocess.TimeoutExpired:
        pass
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@contextlib.contextmanager
def _pidfd(pid: int) -> Iterator[int | None]:
    """A pidfd for ``pid`` (None where the OS has none, or the process is gone)."""
    try:
        fd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        yield None
        return
    try:
        yield fd
    finally:
        os.close(fd)


def _signal(pid: int, fd: int | None, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        if fd is not None:
            signal.pidfd_send_signal(fd, sig)  # only the process the pidfd was opened for
        else:
            os.kill(pid, sig)


# Where Linux distributions and vendors install JDKs: searched when the Java on PATH is too old.
JVM_ROOTS = (Path("/usr/lib/jvm"), Path("/opt/java"), Path("/usr/local/lib/jvm"))


def java_needed(version: str) -> int:
    """The oldest Java release a Neo4j version runs on: 17 for 5.x, 21 for the calendar releases (2025.01 on).

    Example:
        >>> java_needed("5.26.30"), java_needed("2026.08.1")
        (17, 21)
    """
    major = version.split(".", 1)[0]
    return 21 if major.isdigit() and int(major) >= 2025 else 17


def _java_release(java: str) -> int | None:
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, check=False, timeout=30).stderr
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = re.search(r'version "(\d+)', out)
    return int(match[1]) if match else None


def _java(version: str = NEO4J_VERSION) -> str:
    """The ``java`` to run Neo4j ``version`` with.

    ``$JAVA_HOME`` when set (it must be new enough); else the ``java`` on
    PATH when new enough; else the newest JDK (with ``javac``) found under
    ``JVM_ROOTS`` that is, so a 2025+ release runs beside a default Java 17.
    """
    needed = java_needed(version)
    java_home = os.environ.get("JAVA_HOME")
    java = str(Path(java_home) / "bin" / "java") if java_home else shutil.which("java")
    if not java or not Path(java).exists():
        raise LocalServerError(f"Java not found: install a JDK {needed} or newer and put it on PATH (or set JAVA_HOME)")
    release = _java_release(java)
    if release is not None and release >= needed:
        return java
    if not java_home:
        found = sorted(((r, str(j)) for root in JVM_ROOTS if root.is_dir() for j in root.glob("*/bin/java")
                        if (j.parent / "javac").exists() and (r := _java_release(str(j))) is not None and r >= needed),
                       reverse=True)
        if found:
            return found[0][1]
    raise LocalServerError(
        f"Neo4j {version} needs Java {needed} or newer; {java} reports Java {release or 'of an unknown release'}. "
        f"Install a JDK {needed}+ and set JAVA_HOME to it"
    )


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


def _suggest_port(host: str, port: int) -> int:
    """A port that is free now, a little above ``port`` (never another default of this project)."""
    first = min(max(port, 7687) + 13, 65535)
    for candidate in itertools.chain(range(first, 65536), range(1024, first)):
        if candidate not in _RESERVED_PORTS and candidate != port and _port_free(host, candidate):
            return candidate
    return first


def _bolt_answers(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=2):
            return True
    except OSError:
        return False
