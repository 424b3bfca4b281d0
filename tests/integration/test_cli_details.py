"""The operator CLI's details, as an operator scripting it sees them."""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path

from tests._cli import run_cli_on
from tests.conftest import Neo4jSettings


def _seed(settings: Neo4jSettings, tmp_path: Path, tenant: str, body: str, *extra: str) -> dict[str, object]:
    path = tmp_path / f"{uuid.uuid4().hex}.yaml"
    path.write_text(f"tenant: {tenant}\n" + body, encoding="utf-8")
    proc = run_cli_on(settings, "seed", str(path), "--json", *extra)
    assert proc.returncode == 0, proc.stderr
    [result] = json.loads(proc.stdout)
    return result  # type: ignore[no-any-return]


SKILLS = "skills:\n" + "".join(
    f"  - {{label: Rule {i}, identifier: r{i}, steps: [t{i}], source_tag: 'authored:x', precondition: [p{i}]}}\n"
    for i in range(12))


def test_a_seed_file_lists_in_file_order_and_json_everywhere(neo4j_settings: Neo4jSettings, tmp_path: Path) -> None:
    tenant = f"cli-{uuid.uuid4().hex}"
    seeded = _seed(neo4j_settings, tmp_path, tenant, SKILLS)
    assert len(seeded["skills"]) == 12  # type: ignore[arg-type]
    listed = json.loads(run_cli_on(neo4j_settings, "skills", "list", "--tenant", tenant, "--json").stdout)
    assert [r["label"] for r in listed] == [f"Rule {i}" for i in range(12)]
    assert {"tenant_id", "namespace", "created_at", "guards"} <= set(listed[0])
    text = run_cli_on(neo4j_settings, "skills", "list", "--tenant", tenant).stdout
    assert 'precondition=["p0"]' in text and "guards=t0" in text

    skill_id = listed[0]["id"]
    retracted = run_cli_on(neo4j_settings, "retract", skill_id, "--tenant", tenant)
    assert retracted.stdout.strip() == f"retracted {skill_id}"
    hidden = json.loads(run_cli_on(neo4j_settings, "skills", "list", "--tenant", tenant, "--json").stdout)
    assert skill_id not in {r["id"] for r in hidden}
    shown = run_cli_on(neo4j_settings, "skills", "list", "--tenant", tenant, "--retracted").stdout
    assert f"{skill_id}" in shown and "[retracted]" in shown
    restored = json.loads(run_cli_on(neo4j_settings, "restore", skill_id, "--tenant", tenant, "--json").stdout)
    assert restored == {"action": "restore", "node_id": skill_id, "tenant_id": tenant, "namespace": None}


def test_a_staged_preview_shows_the_catalog_after_publish(neo4j_settings: Neo4jSettings, tmp_path: Path) -> None:
    tenant = f"cli-{uuid.uuid4().hex}"
    _seed(neo4j_settings, tmp_path, tenant, "skills:\n  - {label: Old, identifier: r, steps: [t], "
                                            "source_tag: 'authored:x', precondition: [a]}\n")
    _seed(neo4j_settings, tmp_path, tenant, "skills:\n  - {label: New, identifier: r, steps: [t], "
                                            "source_tag: 'authored:x', precondition: [b]}\n"
                                            "triggers:\n  - {condition: c, task: staged task}\n", "--write-id", "w1")
    preview = json.loads(run_cli_on(neo4j_settings, "skills", "list", "--tenant", tenant, "--write-id", "w1",
                              "--json").stdout)
    assert [r["label"] for r in preview] == ["New"]
    live = json.loads(run_cli_on(neo4j_settings, "skills", "list", "--tenant", tenant, "--json").stdout)
    assert [r["label"] for r in live] == ["Old"]
    staged = json.loads(run_cli_on(neo4j_settings, "triggers", "list", "--tenant", tenant, "--write-id", "w1",
                             "--json").stdout)
    assert [t["task"] for t in staged] == ["staged task"]

    typo = run_cli_on(neo4j_settings, "publish", "w-typo", "--tenant", tenant)
    assert typo.returncode == 1 and "nothing is staged under write id 'w-typo'" in typo.stderr
    published = json.loads(run_cli_on(neo4j_settings, "publish", "w1", "--tenant", tenant, "--json").stdout)
    assert published["nodes"] == 2
    again = run_cli_on(neo4j_settings, "discard", "w1", "--tenant", tenant)
    assert again.returncode == 1  # already published: nothing left to discard


def test_cypher_run_prints_the_rows_a_statement_returns(neo4j_settings: Neo4jSettings, tmp_path: Path) -> None:
    script = tmp_path / "rows.cypher"
    script.write_text("UNWIND range(1, 3) AS n RETURN n, 'x' + n AS label;\n", encoding="utf-8")
    proc = run_cli_on(neo4j_settings, "cypher", "run", str(script))
    assert proc.returncode == 0, proc.stderr
    assert '  {"n": 1, "label": "x1"}' in proc.stdout and '  {"n": 3, "label": "x3"}' in proc.stdout


def test_cypher_run_stamps_what_the_script_seeded(neo4j_settings: Neo4jSettings, tmp_path: Path) -> None:
    """A plain-Cypher reminder run through the CLI is on the keyed read path at once: doctor has nothing to say."""
    tenant = f"cli-{uuid.uuid4().hex}"
    script = tmp_path / "reminder.cypher"
    script.write_text(
        f"MERGE (t:Trigger {{tenant_id: '{tenant}', id: '{tenant}-r1'}}) SET t.namespace = 'u1', t.condition = 'c', "
        "t.task = 'Remind.', t.status = 'pending', t.created_at = datetime();\n", encoding="utf-8")
    wipe = tmp_path / "wipe.cypher"
    wipe.write_text(f"MATCH (n:Trigger {{tenant_id: '{tenant}'}}) DETACH DELETE n;\n", encoding="utf-8")
    try:
        proc = run_cli_on(neo4j_settings, "cypher", "run", str(script))
        assert proc.returncode == 0, proc.stderr
        assert re.search(r"stamped \d+ library key\(s\)", proc.stdout)  # at least its scope key and tenant token
        listed = run_cli_on(neo4j_settings, "doctor", "--tenant", tenant, "--json")
        findings = json.loads(listed.stdout)
        assert not [f for f in findings if f["check"] in ("trigger_keys", "tenant_tokens")], findings
    finally:
        assert run_cli_on(neo4j_settings, "cypher", "run", str(wipe)).returncode == 0
