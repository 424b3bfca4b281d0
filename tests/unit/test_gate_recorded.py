"""The gate's decisions and the pre-flight texts over random catalogs are the recorded ones, byte for byte.

Random catalogs over every precondition kind (tool entries, any-of with
fact and check alternatives, state, fact, check, limit; hostile expressions,
values and results among them) and random conversations are decided through
the gate's two paths (``gate_decisions`` over the skills, ``run_gate`` over a
packed ``RuleSet`` with calls already in flight) and compared with the
digests of the outputs recorded in ``tests/unit/data/gate_recorded.json`` before the gate's
hot path was reworked for speed. A change that alters a verdict, an error
text, which requirement failed, or a pre-flight text fails here.

Recording again (only when a change of behaviour is intended):
``python -m tests.unit.test_gate_recorded --record``.
"""

from __future__ import annotations

import hashlib
import json
import random
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from symfonic_graph.rules._messages import read_conversation
from symfonic_graph.rules.gate import GateDecision, gate_decisions, run_gate
from symfonic_graph.rules.preflight import build_preflight_contribution, preflight_block
from symfonic_graph.rules.ruleset import RuleSet
from tests._skills import skill

RECORDED = Path(__file__).parent / "data" / "gate_recorded.json"
NOW = datetime(2024, 5, 15, 15, tzinfo=UTC)
CASES = 600
TOOLS = ["get_order", "lookup_customer", "verify", "quote", "refund", "cancel"]
ACTIONS = ["refund", "cancel", "quote"]
FIELDS = ["order_id", "amount", "customer_id", "note", "items", "when"]
WHERES = [
    'result.status == "delivered"', "result.verified == true", "result.items.size() > 1", "result == args.user_id",
    "result.nope == 1", "result.status", "call.order_id == args.order_id", "args.amount <= 500",
    "has(args.amount) && args.amount < 100", "size(args) > 1", 'state.channel == "web"',
    'state.tier == "gold" || args.amount < 50', 'timestamp("2024-05-15T10:00:00") < now',
    "timestamp(args.when) < now", "args.amount * 2", "args.items.all(i, i > 0)", "args.note == args.order_id",
    "args.amount <= 500 && args.amount > 0", 'has(result.status) && result.status != "cancelled"',
    "args.amount > 1 || state.tier == 'gold'", "now > timestamp(result.at)", "size(state) > 1",
]
SUMS = ["args.amount", "args.amount * 2", "args.note", "double(args.amount)", "args.items.size()"]
MESSAGES = [None, None, "Only delivered orders.", "At most 500.", "No"]
VALUES: list[Any] = [0, 1, 7, 120, 499, 501, 10_000, -3, 2.5, True, None, "7", "", "x" * 30, [1, 2], [], [0, -1],
                     {"a": 1}, "2024-05-15T10:00:00", "not a time", "2024-05-16T00:00:00Z"]
RESULTS: list[Any] = [
    {"status": "delivered", "verified": True, "items": [1, 2]}, {"status": "pending", "verified": False, "items": []},
    {"status": "cancelled"}, {"at": "2024-05-14T00:00:00"}, {"at": 5}, "u1", "Order not found", [1, 2], 42, None,
    {"status": 3, "verified": "yes"},
]


def _fact(r: random.Random) -> dict[str, Any]:
    body: dict[str, Any] = {"tool": r.choice(TOOLS)}
    if r.random() < 0.5:
        body["same_args"] = r.sample(["order_id", "customer_id"], r.randint(1, 2))
    if r.random() < 0.7:
        body["where"] = r.choice(WHERES)
    if r.random() < 0.2:
        body["latest"] = True
    if r.random() < 0.15:
        body["voided_by"] = [r.choice(TOOLS)]
    if r.random() < 0.2:
        body["within"] = "user_turn"
    if (message := r.choice(MESSAGES)) is not None:
        body["message"] = message
    return body


def _check(r: random.Random) -> dict[str, Any]:
    body: dict[str, Any] = {"where": r.choice(WHERES)}
    if (message := r.choice(MESSAGES)) is not None:
        body["message"] = message
    return body


def _limit(r: random.Random) -> dict[str, Any]:
    body: dict[str, Any] = {"per": r.choice(["conversation", "conversation", "namespace", "tenant"])}
    if r.random() < 0.5:
        body["max_calls"] = r.randint(0, 3)
    else:
        body["max_sum"], body["sum"] = r.choice([0, 100, 500, 1000]), r.choice(SUMS)
    if r.random() < 0.2:
        body["window"] = "1h"
    if (message := r.choice(MESSAGES)) is not None:
        body["message"] = message
    return body


def _entry(r: random.Random) -> Any:
    kind = r.randrange(10)
    if kind == 0:
        return r.choice(TOOLS)
    if kind == 1:
        return {"tool": r.choice(TOOLS), **({"same_args": ["order_id"]} if r.random() < 0.5 else {}),
                **({"within": "user_turn"} if r.random() < 0.3 else {})}
    if kind == 2:
        return {"any": [*r.sample(TOOLS, r.randint(0, 2)),
                        *({"fact": _fact(r)} if r.random() < 0.7 else {"check": _check(r)}
                          for _ in range(r.randint(0, 2)))] or ["verify"]}
    if kind == 3:
        return {"state": r.choice([{"path": "channel", "op": "eq", "value": "web"},
                                   {"path": "tier", "op": "in", "value": ["gold", "silver"]},
                                   {"path": "missing", "op": "exists"}, {"path": "channel", "op": "bogus"}])}
    if kind in (4, 5):
        return {"fact": _fact(r)}
    if kind in (6, 7):
        return {"check": _check(r)}
    if kind == 8:
        return {"limit": _limit(r)}
    return r.choice([{"fact": {"tool": "get_order", "where": "args.amount <"}}, {"check": {"where": 7}},
                     {"limit": {"max_calls": -1}}, {"any": []}, {"fact": {}}, "Say hello first."])


