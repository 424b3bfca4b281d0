"""Every tool name the providers accept can be guarded; anything else is refused, or blocks, or is reported.

A tool name is 1 to 128 ASCII letters, digits, ``_``, ``-`` or ``.`` (OpenAI
and Anthropic: ``[a-zA-Z0-9_-]``, 64 and 128 characters; MCP adds ``.``, 128
characters). For any name, written as a skill's action and as its
precondition, the write is either refused with a ``ValidationError`` naming
the field and the character set, or the rule is enforced: the guarded call is
blocked without the precondition and allowed after it. Never accepted and
unenforced. The same holds for a skill read from graph nodes (hand-seeded) and
for duck-typed metadata, where what cannot be enforced blocks or is a lint ERROR.

The second half: a misconfigured state predicate (unknown op, no value, a
non-list ``in``, a bad path) keeps its skill blocking its action, with a
message telling the model that a misconfigured rule blocks the tool.
"""

from __future__ import annotations

import re
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from symfonic_graph.errors import ValidationError
from symfonic_graph.gate import explain_tool_call
from symfonic_graph.memory.layers.procedural import skill_row
from symfonic_graph.models import read_skill
from symfonic_graph.rules._messages import History
from symfonic_graph.rules.lint import lint_rules
from symfonic_graph.rules.preflight import preflight_lines
from symfonic_graph.rules.ruleset import RuleSet
from symfonic_graph.shape.readings import node_problem, precondition_from_node
from symfonic_graph.shape.records import TOOL_NAME_RULE, bare_identifier, is_tool_name
from symfonic_graph.shape.scope import MemoryScope

# The test's own reading of the providers' character set (not the library's).
PROVIDER_NAME = re.compile(r"[A-Za-z0-9_.-]{1,128}")
SCOPE = MemoryScope("acme")
MISCONFIGURED = "a misconfigured rule blocks this tool; ask an operator"

provider_names = st.from_regex(PROVIDER_NAME, fullmatch=True)
openai_names = st.from_regex(r"[A-Za-z0-9_-]{1,64}", fullmatch=True)
look_alikes = st.sampled_from(["\u2010", "\u2011", "\u2212", "\u0430", "\u0435", "\uff41", "\u00a0", "\u200b",
                               "\u0131", "\u212a", "\u2024", "\uff0e"])  # hyphens, Cyrillic, fullwidth, dots
controls = st.sampled_from(["\x00", "\x07", "\x1b", "\x7f", "\n", "\t", "\r", "\x0b"])
specials = st.sampled_from([" ", ",", "/", ":", "`", "'", '"', "(", ")", "*", "@", "$", "\\", "!", "?"])


@st.composite
def near_misses(draw: st.DrawFn) -> str:
    """A provider name spoiled one way: an odd character inside, too long, or empty."""
    base = draw(provider_names)
    how = draw(st.sampled_from(["inside", "too-long", "empty", "blank"]))
    if how == "too-long":
        return base + "x" * (129 - len(base)) if len(base) < 129 else base
    if how == "empty":
        return ""
    if how == "blank":
        return draw(st.sampled_from([" ", "\t", "  \n "]))
    odd = draw(st.one_of(look_alikes, controls, specials))
    at = draw(st.integers(0, len(base)))
    spoiled = base[:at] + odd + base[at:]
    return spoiled if spoiled.strip() == spoiled else base[:1] + odd + base[1:] + "z"


names = st.one_of(provider_names, openai_names, near_misses(),
                  st.sampled_from(["issue-refund", "verify-identity", "mcp.orders.lookup", "2fa_check", "-", ".",
                                   "a" * 128, "a" * 129, "issue refund", "Apologise.", "get_status(id=<x>)"]))


def _guarded(name: str) -> str:
    """The name a provider would call, by the test's own reading of a reference (blanks, argument list)."""
    return re.sub(r"\s*\(.*\)$", "", name.strip())


