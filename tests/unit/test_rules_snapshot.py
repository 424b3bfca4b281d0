"""The local rules snapshot and the gate's ``strict="guarded"`` policy, without a database.

A snapshot file reads back the very skills it was written from (generated
skills of every precondition kind); a file that is no snapshot of the scope
reads as absent, with a WARNING; and during an outage ``strict="guarded"``
refuses exactly the calls of guarded tools (generated calls and guarded sets).
"""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from symfonic_graph.errors import StoreUnavailableError, ValidationError
from symfonic_graph.memory._snapshot import SnapshotDir, guarded_by, name_guarded
from symfonic_graph.rules.events import ToolCallRef
from symfonic_graph.rules.gate import run_gate, strict_policy
from symfonic_graph.rules.ruleset import RuleSet
from symfonic_graph.shape.models import read_skills
from symfonic_graph.shape.scope import MemoryScope

TOOLS = ["get_reservation", "cancel_reservation", "refund", "mcp.orders.lookup", "issue-refund"]
SCOPES = [MemoryScope("acme"), MemoryScope("acme", "user-7"), MemoryScope("acme-2"), MemoryScope("a/../b", "x y")]

values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3), max_leaves=6)
preconditions = st.one_of(
    st.builds(lambda tool, same, within: {"kind": "tool", "tool": tool, "same_args": same, "within": within},
              st.sampled_from(TOOLS), st.lists(st.sampled_from(["id", "order_id"]), max_size=2),
              st.sampled_from([None, "conversation", "user_turn"])),
    st.builds(lambda tools: {"kind": "any", "tools": tools}, st.lists(st.sampled_from(TOOLS), min_size=1, max_size=3)),
    st.builds(lambda op, value, missing: {"kind": "state", "path": "channel", "op": op, "value": value,
                                          "if_missing": missing},
              st.sampled_from(["eq", "ne", "in", "exists", "gt"]), values, st.sampled_from([None, "apply", "skip"])),
    st.builds(lambda text: {"kind": "text", "text": text}, st.text(max_size=20)),
    st.just({"kind": "no_such_kind"}),
)
skill_rows = st.builds(
    lambda i, action, pres, enforcement, created, namespace: {
        "skill": {"id": f"s{i}", "tenant_id": "acme", "namespace": namespace, "status": "approved",
                  "label": f"Skill {i} é", "steps": [action], "action_tool": action, "enforcement": enforcement,
                  "created_at": created},
        "preconditions": [{"position": n, **p} for n, p in enumerate(pres)],
    },
    st.integers(0, 10**6), st.sampled_from(TOOLS), st.lists(preconditions, max_size=4),
    st.sampled_from([None, "enforce", "shadow"]),
    st.sampled_from([None, "2026-01-01T00:00:00+01:00[Europe/Paris]", "2025-06-30T12:00:00.123456Z"]),
    st.sampled_from([None, "user-7"]),
)


def _dumps(rules: RuleSet) -> str:
    return json.dumps([skill.model_dump(mode="json") for skill in rules])  # keeps 1, 1.0 and true apart


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.lists(skill_rows, max_size=6), scope=st.sampled_from(SCOPES), version=st.none() | st.integers(0, 99))
def test_a_snapshot_reads_back_the_skills_it_was_written_from(
    tmp_path: Path, rows: list[dict[str, Any]], scope: MemoryScope, version: int | None
) -> None:
    skills, _ = read_skills(rows)
    rules = RuleSet(skills, pack=True)
    folder = SnapshotDir(tmp_path / "snapshots")
    assert folder.save(scope, version, rules, read_at=1234.5)
    saved = folder.load(scope)
    assert saved is not None and saved.skills is not None
    assert (saved.version, saved.read_at, saved.guarded) == (version, 1234.5, guarded_by(rules))
    again = RuleSet(saved.skills, pack=True)
    assert again == rules and _dumps(again) == _dumps(rules)
    assert [r.required for r in again.rules] == [r.required for r in rules.rules]
    assert not [p for p in folder.path.iterdir() if p.name.endswith(".tmp")]  # the temp file was replaced


def test_each_scope_has_its_own_file_named_by_a_hash(tmp_path: Path) -> None:
    folder = SnapshotDir(tmp_path)
    names = {folder.file_of(scope).name for scope in SCOPES}
    assert len(names) == len(SCOPES)
    assert all(name.startswith("rules-") and name.endswith(".json") and "/" not in name for name in names)
    assert folder.load(MemoryScope("acme")) is None  # absent: None, no file created


def test_guarded_names_the_enforced_action_tools_only() -> None:
    rows = [{"skill": {"id": "a", "tenant_id": "t", "status": "approved", "action_tool": "cancel_reservation"},
             "preconditions": [{"kind": "tool", "tool": "get_reservation", "position": 0}]},
            {"skill": {"id": "b", "tenant_id": "t", "status": "approved", "action_tool": "refund",
                       "enforcement": "shadow"}, "preconditions": []}]
    assert guarded_by(RuleSet(read_skills(rows)[0])) == {"cancel_reservation"}


