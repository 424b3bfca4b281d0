"""examples/quickstart.py runs against the real graph, twice, and prints what the README says."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

from tests.conftest import Neo4jSettings

ROOT = Path(__file__).resolve().parents[2]


def test_the_quickstart_runs_and_can_run_again(neo4j_settings: Neo4jSettings, _schema: None) -> None:
    env = {**os.environ, "NEO4J_URI": neo4j_settings.uri, "NEO4J_USER": neo4j_settings.user,
           "NEO4J_PASSWORD": neo4j_settings.password, "QUICKSTART_TENANT": f"qs-{uuid.uuid4().hex}"}
    outputs = []
    for _ in range(2):
        proc = subprocess.run([sys.executable, str(ROOT / "examples" / "quickstart.py")], env=env, cwd=ROOT,
                              capture_output=True, text=True, timeout=120, check=False)
        assert proc.returncode == 0, proc.stderr
        outputs.append(proc.stdout)
    assert outputs[0] == outputs[1]  # keyed skill, resolved reminder: the second run changes nothing
    out = outputs[0]
    assert "- YOU MUST call `get_integration_status` BEFORE calling `deliver`" in out
    assert out.count("Say invoice 4711 is overdue.") == 1
    assert "blocked deliver: Missing precondition: call get_integration_status before deliver" in out