def _catalog(r: random.Random) -> list[Any]:
    return [skill(r.choice(ACTIONS), [_entry(r) for _ in range(r.randint(0, 4))], label=f"S{i}", id=f"s{i}",
                  enforcement="shadow" if r.random() < 0.1 else None)
            for i in range(r.randint(1, 6))]


def _args(r: random.Random) -> dict[str, Any]:
    args = {f: r.choice(VALUES) for f in r.sample(FIELDS, r.randint(0, len(FIELDS)))}
    if r.random() < 0.6:
        args["amount"] = r.choice([0, 1, 120, 499, 501, 10_000, 2.5])
    return args


def _conversation(r: random.Random) -> list[Any]:
    messages: list[Any] = [HumanMessage("hi")]
    for i in range(r.randint(0, 12)):
        if r.random() < 0.15:
            messages.append(HumanMessage("again"))
        name = r.choice(TOOLS)
        messages.append(AIMessage("", tool_calls=[{"id": f"c{i}", "name": name, "args": _args(r)}]))
        result = r.choice(RESULTS)
        content = result if isinstance(result, str) and r.random() < 0.5 else json.dumps(result)
        messages.append(ToolMessage(content, tool_call_id=f"c{i}", name=name,
                                    status="error" if r.random() < 0.15 else "success"))
    calls = [{"id": f"f{k}", "name": r.choice([*ACTIONS, *ACTIONS, "verify"]), "args": _args(r)}
             for k in range(r.randint(1, 3))]
    messages.append(AIMessage("", tool_calls=calls))
    return messages


def case(seed: int) -> tuple[list[Any], dict[str, Any]]:
    """The catalog and the state (its messages included) of case ``seed``."""
    r = random.Random(seed)
    skills = _catalog(r)
    state: dict[str, Any] = {"messages": _conversation(r)}
    for key, values in (("channel", ["web", "phone", 3]), ("tier", ["gold", "bronze", None])):
        if r.random() < 0.7:
            state[key] = r.choice(values)
    return skills, state


def _decision(d: GateDecision) -> list[Any]:
    return [d.verdict, d.content(), sorted(d.called),
            [[c.label, c.skill_id, c.required, c.missing, c.failed, c.unreadable, c.shadow, c.refused, c.errors,
              [[key, repr(limit), amount] for key, limit, amount in c.counted]] for c in d.matched],
            [[x.skill_id, x.index, x.reason] for x in d.dropped],
            None if d.blocking is None else d.blocking.skill_id, [c.skill_id for c in d.shadowed]]


def _sync(coroutine: Any) -> Any:
    try:
        coroutine.send(None)
    except StopIteration as done:
        return done.value
    raise RuntimeError("the coroutine suspended")


def outputs(seed: int) -> dict[str, Any]:
    """Everything recorded of case ``seed``: decisions (two paths) and the pre-flight texts."""
    skills, state = case(seed)
    rules = RuleSet(skills, pack=True)
    history, calls = read_conversation(state["messages"]).turn()

    async def lookup(_: object) -> RuleSet:
        return rules

    first = [_decision(d) for d in gate_decisions(state["messages"], skills, state, now=NOW)]
    in_flight = calls[:1]
    later = [_decision(d) for d in _sync(run_gate(state, lookup, turn=(history, calls[1:]), now=NOW,
                                                   in_flight=in_flight))]
    again = [_decision(d) for d in _sync(run_gate(state, lookup, turn=(history, calls[1:]), now=NOW,
                                                   in_flight=in_flight))]
    assert again == later  # what the first run kept on the history and its results decides the same
    blocks = [None if (b := build_preflight_contribution(skills, state, include_negative=n)) is None else b.content
              for n in (False, True)]
    cached = [None if (b := preflight_block(rules, state, include_negative=n)) is None else b.content
              for n in (False, True)]
    assert cached == blocks
    return {"decisions": first, "in_flight": later, "preflight": blocks}


def digest(seed: int) -> str:
    """The SHA-256 of case ``seed``'s outputs as canonical JSON (what the recording keeps of each case)."""
    text = json.dumps(outputs(seed), sort_keys=True, ensure_ascii=True)
    return hashlib.sha256(text.encode()).hexdigest()


@pytest.mark.parametrize("chunk", range(8))
def test_decisions_and_texts_are_the_recorded_ones(chunk: int) -> None:
    recorded = json.loads(RECORDED.read_text())
    assert len(recorded["digests"]) == CASES
    for seed in range(chunk, CASES, 8):
        assert digest(seed) == recorded["digests"][seed], f"case {seed}: {json.dumps(outputs(seed))[:2000]}"


def test_the_cases_reach_every_outcome() -> None:
    text = json.dumps([outputs(seed) for seed in range(0, CASES, 3)])
    for needle in ("could not be evaluated", "Not allowed", "Missing precondition", '"allowed"', '"blocked"',
                   "the others do not hold", "may run at most", "shows the action", "is false for this call",
                   "no earlier", "#1", "a precondition that could not be read", "no field"):
        assert needle in text, needle


if __name__ == "__main__" and sys.argv[1:] == ["--record"]:
    RECORDED.parent.mkdir(exist_ok=True)
    RECORDED.write_text(json.dumps({"digests": [digest(seed) for seed in range(CASES)]}, indent=0) + "\n")
    print(f"recorded {CASES} cases in {RECORDED}")