def _written(tmp_path: Path) -> tuple[SnapshotDir, MemoryScope, Path]:
    rows = [{"skill": {"id": "a", "tenant_id": "acme", "status": "approved", "action_tool": "cancel_reservation"},
             "preconditions": [{"kind": "tool", "tool": "get_reservation", "position": 0}]}]
    folder, scope = SnapshotDir(tmp_path), MemoryScope("acme")
    assert folder.save(scope, 3, RuleSet(read_skills(rows)[0]), read_at=10.0)
    return folder, scope, folder.file_of(scope)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cut=st.integers(0, 10_000), noise=st.binary(max_size=64))
def test_a_corrupt_file_is_absent_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, cut: int, noise: bytes
) -> None:
    folder, scope, target = _written(tmp_path)
    text = target.read_bytes()
    corrupt = text[: cut % len(text)] + noise
    try:
        json.loads(corrupt)
        return  # still JSON by chance: covered by the cases below
    except ValueError:
        pass
    target.write_bytes(corrupt)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="symfonic_graph.turn"):
        assert folder.load(scope) is None
    assert "unreadable" in caplog.text and "treated as absent" in caplog.text


@pytest.mark.parametrize("change", [
    {"tenant_id": "other"}, {"namespace": "user-7"}, {"format": 2}, {"read_at": "yesterday"}, {"version": True},
    {"guarded": ["not a tool"]}, {"guarded": "cancel_reservation"}, {"skills": {}},
])
def test_a_file_that_is_no_snapshot_of_the_scope_is_absent_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, change: dict[str, Any]
) -> None:
    folder, scope, target = _written(tmp_path)
    target.write_text(json.dumps({**json.loads(target.read_text()), **change}))
    with caplog.at_level(logging.WARNING, logger="symfonic_graph.turn"):
        assert folder.load(scope) is None
    assert "treated as absent" in caplog.text


def test_a_skill_this_process_cannot_read_keeps_its_tool_guarded(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    folder, scope, target = _written(tmp_path)
    data = json.loads(target.read_text())
    data["skills"][0]["preconditions"][0] = {"kind": "clock_hour", "start": 9}  # a kind registered elsewhere
    target.write_text(json.dumps(data))
    with caplog.at_level(logging.WARNING, logger="symfonic_graph.turn"):
        saved = folder.load(scope)
    assert saved is not None and saved.skills is None and saved.guarded == {"cancel_reservation"}
    assert "cannot read" in caplog.text


def test_snapshot_dir_must_be_a_folder(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    for bad in (tmp_path / "file", "", 3, None):
        with pytest.raises(ValidationError, match="snapshot_dir"):
            SnapshotDir(bad)  # type: ignore[arg-type]


# --- the gate's outage policy ------------------------------------------------------


@pytest.mark.parametrize(("strict", "tools", "field"), [
    ("yes", (), "strict"), (1, (), "strict"), (None, (), "strict"), ("Guarded", (), "strict"),
    ("guarded", "cancel_reservation", "guarded_tools"), ("guarded", ["cancel reservation"], "guarded_tools[0]"),
    ("guarded", [3], "guarded_tools[0]"), (True, ["cancel_reservation"], "guarded_tools"),
    (False, ["cancel_reservation"], "guarded_tools"), ("guarded", None, "guarded_tools"),
])
def test_strict_and_guarded_tools_are_validated_loudly(strict: Any, tools: Any, field: str) -> None:
    with pytest.raises(ValidationError) as raised:
        strict_policy(strict, tools)
    assert raised.value.field == field


def _decide(error: StoreUnavailableError, names: list[str], **policy: Any) -> list[str]:
    async def lookup(state: object) -> list[Any]:
        raise error

    calls = [ToolCallRef(f"c{i}", name, {}) for i, name in enumerate(names)]
    decisions = asyncio.run(run_gate({"messages": []}, lookup, turn=(_no_history(), calls), **policy))
    return [d.verdict for d in decisions]


def _no_history() -> Any:
    from symfonic_graph.rules.events import History

    return History.of_names(())


@settings(max_examples=300, deadline=None)
@given(names=st.lists(st.sampled_from([*TOOLS, " refund ", "refund(id=1)"]), min_size=1, max_size=6),
       last=st.none() | st.frozensets(st.sampled_from(TOOLS)), extra=st.lists(st.sampled_from(TOOLS), max_size=3))
def test_guarded_refuses_exactly_the_guarded_tools_and_runs_the_others(
    names: list[str], last: frozenset[str] | None, extra: list[str]
) -> None:
    error = name_guarded(StoreUnavailableError("down"), last)
    guarded = (last or frozenset()) | set(extra)
    verdicts = _decide(error, names, strict="guarded", guarded_tools=extra)
    expected = ["store_unavailable" if name.strip().split("(")[0] in guarded else "allowed" for name in names]
    assert verdicts == expected
    assert _decide(error, names, strict=True) == ["store_unavailable"] * len(names)  # refuses all
    assert _decide(error, names) == []  # pass through: the documented open default
    # a lookup that is no TurnMemory raises the plain outage: only guarded_tools are known
    plain = _decide(StoreUnavailableError("down"), names, strict="guarded", guarded_tools=extra)
    assert plain == ["store_unavailable" if n.strip().split("(")[0] in set(extra) else "allowed" for n in names]


def test_guarded_without_anything_known_runs_every_call_and_says_so(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="symfonic_graph.gate"):
        verdicts = _decide(name_guarded(StoreUnavailableError("down"), None), ["cancel_reservation"], strict="guarded")
    assert verdicts == ["allowed"]
    assert "never seen, so only guarded_tools are refused" in caplog.text
