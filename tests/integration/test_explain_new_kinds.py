"""``symfonic-graph explain`` on facts, checks and limits, through a real Neo4j.

A skill whose check refuses the call, or whose expression cannot be evaluated,
is not "satisfied": the text says "not allowed" or "could not be evaluated",
``--json`` lists ``refused`` and ``errors`` per matched skill, and ``--now``
is the clock the expressions read (no zone: UTC).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from symfonic_graph import GraphMemoryStore, MemoryScope, ProceduralLayer
from tests._cli import CliResult, run_cli_on
from tests.conftest import Neo4jSettings

pytestmark = pytest.mark.anyio

REASONS = "The reason must be change of plan."
CLOSED = "Cancellations close on June 1st."
ECONOMY = "Only business reservations can be cancelled."
ONCE = "One cancellation per conversation."
PRECONDITION: list[Any] = [
    {"check": {"where": 'args.reason == "change_of_plan"', "message": REASONS}},
    {"check": {"where": 'now < timestamp("2026-06-01T00:00:00Z")', "message": CLOSED}},
]
BOOK_PRECONDITION: list[Any] = [
    {"fact": {"tool": "get_reservation", "same_args": ["reservation_id"], "where": 'result.cabin == "business"',
              "message": ECONOMY}},
    {"limit": {"max_calls": 1, "message": ONCE}},
]
BEFORE = "2026-05-31T23:59:59"
AFTER = "2026-06-01T00:00:00"


@pytest.fixture
async def seeded(store: GraphMemoryStore, scope: MemoryScope, forget: list[str]) -> MemoryScope:
    layer = ProceduralLayer(store)
    await layer.seed_authored_skill(scope, label="Cancellations", steps=["cancel"], source_tag="authored:t",
                                    action_tool="cancel", precondition=PRECONDITION, identifier="cancellations")
    await layer.seed_authored_skill(scope, label="Upgrades", steps=["upgrade"], source_tag="authored:t",
                                    action_tool="upgrade", precondition=BOOK_PRECONDITION, identifier="upgrades")
    return scope


def _explain(settings: Neo4jSettings, scope: MemoryScope, tool: str, *extra: str) -> CliResult:
    return run_cli_on(settings, "explain", "--tenant", scope.tenant_id, "--tool", tool, *extra)


def _matched_line(text: str) -> str:
    [line] = [line for line in text.splitlines() if line.startswith("matched skill")]
    return line


async def test_a_refused_call_reads_not_allowed_in_text_and_json(
    neo4j_settings: Neo4jSettings, seeded: MemoryScope
) -> None:
    args = ("--args", '{"reason": "weather"}', "--now", BEFORE)
    text = _explain(neo4j_settings, seeded, "cancel", *args)
    assert text.returncode == 0, text.stderr
    line = _matched_line(text.stdout)
    assert "satisfied" not in line, line
    assert line.endswith(f"-> not allowed: {REASONS}"), line
    assert "verdict: blocked" in text.stdout
    assert "error returned to the model: Not allowed: " + REASONS in text.stdout

    data = json.loads(_explain(neo4j_settings, seeded, "cancel", *args, "--json").stdout)
    [matched] = data["matched"]
    assert (matched["missing"], matched["refused"], matched["errors"]) == ([], [REASONS], [])
    assert data["verdict"] == "blocked"


async def test_a_rule_that_cannot_be_evaluated_says_so(neo4j_settings: Neo4jSettings, seeded: MemoryScope) -> None:
    text = _explain(neo4j_settings, seeded, "cancel", "--args", "{}", "--now", BEFORE)
    assert text.returncode == 0, text.stderr
    line = _matched_line(text.stdout)
    assert "-> could not be evaluated: " in line and "reason" in line, line
    assert "satisfied" not in line and "not allowed" not in line, line

    data = json.loads(_explain(neo4j_settings, seeded, "cancel", "--args", "{}", "--now", BEFORE, "--json").stdout)
    [matched] = data["matched"]
    assert matched["refused"] == []
    [error] = matched["errors"]
    assert "could not be evaluated" in error and "reason" in error
    assert data["content"].startswith("Not allowed: a rule could not be evaluated")


@pytest.mark.parametrize(("now", "refused"), [
    (BEFORE, []),                          # zone-less: UTC, one second before the close
    (AFTER, [CLOSED]),                     # zone-less: UTC, the close itself
    ("2026-06-01T01:30:00+02:00", []),     # 23:30 UTC the day before
    ("2026-05-31T20:00:00-04:00", [CLOSED]),  # midnight UTC
])
async def test_now_is_the_clock_the_checks_read(
    neo4j_settings: Neo4jSettings, seeded: MemoryScope, now: str, refused: list[str]
) -> None:
    done = _explain(neo4j_settings, seeded, "cancel", "--args", '{"reason": "change_of_plan"}', "--now", now, "--json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["matched"][0]["refused"] == refused
    assert data["verdict"] == ("blocked" if refused else "allowed")


async def test_a_bad_now_is_refused_naming_the_flag(neo4j_settings: Neo4jSettings, seeded: MemoryScope) -> None:
    done = _explain(neo4j_settings, seeded, "cancel", "--args", '{"reason": "change_of_plan"}', "--now", "June 1st")
    assert done.returncode != 0
    assert "--now" in done.stderr and "ISO timestamp" in done.stderr and "June 1st" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    assert done.stdout == ""


async def test_facts_and_limits_over_the_conversation(
    neo4j_settings: Neo4jSettings, seeded: MemoryScope, tmp_path: Path
) -> None:
    def conversation(cabin: str, *, upgraded: bool) -> Path:
        messages: list[dict[str, Any]] = [{"role": "user", "content": "upgrade R1 please"}]
        calls = [("get_reservation", {"reservation_id": "R1"}, {"reservation_id": "R1", "cabin": cabin})]
        if upgraded:
            calls.append(("upgrade", {"reservation_id": "R0"}, {"status": "upgraded"}))
        for i, (name, call_args, result) in enumerate(calls):
            messages.append({"role": "assistant", "content": "",
                             "tool_calls": [{"id": f"c{i}", "name": name, "args": call_args}]})
            messages.append({"role": "tool", "tool_call_id": f"c{i}", "name": name, "content": json.dumps(result)})
        path = tmp_path / f"{cabin}-{upgraded}.json"
        path.write_text(json.dumps(messages), "utf-8")
        return path

    def matched(path: Path) -> dict[str, Any]:
        done = _explain(neo4j_settings, seeded, "upgrade", "--messages", str(path), "--args",
                        '{"reservation_id": "R1"}', "--json")
        assert done.returncode == 0, done.stderr
        [check] = json.loads(done.stdout)["matched"]
        return {key: check[key] for key in ("missing", "refused", "errors")}

    assert matched(conversation("business", upgraded=False)) == {"missing": [], "refused": [], "errors": []}
    assert matched(conversation("economy", upgraded=False)) == {"missing": [], "refused": [ECONOMY], "errors": []}
    assert matched(conversation("business", upgraded=True)) == {"missing": [], "refused": [ONCE], "errors": []}

    text = _explain(neo4j_settings, seeded, "upgrade", "--messages", str(conversation("economy", upgraded=True)),
                    "--args", '{"reservation_id": "R1"}')
    assert _matched_line(text.stdout).endswith(f"-> not allowed: {ECONOMY}; {ONCE}"), text.stdout