def _written(action: str, precondition: Any) -> Any:
    """The skill the library writes for this spec, read back through the one read model; or the error."""
    spec = {"label": "Refunds", "steps": ["refund"], "source_tag": "authored:t", "action_tool": action,
            "precondition": [precondition]}
    row = skill_row(SCOPE, spec)
    props = {k: row[k] for k in ("id", "tenant_id", "namespace", "label", "identifier", "steps", "action_tool",
                                 "context", "source", "status")}
    reading = read_skill({"skill": {**props, "active": True}, "preconditions": row["preconditions"]})
    assert reading.skill is not None, reading.problems
    return reading.skill


def _enforced(skill: Any, action: str, pre: str) -> None:
    """Blocked without ``pre``, allowed after it, rendered with the names as written."""
    rules = RuleSet([skill])
    blocked = explain_tool_call(rules, action)
    assert blocked.verdict == "blocked", (action, pre)
    assert (blocked.content() or "").startswith(f"Missing precondition: call {pre} before {action} (skill: Refunds).")
    assert explain_tool_call(rules, action, called=[pre]).verdict == "allowed", (action, pre)
    assert explain_tool_call(rules, action, called=[pre + "x"]).verdict == "blocked"
    assert preflight_lines(rules) == [f"- YOU MUST call `{pre}` BEFORE calling `{action}` (skill: Refunds)."]


def _refused(info: pytest.ExceptionInfo[ValidationError], field: str) -> None:
    assert info.value.field == field
    assert TOOL_NAME_RULE in info.value.problem or "reads both as a tool name and as a sentence" in info.value.problem


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(names, names, st.sampled_from(["tool", "any", "string"]))
def test_a_written_name_is_refused_or_enforced_never_accepted_and_unenforced(action: str, pre: str, form: str) -> None:
    entry: Any = {"tool": pre} if form == "tool" else {"any": [pre]} if form == "any" else pre
    field = {"tool": "precondition[0].tool", "any": "precondition[0].any[0]", "string": "precondition[0]"}[form]
    try:
        skill = _written(action, entry)
    except ValidationError as exc:
        info = pytest.ExceptionInfo.from_exc_info((type(exc), exc, exc.__traceback__))
        if exc.field == "action_tool":
            assert not PROVIDER_NAME.fullmatch(_guarded(action)), action  # a provider name is never refused
            _refused(info, "action_tool")
        else:
            assert exc.field == field
            if form == "string" and not pre.strip():
                assert info.value.problem == "must not be empty"  # an empty entry is neither tool nor advice
                return
            if form == "string":  # only an ambiguous reference: a provider name ending in "."
                assert PROVIDER_NAME.fullmatch(pre.strip()) and pre.strip().endswith("."), pre
            else:
                assert not PROVIDER_NAME.fullmatch(_guarded(pre)), pre
            _refused(info, field)
        return
    guarded, required = _guarded(action), _guarded(pre)
    assert PROVIDER_NAME.fullmatch(guarded), action  # accepted: the action is a provider name
    if form == "string" and not PROVIDER_NAME.fullmatch(required):
        assert [e.kind for e in skill.preconditions] == ["text"]  # a string with another character is advice
        assert explain_tool_call(RuleSet([skill]), guarded).verdict == "allowed"
        return
    assert PROVIDER_NAME.fullmatch(required), pre
    if required == guarded:
        return  # a rule naming its own action could never be met: ignored (documented)
    _enforced(skill, guarded, required)


