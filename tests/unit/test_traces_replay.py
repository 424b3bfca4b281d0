"""load_traces streams JSON and JSONL with typed errors; replay runs the gate's own decision."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from symfonic_graph import ReplayReport, RuleReplay, Trace, load_traces, replay
from symfonic_graph.errors import ValidationError
from tests._skills import FakeSkill, skill

AI_LOGIN_BUY = [
    {"role": "assistant", "content": "", "tool_calls": [{"id": "1", "name": "login", "args": {}}]},
    {"role": "tool", "tool_call_id": "1", "content": "ok"},
    {"role": "assistant", "content": "", "tool_calls": [{"id": "2", "name": "buy", "args": {}}]},
    {"role": "tool", "tool_call_id": "2", "content": "ok"},
]
AI_BUY = AI_LOGIN_BUY[2:]


# --- load_traces ------------------------------------------------------------------


def test_jsonl_streams_one_trace_per_line(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(json.dumps({"id": f"t{i}", "messages": AI_BUY, "outcome": "success"})
                              for i in range(3)) + "\n\n")
    traces = load_traces(path)
    first = next(traces)
    assert first == Trace("t0", AI_BUY, "success")
    assert [t.id for t in traces] == ["t1", "t2"]


def test_json_list_of_traces_and_bare_list_of_messages(tmp_path: Path) -> None:
    listed = tmp_path / "list.json"
    listed.write_text(json.dumps([{"id": "a", "messages": AI_BUY}, {"messages": AI_LOGIN_BUY, "outcome": "failure"}],
                                 indent=2))
    assert [(t.id, len(t.messages), t.outcome) for t in load_traces(listed)] == [("a", 2, None), ("2", 4, "failure")]
    bare = tmp_path / "one.json"
    bare.write_text(json.dumps(AI_LOGIN_BUY))
    assert [(t.id, len(t.messages)) for t in load_traces(bare)] == [("one", 4)]
    empty = tmp_path / "empty.json"
    empty.write_text("  ")
    assert list(load_traces(empty)) == []


def test_json_list_is_read_in_chunks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("symfonic_graph.learning.traces._CHUNK", 7)  # entries straddle many chunks
    path = tmp_path / "list.json"
    entries = [{"id": f"t{i}", "messages": AI_LOGIN_BUY, "outcome": "success"} for i in range(20)]
    path.write_text(json.dumps(entries))
    assert [t.id for t in load_traces(path)] == [f"t{i}" for i in range(20)]
    broken = json.dumps(entries[:3], indent=1).replace('"outcome": "success"', '"outcome": "success",,', 1)
    path.write_text(broken + "\n" * 100 + " " * 10_000)
    with pytest.raises(ValidationError, match=r"line 2: not valid JSON \(Expecting property name"):
        list(load_traces(path))


@pytest.mark.parametrize(("name", "text", "message"), [
    ("t.jsonl", '{"id": "a", "messages": []}\n' * 6 + '{"id": "b", "messages": {}}\n',
     "t.jsonl: line 7: messages: must be a list"),
    ("t.jsonl", '{"id": "a", "messages": [], "outcome": "ok"}\n', "line 1: outcome: must be"),
    ("t.jsonl", '{"id": "a", "messages": [1]}\n', "line 1: messages[0]: must be an object"),
    ("t.jsonl", '{"id": "a", "messages": [}\n', "line 1: not valid JSON"),
    ("t.jsonl", '{"id": "a", "msgs": []}\n', "line 1: msgs: unknown field"),
    ("t.json", '[{"id": "a", "messages": []},\n {"id": 3.5, "messages": []}]', "t.json: line 2: id: must be"),
    ("t.json", '[{"id": "a", "messages": []}', "not closed"),
    ("t.json", '"x"', "must hold a list"),
])
def test_malformed_entries_name_the_file_and_entry(tmp_path: Path, name: str, text: str, message: str) -> None:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(ValidationError, match=message.replace("[", r"\[").replace("]", r"\]")) as info:
        list(load_traces(path))
    assert str(path) in str(info.value)


@pytest.mark.parametrize("name", ["deep.jsonl", "deep.json"])
def test_deep_nesting_is_one_typed_error(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    deep = "[" * 100_000 + "]" * 100_000
    path.write_text('{"id": "a", "messages": ' + deep + "}\n" if name.endswith("l") else "[" + deep + "]")
    with pytest.raises(ValidationError, match="nested too deeply"):
        list(load_traces(path))


def test_missing_file_is_a_typed_error(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="cannot read"):
        list(load_traces(tmp_path / "nope.jsonl"))


# --- replay -----------------------------------------------------------------------


def _rule(action: str, pre: Any, id: str, **meta: Any) -> FakeSkill:
    s = skill(action, pre, label=id.upper(), id=id)
    s.metadata.update(meta)
    return s


def test_replay_counts_checked_blocked_and_trace_ids() -> None:
    skills = [_rule("buy", ["login"], "r1"), _rule("look", ["x"], "r2"), skill(None, ["a"], id="no-action")]
    traces = [Trace("ok", AI_LOGIN_BUY), Trace("bad1", AI_BUY), Trace("bad2", AI_BUY + AI_BUY)]
    report = replay(traces, skills)
    assert report == ReplayReport(3, [
        RuleReplay("r1", "R1", "buy", "enforce", 4, 3, ("bad1", "bad2"), None, None, 3),
        RuleReplay("r2", "R2", "look", "enforce", 0, 0, (), None, None),
    ])


def test_replay_splits_blocks_by_outcome() -> None:
    traces = [Trace("s", AI_BUY, "success"), Trace("f", AI_BUY, "failure"), Trace("f2", AI_BUY, "failure"),
              Trace("n", AI_BUY, None)]
    [r] = replay(traces, [_rule("buy", ["login"], "r1")]).rules
    assert (r.blocked, r.blocked_in_success, r.blocked_in_failure) == (4, 1, 2)


def test_only_the_first_failing_rule_blocks_a_call() -> None:
    skills = [_rule("buy", ["login"], "first"), _rule("buy", ["pay"], "second")]
    first, second = replay([Trace("t", AI_BUY)], skills).rules
    assert (first.checked, first.blocked, second.checked, second.blocked) == (1, 1, 1, 0)


def test_shadow_rules_replay_like_enforced_ones(caplog: pytest.LogCaptureFixture) -> None:
    skills = [_rule("buy", ["login"], "sh", enforcement="shadow")]
    with caplog.at_level("INFO", logger="symfonic_graph"):
        [r] = replay([Trace("t", AI_BUY)], skills).rules
    assert (r.enforcement, r.blocked, r.trace_ids) == ("shadow", 1, ("t",))


def test_replay_reads_openai_shape_and_langchain_messages() -> None:
    openai = [
        {"role": "user", "content": "buy"},
        {"role": "assistant", "content": None,
         "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "login", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "ok"},
        {"role": "assistant", "content": None,
         "tool_calls": [{"id": "c2", "type": "function", "function": {"name": "buy", "arguments": "{\"item\": 1}"}}]},
        {"role": "tool", "tool_call_id": "c2", "content": "ok"},
    ]
    lc = [HumanMessage("buy"), AIMessage("", tool_calls=[{"id": "c1", "name": "buy", "args": {}}]),
          ToolMessage("ok", tool_call_id="c1")]
    [r] = replay([Trace("oa", openai), Trace("lc", lc)], [_rule("buy", ["login"], "r1")]).rules
    assert (r.checked, r.blocked, r.trace_ids) == (2, 1, ("lc",))


def test_a_failed_precondition_call_blocks_as_in_the_gate() -> None:
    failed = [dict(AI_LOGIN_BUY[0]), {**AI_LOGIN_BUY[1], "status": "error"}, *AI_BUY]
    [r] = replay([Trace("t", failed)], [_rule("buy", ["login"], "r1")]).rules
    assert r.blocked == 1
    [r] = replay([Trace("t", failed)], [_rule("buy", ["login"], "r1")], count_failed_calls=True).rules
    assert r.blocked == 0


def test_state_predicates_see_the_replay_state() -> None:
    rule = _rule("buy", ["login", {"state": {"path": "plan", "op": "eq", "value": "pro"}}], "r1")
    assert replay([Trace("t", AI_BUY)], [rule]).rules[0].blocked == 0  # empty state: the rule does not apply
    assert replay([Trace("t", AI_BUY)], [rule], state={"plan": "pro"}).rules[0].blocked == 1


def test_cli_tables_name_every_figure() -> None:
    from symfonic_graph import MemoryScope
    from symfonic_graph.cli._rules_trust import mine_text, replay_text
    from symfonic_graph.learning.mining import MiningReport, mine

    report = replay([Trace("bad", AI_BUY, "failure")], [_rule("buy", ["login"], "r1")])
    text = replay_text(report, MemoryScope("acme"))
    assert "replayed 1 trace(s) against 1 rule(s)" in text
    assert text.splitlines()[-1].split() == ["R1", "r1", "buy", "enforce", "1", "1", "1", "0", "1", "bad"]
    mined = mine([Trace(f"t{i}", AI_LOGIN_BUY) for i in range(5)])
    assert mine_text(mined, None).splitlines()[-1].split() == [
        "login", "->", "buy", "5", "1.000", "-", "t0,", "t1,", "t2,", "t3,", "t4"]
    assert mine_text(MiningReport(), None).startswith("no rule")
