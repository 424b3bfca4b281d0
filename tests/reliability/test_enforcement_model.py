"""The gate against a small reference model of SPEC §13, on random conversations and rules.

Random conversations (calls with arguments, failed results, user messages, in
LangChain objects, their dicts or the OpenAI wire shape) meet random rules of
every kind (tool with ``same_args``/``within``, any-of, state with
``if_missing``, text). The model below is written from the spec's words, not
from the library's code; the gate must agree with it on every case.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
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


def _args(draw_values: list[Any]) -> tuple[tuple[str, Any], ...]:
    return tuple((k, v) for k, v in zip(("x", "y"), draw_values, strict=False) if v is not None)


arg_sets = st.lists(st.one_of(st.none(), st.sampled_from(ARG_VALUES)), min_size=2, max_size=2).map(_args)
events = st.one_of(
    st.just(Event("user")),
    st.builds(lambda n, a, f: Event("call", n, a, f), st.sampled_from(TOOLS), arg_sets, st.booleans()),
)
requirements = st.one_of(
    st.builds(lambda t, same, within: {"tool": t, "same_args": same, "within": within},
              st.sampled_from(["a", "b", "c"]), st.lists(st.sampled_from(["x", "y"]), max_size=2, unique=True),
              st.sampled_from(["conversation", "user_turn"])),
    st.sampled_from(["a", "b"]),
    st.builds(lambda ts: {"any": ts}, st.lists(st.sampled_from(["a", "b", "c"]), min_size=1, max_size=3, unique=True)),
    st.just({"text": "be kind"}),
    st.builds(lambda v, m: {"state": {"path": "ch", "op": "eq", "value": v, **({"if_missing": "apply"} if m else {})}},
              st.sampled_from(["web", "phone"]), st.booleans()),
)
rules = st.lists(st.lists(requirements, max_size=3), min_size=1, max_size=3)
states = st.one_of(st.just({}), st.builds(lambda v: {"ch": v}, st.sampled_from(["web", "phone"])))


# --- the reference model, from SPEC §4 and §13 ----------------------------------------------


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


@settings(max_examples=2000, deadline=None)
@given(rules, st.lists(events, max_size=8), arg_sets, states, st.booleans(),
       st.sampled_from(["objects", "dict", "openai"]))
def test_the_gate_agrees_with_the_reference_model(
    skills: list[list[Any]], history: list[Event], action_args: tuple[tuple[str, Any], ...],
    state: dict[str, Any], count_failed: bool, shape: str,
) -> None:
    args = dict(action_args)
    catalog = [SimpleNamespace(id=f"s{i}", metadata={"label": f"L{i}", "action_tool": "act", "precondition": reqs})
               for i, reqs in enumerate(skills)]
    [decision] = gate_decisions(_messages(history, args, shape), catalog, state, count_failed_calls=count_failed)
    assert decision.verdict == model_verdict(skills, history, args, state, count_failed)
