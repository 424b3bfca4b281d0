"""``tests/_cli.py`` runs the command in this process and leaves the process as it found it."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from tests._cli import run_cli

REFUSED = {"NEO4J_URI": "bolt://127.0.0.1:1", "NEO4J_USER": "neo4j", "NEO4J_PASSWORD": "x", "NEO4J_DATABASE": None}
NOT_RUNNING = "error: cannot connect to bolt://127.0.0.1:1: connection refused"


def test_a_command_sees_its_own_environment_and_folder_and_leaves_them(tmp_path: Path) -> None:
    environ, cwd = dict(os.environ), Path.cwd()
    level = logging.getLogger("neo4j").level
    home = tmp_path / "home"
    status = run_cli("server", "status", env={"SYMFONIC_GRAPH_HOME": str(home)}, cwd=tmp_path)
    assert (status.returncode, status.stdout.strip()) == (1, f"not running (no server recorded in {home})")
    refused = run_cli("skills", "list", "--tenant", "t", env=REFUSED)
    assert refused.returncode == 2 and refused.stderr.startswith(NOT_RUNNING) and refused.stdout == ""
    assert (dict(os.environ), Path.cwd(), logging.getLogger("neo4j").level) == (environ, cwd, level)


def test_bad_usage_exits_2_with_the_usage_on_stderr() -> None:
    result = run_cli("skills", "list")
    assert result.returncode == 2 and "usage: symfonic-graph" in result.stderr
    assert "--tenant" in result.stderr and result.stdout == ""


@pytest.mark.anyio
async def test_an_async_test_can_run_a_command_that_starts_its_own_event_loop() -> None:
    refused = run_cli("skills", "list", "--tenant", "t", env=REFUSED)
    assert refused.returncode == 2 and refused.stderr.startswith(NOT_RUNNING)
