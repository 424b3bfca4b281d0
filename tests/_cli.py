"""Run the ``symfonic-graph`` command in this process, as a test would see a subprocess run.

A fresh interpreter per command spends seconds importing the library, which is
most of what a CLI test would pay. ``run_cli`` calls ``main(argv)`` here
instead, with its own environment, folder and captured output, and leaves the
process as it found it (environment, working folder, the ``neo4j`` logger
level ``main`` lowers). ``run_installed`` runs the real console script, for the
few tests that check the entry point itself.

The commands run their own event loop (``anyio.run``); called from an async
test, ``run_cli`` runs the command in a worker thread and waits for it.

Example:
    >>> result = run_cli_on(settings, "skills", "list", "--tenant", "t")  # doctest: +SKIP
    >>> result.returncode, result.stdout  # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
import io
import logging
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path

import pytest

from symfonic_graph.cli import main
from tests.conftest import Neo4jSettings


@dataclass(frozen=True)
class CliResult:
    """What a caller of the command sees: its exit code and its two streams."""

    returncode: int
    stdout: str
    stderr: str


def neo4j_env(settings: Neo4jSettings) -> dict[str, str | None]:
    """The ``NEO4J_*`` variables that point the command at ``settings`` (``None`` unsets one)."""
    return {"NEO4J_URI": settings.uri, "NEO4J_USER": settings.user, "NEO4J_PASSWORD": settings.password,
            "NEO4J_DATABASE": settings.database}


def run_cli(*args: str, env: Mapping[str, str | None] | None = None, cwd: Path | None = None) -> CliResult:
    """Run ``symfonic-graph ARGS`` in-process; ``env`` sets (or, with ``None``, unsets) variables for it."""
    neo4j_logger = logging.getLogger("neo4j")
    level = neo4j_logger.level
    out, err = io.StringIO(), io.StringIO()
    with pytest.MonkeyPatch.context() as patch:
        for name, value in (env or {}).items():
            if value is None:
                patch.delenv(name, raising=False)
            else:
                patch.setenv(name, value)
        if cwd is not None:
            patch.chdir(cwd)
        try:
            with redirect_stdout(out), redirect_stderr(err):
                try:
                    code = _in_own_thread(main, list(args)) if _loop_running() else main(list(args))
                except SystemExit as exc:  # argparse on bad usage or --help, as the real process exits
                    code = _exit_code(exc, err)
        finally:
            neo4j_logger.setLevel(level)
    return CliResult(code, out.getvalue(), err.getvalue())


def run_cli_on(settings: Neo4jSettings, *args: str, cwd: Path | None = None) -> CliResult:
    """``symfonic-graph ARGS`` against the Neo4j of ``settings`` (its NEO4J_* variables set).

    Example:
        >>> run_cli_on(settings, "tenants", "list", "--json").returncode  # doctest: +SKIP
        0
    """
    return run_cli(*args, env=neo4j_env(settings), cwd=cwd)


def _loop_running() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _in_own_thread(command: Callable[[list[str]], int], argv: list[str]) -> int:
    """Run ``command`` where no event loop runs yet (it starts its own); its ``SystemExit`` comes back here."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(command, argv).result()


def _exit_code(exc: SystemExit, err: io.StringIO) -> int:
    if exc.code is None or isinstance(exc.code, int):
        return exc.code or 0
    print(exc.code, file=err)  # what the interpreter does with a message
    return 1


def installed_command() -> list[str]:
    """The console script pip installed next to this interpreter, else ``python -m symfonic_graph.cli``."""
    script = Path(sys.executable).parent / "symfonic-graph"
    if script.exists():
        return [str(script)]
    found = shutil.which("symfonic-graph")
    return [found] if found else [sys.executable, "-m", "symfonic_graph.cli"]


def run_installed(*args: str, env: Mapping[str, str | None] | None = None) -> CliResult:
    """Run the real entry point in a new process, with this environment changed by ``env``."""
    child = dict(os.environ)
    for name, value in (env or {}).items():
        if value is None:
            child.pop(name, None)
        else:
            child[name] = value
    proc = subprocess.run([*installed_command(), *args], capture_output=True, text=True, env=child, timeout=180,
                          check=False)
    return CliResult(proc.returncode, proc.stdout, proc.stderr)
