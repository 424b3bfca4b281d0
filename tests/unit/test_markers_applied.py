"""The ``neo4j`` marker is applied, so ``pytest -m "not neo4j"`` is the fast suite."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _collected(marker: str) -> set[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NEO4J_")}
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--collect-only", "-q", "-m", marker],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=True,
    ).stdout
    return {line for line in out.splitlines() if "::" in line}


def test_the_fast_suite_holds_no_test_that_needs_a_server() -> None:
    fast, slow = _collected("not neo4j"), _collected("neo4j")
    assert fast and slow and not fast & slow
    files = {test.split("::")[0] for test in fast}
    # Tests that take a server through a fixture (store, driver, ...) or start one themselves.
    for needs_server in ("tests/integration/test_isolation.py", "tests/integration/test_turn_memory.py",
                         "tests/reliability/test_restart.py", "tests/reliability/test_isolation_model.py"):
        assert needs_server not in files
    # Pure tests stay in the fast suite.
    assert "tests/unit/test_gate.py" in files and "tests/unit/test_ruleset.py" in files
    assert any(test.startswith("tests/integration/test_langgraph_e2e.py") for test in slow)