@settings(max_examples=300, deadline=None)
@given(names, names, st.sampled_from(["tool", "any"]))
def test_a_hand_seeded_name_is_enforced_or_blocks_and_is_reported(action: str, pre: str, kind: str) -> None:
    node = {"kind": kind, "position": 0, **({"tool": pre} if kind == "tool" else {"tools": [pre]})}
    reading = read_skill({"skill": {"id": "s1", "tenant_id": "acme", "label": "Refunds", "steps": [],
                                    "action_tool": action, "status": "approved", "active": True},
                          "preconditions": [node]})
    skill = reading.skill
    assert skill is not None
    guarded, required = _guarded(action), _guarded(pre)
    rules = RuleSet([skill])
    if not guarded:
        assert rules.rules[0].action_tool is None  # no action_tool and no steps: guards nothing (doctor says so)
        return
    if not PROVIDER_NAME.fullmatch(guarded):
        # the rule guards nothing: doctor and lint both say so, never silently
        assert rules.rules[0].action_tool is None
        assert any(p.startswith("action_tool:") and "is not a tool name" in p for p in reading.problems), action
        assert any(f.level == "ERROR" for f in lint_rules(rules, [guarded, required]))
        return
    if required == guarded:
        return
    if PROVIDER_NAME.fullmatch(required):
        _enforced(skill, guarded, required)
        assert not reading.problems
        return
    decision = explain_tool_call(rules, guarded, called=[pre, required])
    assert decision.verdict == "blocked"  # a precondition naming no tool blocks: never weaker than written
    assert MISCONFIGURED in (decision.content() or "")
    assert any("blocks its action" in p for p in reading.problems)
    assert [f.code for f in lint_rules(rules, [guarded, required])] == ["precondition_unenforceable"]


@settings(max_examples=300, deadline=None)
@given(names, names)
def test_duck_typed_metadata_is_enforced_or_reported(action: str, pre: str) -> None:
    skill = SimpleNamespace(id="s1", metadata={"label": "Refunds", "action_tool": action,
                                               "precondition": [{"tool": pre}]})
    rules = RuleSet([skill])
    guarded, required = _guarded(action), _guarded(pre)
    if not guarded:
        assert rules.rules[0].action_tool is None  # a blank action_tool is none (steps[0] would be guarded)
        return
    if not PROVIDER_NAME.fullmatch(guarded):
        assert any(f.code == "action_tool_not_a_tool_name" for f in lint_rules(rules, [guarded, required]))
        return
    if required == guarded:
        return
    if PROVIDER_NAME.fullmatch(required):
        _enforced(skill, guarded, required)
    else:
        assert explain_tool_call(rules, guarded, called=[pre, required]).verdict == "blocked"


@given(provider_names)
def test_the_library_reads_exactly_the_providers_names(name: str) -> None:
    assert is_tool_name(name) and bare_identifier(name) == name
    assert bare_identifier(f"  {name}(brand_id=<x>) ") == name


@given(near_misses())
def test_a_near_miss_is_no_tool_name(name: str) -> None:
    assert not is_tool_name(name)
    assert bare_identifier(name) is None or bare_identifier(name) == name.strip()  # only blanks around it


def test_the_gate_matches_a_call_name_as_a_reference() -> None:
    skill = SimpleNamespace(metadata={"label": "Refunds", "action_tool": "issue-refund",
                                      "precondition": ["verify-identity"]})
    rules = RuleSet([skill])
    assert explain_tool_call(rules, "issue-refund(order=1)").verdict == "blocked"
    assert explain_tool_call(rules, "issue_refund").verdict == "allowed"  # another tool


# --- misconfigured state predicates keep their skill blocking ---------------------------------------

unknown_ops = st.one_of(st.sampled_from(["equals", "EQ", "gt", "==", "contains", "", " eq"]),
                        st.text(max_size=6).filter(lambda op: op not in ("eq", "neq", "in", "exists")))
values = st.one_of(st.none(), st.integers(), st.text(max_size=4), st.lists(st.integers(), max_size=2))


