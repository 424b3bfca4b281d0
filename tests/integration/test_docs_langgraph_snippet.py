"""docs/langgraph.md's agent-factory program runs as printed against the real graph, and again."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import uuid
from pathlib import Path

import anyio

from symfonic_graph import GraphMemoryStore
from tests.conftest import Neo4jSettings

ROOT = Path(__file__).resolve().parents[2]


def _program() -> str:
    doc = (ROOT / "docs" / "langgraph.md").read_text(encoding="utf-8")
    section = doc.split("## The agent factory", 1)[1]
    return re.findall(r"```python\n(.*?)```", section, flags=re.S)[0]


def test_the_agent_factory_program_runs_as_printed(
    neo4j_settings: Neo4jSettings, _schema: None, tmp_path: Path
) -> None:
    program = tmp_path / "agent.py"
    program.write_text(_program(), encoding="utf-8")
    tenant = f"doc-{uuid.uuid4().hex}"
    env = {**os.environ, "NEO4J_URI": neo4j_settings.uri, "NEO4J_USER": neo4j_settings.user,
           "NEO4J_PASSWORD": neo4j_settings.password, "LANGGRAPH_DOC_TENANT": tenant}
    try:
        for _ in range(2):  # and again: nothing changes
            proc = subprocess.run([sys.executable, str(program)], env=env, cwd=ROOT, capture_output=True,
                                  text=True, timeout=180, check=False)
            assert proc.returncode == 0, proc.stderr
            lines = proc.stdout.splitlines()
            assert lines[0].startswith("deliver: Missing precondition: call get_status before deliver")
            assert lines[1:] == ["get_status: slack is up", "deliver: delivered"]
    finally:
        async def forget() -> None:
            async with GraphMemoryStore.connect(neo4j_settings.uri, neo4j_settings.user,
                                                neo4j_settings.password) as store:
                await store.driver.execute_query("MATCH (n) WHERE n.tenant_id = $t DETACH DELETE n", t=tenant)

        anyio.run(forget)
