"""The gate against a small reference model of the enforcement rules, on random conversations and rules.

Random conversations (calls with arguments, failed results, user messages, in
LangChain objects, their dicts or the OpenAI wire shape) meet random rules of
every kind (tool with ``same_args``/``within``, any-of, state with
``if_missing``, text). The model below is written from the spec's words, not
from the library's code; the gate must agree with it on every case.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage, convert_to_openai_messages

from symfonic_graph.gate import gate_decisions

TOOLS = ["a", "b", "c", "act"]
ARG_VALUES = [1, "1", 2, 1.0, True]


@dataclass(frozen=True)
class Event:
    kind: str  # "user" or "call"
    name: str = ""
    args: tuple[tuple[str, Any], ...] = ()
    failed: bool = False


def _random_args(rng: random.Random) -> tuple[tuple[str, Any], ...]:
    drawn = [None if rng.random() < 0.3 else rng.choice(ARG_VALUES) for _ in range(2)]
    return tuple((k, v) for k, v in zip(("x", "y"), drawn, strict=True) if v is not None)


def _random_event(rng: random.Random) -> Event:
    if rng.random() < 0.2:
        return Event("user")
    return Event("call", rng.choice(TOOLS), _random_args(rng), rng.random() < 0.5)


def _random_requirement(rng: random.Random) -> Any:
    kind = rng.randrange(5)
    if kind == 0:
        return {"tool": rng.choice(["a", "b", "c"]), "same_args": rng.sample(["x", "y"], rng.randint(0, 2)),
                "within": rng.choice(["conversation", "user_turn"])}
    if kind == 1:
        return rng.choice(["a", "b"])
    if kind == 2:
        return {"any": rng.sample(["a", "b", "c"], rng.randint(1, 3))}
    if kind == 3:
        return {"text": "be kind"}
    return {"state": {"path": "ch", "op": "eq", "value": rng.choice(["web", "phone"]),
                      **({"if_missing": "apply"} if rng.random() < 0.5 else {})}}


def _random_case(rng: random.Random) -> tuple[Any, ...]:
    """One conversation and catalog: (skills, history, action args, state, count_failed, message shape)."""
    skills = [[_random_requirement(rng) for _ in range(rng.randint(0, 3))] for _ in range(rng.randint(1, 3))]
    history = [_random_event(rng) for _ in range(rng.randint(0, 8))]
    state = {} if rng.random() < 0.5 else {"ch": rng.choice(["web", "phone"])}
    return (skills, history, _random_args(rng), state, rng.random() < 0.5,
            rng.choice(["objects", "dict", "openai"]))


# --- the reference model: a rule blocks its action until its preconditions hold ---------------


def _json(value: Any) -> str:
    return json.dumps(int(value) if isinstance(value, float) and value.is_integer() else value)


def _state_holds(pred: dict[str, Any], state: dict[str, Any]) -> bool:
    if pred["path"] not in state:
        return pred.get("if_missing") == "apply"
    return bool(state[pred["path"]] == pred["value"])


def _met(req: Any, action_args: dict[str, Any], history: list[Event], count_failed: bool) -> bool:
    if isinstance(req, str):
        req = {"tool": req}
    if "text" in req or "state" in req:
        return True
    names = req["any"] if "any" in req else [req["tool"]]
    same, within = req.get("same_args", []), req.get("within", "conversation")
    names = [n for n in names if n != "act"]
    if not names:
        return True
    last_user = max((i for i, e in enumerate(history) if e.kind == "user"), default=-1)
    for i, event in enumerate(history):
        if event.kind != "call" or event.name not in names or (event.failed and not count_failed):
            continue
        if within == "user_turn" and i < last_user:
            continue
        earlier = dict(event.args)
        if all(n in action_args and n in earlier and _json(action_args[n]) == _json(earlier[n]) for n in same):
            return True
    return False


def model_verdict(skills: list[list[Any]], history: list[Event], action_args: dict[str, Any],
                  state: dict[str, Any], count_failed: bool) -> str:
    for reqs in skills:
        preds = [r["state"] for r in reqs if isinstance(r, dict) and "state" in r]
        if not all(_state_holds(p, state) for p in preds):
            continue
        if not all(_met(r, action_args, history, count_failed) for r in reqs):
            return "blocked"
    return "allowed"


# --- the same conversation as messages ----------------------------------------------------


def _messages(history: list[Event], action_args: dict[str, Any], shape: str) -> list[Any]:
    out: list[Any] = []
    for i, event in enumerate(history):
        if event.kind == "user":
            out.append(HumanMessage("next"))
            continue
        out.append(AIMessage("", tool_calls=[{"name": event.name, "args": dict(event.args), "id": f"c{i}"}]))
        out.append(ToolMessage("boom" if event.failed else "ok", tool_call_id=f"c{i}", name=event.name,
                               status="error" if event.failed else "success"))
    out.append(AIMessage("", tool_calls=[{"name": "act", "args": action_args, "id": "final"}]))
    if shape == "dict":
        return [m.model_dump() for m in out]
    if shape == "openai":
        wire = convert_to_openai_messages(out)
        for message, original in zip(wire, out, strict=True):  # keep the failure mark OpenAI's shape lacks
            if isinstance(original, ToolMessage) and original.status == "error":
                message["status"] = "error"
        return list(wire)
    return out


CASES = 2000


def test_the_gate_agrees_with_the_reference_model() -> None:
    """2,000 seeded random cases (a plain generator: the rules' and conversations' shapes are simple, and
    generating them by hand is ten times cheaper than through a property-testing engine)."""
    rng = random.Random(20261203)
    disagreements = []
    for n in range(CASES):
        skills, history, action_args, state, count_failed, shape = _random_case(rng)
        args = dict(action_args)
        catalog = [SimpleNamespace(id=f"s{i}", metadata={"label": f"L{i}", "action_tool": "act",
                                                         "precondition": reqs})
                   for i, reqs in enumerate(skills)]
        [decision] = gate_decisions(_messages(history, args, shape), catalog, state, count_failed_calls=count_failed)
        expected = model_verdict(skills, history, args, state, count_failed)
        if decision.verdict != expected:
            disagreements.append((n, decision.verdict, expected, skills, history, args, state, count_failed, shape))
    assert not disagreements, f"{len(disagreements)} of {CASES} disagree; first: {disagreements[0]}"