@st.composite
def misconfigured(draw: st.DrawFn) -> dict[str, Any]:
    """A ``kind: 'state'`` node as someone might hand-seed it, wrong in one way."""
    how = draw(st.sampled_from(["op", "no-value", "in-scalar", "path-type", "path-empty", "path-segments"]))
    node: dict[str, Any] = {"kind": "state", "path": "channel", "op": "eq", "value": "web"}
    if how == "op":
        node["op"] = draw(st.one_of(unknown_ops, st.integers(), st.none(), st.lists(st.just("eq"), max_size=1)))
    elif how == "no-value":
        node.update(op=draw(st.sampled_from(["eq", "neq", "in"])), value=None)
    elif how == "in-scalar":
        node.update(op="in", value=draw(st.one_of(st.integers(), st.text(max_size=5), st.booleans())))
    elif how == "path-type":
        node["path"] = draw(st.one_of(st.integers(), st.none(), st.lists(st.just("channel"), max_size=2)))
    elif how == "path-empty":
        node["path"] = ""
    else:
        node["path"] = draw(st.sampled_from(["a..b", ".channel", "channel.", "."]))
    if draw(st.booleans()):
        node["if_missing"] = "apply"
    return node


states = st.one_of(st.none(), st.fixed_dictionaries({}, optional={"channel": values, "a": values}))


@settings(max_examples=300, deadline=None)
@given(misconfigured(), states, st.booleans())
def test_a_misconfigured_state_predicate_keeps_the_skill_blocking(node: dict[str, Any], state: Any,
                                                                  called: bool) -> None:
    reading = read_skill({"skill": {"id": "s1", "tenant_id": "acme", "label": "Refunds", "steps": [],
                                    "action_tool": "issue_refund", "status": "approved", "active": True},
                          "preconditions": [{"kind": "tool", "tool": "lookup_order", "position": 0},
                                            {**node, "position": 1}]})
    assert reading.skill is not None
    rules = RuleSet([reading.skill])
    decision = explain_tool_call(rules, "issue_refund", state=state, called=["lookup_order"] if called else [])
    assert decision.verdict == "blocked", node  # the skill applies whatever the state, and never runs
    assert MISCONFIGURED in (decision.content() or "")
    assert "retry" not in (decision.content() or "").replace("Do not retry", "")  # no loop of retries
    # doctor's words (node_problem) say what happens
    problem = node_problem(precondition_from_node(node))
    assert problem is not None and "blocks its action" in problem and "never holds" not in problem
    assert any("blocks its action" in p for p in reading.problems)
    [finding] = lint_rules(rules, ["issue_refund", "lookup_order"])
    assert finding.level == "ERROR" and finding.code == "precondition_unenforceable"
    # the pre-flight block still shows the rule that can be met
    assert preflight_lines(rules) == ["- YOU MUST call `lookup_order` BEFORE calling `issue_refund` (skill: Refunds)."]


@settings(max_examples=200, deadline=None)
@given(misconfigured(), states)
def test_duck_typed_misconfigured_predicates_block_too(node: dict[str, Any], state: Any) -> None:
    predicate = {k: v for k, v in node.items() if k != "kind" and not (k == "value" and v is None)}
    skill = SimpleNamespace(metadata={"label": "Refunds", "action_tool": "issue_refund",
                                      "precondition": ["lookup_order", {"state": predicate}]})
    for skills in ([skill], RuleSet([skill])):
        decision = explain_tool_call(skills, "issue_refund", state=state, called=["lookup_order"])
        assert decision.verdict == "blocked", predicate


def test_a_well_formed_predicate_still_decides() -> None:
    node = {"kind": "state", "path": "channel", "op": "eq", "value": "web", "position": 1}
    reading = read_skill({"skill": {"id": "s1", "tenant_id": "acme", "label": "Refunds", "steps": [],
                                    "action_tool": "issue_refund", "status": "approved", "active": True},
                          "preconditions": [{"kind": "tool", "tool": "lookup_order", "position": 0}, node]})
    rules = RuleSet([reading.skill])
    assert explain_tool_call(rules, "issue_refund", state={"channel": "phone"}).verdict == "allowed"  # not applied
    assert explain_tool_call(rules, "issue_refund", state={"channel": "web"}).verdict == "blocked"
    assert explain_tool_call(rules, "issue_refund", state={"channel": "web"}, called=["lookup_order"]).allowed
    assert History.of_names([]).results == ()
