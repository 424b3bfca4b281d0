"""The CLI end to end against the real Neo4j: output and exit codes.

The commands run in-process (``tests/_cli.py``); two tests run the installed
console script in a new process, so the real entry point stays covered.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from tests._cli import neo4j_env, run_cli_on, run_installed
from tests.conftest import Neo4jSettings


@pytest.fixture
def cli_settings(neo4j_settings: Neo4jSettings, _schema: None) -> Neo4jSettings:
    return neo4j_settings


def test_demo_runs_and_exits_zero(cli_settings: Neo4jSettings) -> None:
    proc = run_cli_on(cli_settings, "demo")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "## ENFORCED PRE-FLIGHT RULES" in out
    assert "BLOCKED deliver: Missing precondition: call get_integration_status before deliver" in out
    assert "tool deliver: delivered 'weekly' to slack" in out
    assert out.count("Tell the user that invoice 4711 is overdue.") == 2
    assert "globex reminders selected for 'invoice': none" in out


def test_doctor_reports_seeded_problems_and_strict_exit(cli_settings: Neo4jSettings, tmp_path: Path) -> None:
    tenant = f"doc-{uuid.uuid4().hex}"
    script = tmp_path / "bad.cypher"
    t = tenant
    script.write_text(
        f"CREATE (s:Skill {{id: '{t}-s', tenant_id: '{t}', label: 'Bad', steps: 'not a list', status: 'approved'}});\n"
        f"CREATE (s:Skill {{id: '{t}-k', tenant_id: '{t}', label: 'Kinds', steps: ['x'], status: 'approved'}})"
        f"-[:REQUIRES {{position: 0}}]->"
        f"(:Precondition {{tenant_id: '{t}', kind: 'state', path: 'a', op: 'gt', value: 1}});\n"
        f"MATCH (s:Skill {{id: '{t}-k'}}) "
        f"CREATE (s)-[:REQUIRES {{position: 1}}]->(:Precondition {{kind: 'tool', tool: 't', doc_test: '{t}'}});\n"
    )
    cleanup = tmp_path / "cleanup.cypher"  # the untenanted precondition would be reported to everyone
    cleanup.write_text(f"MATCH (p:Precondition {{doc_test: '{t}'}}) DETACH DELETE p;\n")
    try:
        ran = run_cli_on(cli_settings, "cypher", "run", str(script))
        assert ran.returncode == 0, ran.stderr
        assert "ran 3 statement(s)" in ran.stdout
        proc = run_cli_on(cli_settings, "doctor", "--tenant", tenant, "--json")
        assert proc.returncode == 0, proc.stderr
        findings = json.loads(proc.stdout)
        problems = {(f["check"], f["problem"].split(" (")[0]) for f in findings}
        assert ("bad_skills", "steps: Input should be a valid list") in problems
        assert ("bad_preconditions", "precondition[0].op: unknown op 'gt': a misconfigured state predicate; the skill "
                "blocks its action until this is fixed") in problems
        [edge] = [f for f in findings if f["check"] == "foreign_preconditions"]
        assert edge["label"] == "Skill" and edge["node"] == f"{t}-k", "named by the skill it hangs off"
        assert "position 1" in edge["problem"] and "no tenant" in edge["problem"]
        strict = run_cli_on(cli_settings, "doctor", "--tenant", tenant, "--strict")
        assert strict.returncode == 1
        assert "[bad_skills] Skill" in strict.stdout
    finally:
        assert run_cli_on(cli_settings, "cypher", "run", str(cleanup)).returncode == 0


def test_doctor_strict_passes_on_clean_tenant(cli_settings: Neo4jSettings) -> None:
    """The installed entry point, in a new process, against the server."""
    proc = run_installed("doctor", "--tenant", f"clean-{uuid.uuid4().hex}", "--strict", env=neo4j_env(cli_settings))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "no problems found" in proc.stdout


def test_seed_then_explain_blocks_and_allows(cli_settings: Neo4jSettings, tmp_path: Path) -> None:
    tenant = f"exp-{uuid.uuid4().hex}"
    seed = tmp_path / "seed.yaml"
    seed.write_text(
        "skills:\n"
        "  - label: Deliver\n    steps: [deliver]\n    source_tag: authored:cli\n    action_tool: deliver\n"
        "    precondition:\n      - get_integration_status\n      - state: {path: channel, op: eq, value: slack}\n"
        "triggers:\n  - condition: invoice\n    task: Say it is overdue.\n"
    )
    seeded = run_cli_on(cli_settings, "seed", str(seed), "--tenant", tenant)
    assert seeded.returncode == 0, seeded.stderr
    state = tmp_path / "state.json"
    state.write_text('{"channel": "slack"}')
    blocked = run_cli_on(cli_settings, "explain", "--tenant", tenant, "--tool", "deliver", "--state", str(state))
    assert blocked.returncode == 0, blocked.stderr
    assert "verdict: blocked" in blocked.stdout
    assert "Missing precondition: call get_integration_status before deliver (skill: Deliver)." in blocked.stdout
    allowed = run_cli_on(cli_settings, "explain", "--tenant", tenant, "--tool", "deliver", "--state", str(state),
                   "--called", "get_integration_status", "--json")
    assert json.loads(allowed.stdout)["verdict"] == "allowed"
    state.write_text('{"channel": "email"}')
    dropped = run_cli_on(cli_settings, "explain", "--tenant", tenant, "--tool", "deliver", "--state", str(state),
                         "--json")
    data = json.loads(dropped.stdout)
    assert data["verdict"] == "allowed" and data["dropped"][0]["label"] == "Deliver"
    listed = run_cli_on(cli_settings, "triggers", "list", "--tenant", tenant, "--json")
    assert [t["task"] for t in json.loads(listed.stdout)] == ["Say it is overdue."]
    other = run_cli_on(cli_settings, "skills", "list", "--tenant", tenant + "x", "--json")
    assert json.loads(other.stdout) == []


def test_seed_file_errors_name_file_entry_and_field(cli_settings: Neo4jSettings, tmp_path: Path) -> None:
    tenant = f"bad-{uuid.uuid4().hex}"
    seed = tmp_path / "seed.json"
    seed.write_text(json.dumps({"skills": [
        {"label": "ok", "steps": ["a"], "source_tag": "authored:x"},
        {"label": "bad", "steps": ["a", 3], "source_tag": "authored:x"},
    ]}))
    proc = run_cli_on(cli_settings, "seed", str(seed), "--tenant", tenant)
    assert proc.returncode == 2
    assert f"{seed}: skills[1].steps[1]: must be a string" in proc.stderr
    listed = run_cli_on(cli_settings, "skills", "list", "--tenant", tenant, "--json")
    assert json.loads(listed.stdout) == [], "a bad file writes nothing"


def test_cypher_run_reports_failing_statement(cli_settings: Neo4jSettings, tmp_path: Path) -> None:
    script = tmp_path / "broken.cypher"
    script.write_text("// a comment\nRETURN 1;\n\nRETURN nonsense(;\nRETURN 3;\n")
    proc = run_cli_on(cli_settings, "cypher", "run", str(script))
    assert proc.returncode == 2, proc.stderr
    [line] = proc.stderr.splitlines()
    assert line.startswith(f"error: {script}:4: statement 2 of 3 failed on the server: ")
    assert "Neo.ClientError.Statement.SyntaxError" in line


def test_unreachable_neo4j_exits_2_with_one_line() -> None:
    """The installed entry point, in a new process: one line on stderr, no driver log lines, no traceback."""
    env_settings = Neo4jSettings("bolt://127.0.0.1:1", "neo4j", "x", None)
    proc = run_installed("skills", "list", "--tenant", "t", env=neo4j_env(env_settings))
    assert proc.returncode == 2
    assert proc.stderr == (
        "error: cannot connect to bolt://127.0.0.1:1: connection refused; is Neo4j running? "
        "Start it, or check the server address.\n"
    )
