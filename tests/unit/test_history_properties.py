"""Hostile histories, in every shape the gate reads, never let a guarded call run.

Conversations are generated as abstract events (user messages, AI requests,
tool results, junk), rendered message by message into a shape the library
reads (LangChain objects and chunks, ``message_to_dict``, ``dumpd``, role
dicts, OpenAI chat with text or block content, the OpenAI dicts converted
back, Responses API items, ``(role, text)`` pairs, bare strings), with
hostile mutations: ids shared by several calls, results named otherwise than
their call, ids of every JSON type, arguments nested 1,100 deep, huge and
non-ASCII strings, gate-written results cut short, objects that raise.

A small reference model, written from the guarantee and not from the reader,
says whether ``deploy`` may run: only after a successful result of
``run_tests`` that answers exactly one pending call of that name (with the
same ``env`` under ``same_args``), requested after the latest user message
under ``within: user_turn``. The gate must agree with it on every example.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.load import dumpd
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    ChatMessage,
    HumanMessage,
    HumanMessageChunk,
    SystemMessage,
    ToolMessage,
    ToolMessageChunk,
    convert_to_messages,
    convert_to_openai_messages,
    message_to_dict,
)

from symfonic_graph.rules._messages import GATE_MARKER_KEY, GATE_MARKER_VALUE, HistoryReader, parse_turn
from symfonic_graph.rules.gate import gate_decisions, missing_precondition_content, unavailable_content

PRE, ACTION = "run_tests", "deploy"
IDS: list[Any] = ["c0", "c1", "call_0", "ü-1", "", ["c0"], {"id": "c0"}, 7, None]
NAMES: list[Any] = [PRE, PRE, "lookup", "ünï", "", None, ["run_tests"], 3]
ENVS: list[Any] = ["prod", "dev", "ü", 1, None]
DEEP_JSON = '{"env": ' + "[" * 1100 + "]" * 1100 + "}"  # 2.2 KB the model itself can write
CONTENTS = ["ok", "", "ERROR: 3 tests failed", "passed ✓", "x" * 200_000]
STATUS_CARRIED = {"lc", "lc_dict", "dumpd", "role", "chunk"}
SHAPES = ["lc", "lc_dict", "dumpd", "role", "chunk", "openai_text", "openai_block", "openai_back", "responses"]
USER_SHAPES = ["human", "human_chunk", "chat", "role", "type", "to_dict", "dumpd", "responses", "pair", "bare",
               "blocks", "openai"]


@dataclass(frozen=True)
class User:
    shape: str


@dataclass(frozen=True)
class Call:
    id: Any
    name: Any
    env: Any
    args: str  # "env" | "none" | "deep" | "list"


@dataclass(frozen=True)
class Request:
    calls: tuple[Call, ...]
    shape: str


@dataclass(frozen=True)
class Result:
    id: Any
    name: Any
    status: Any  # None (absent), "success", "error", or a hostile value
    content: str
    shape: str
    gate: int = 0  # 0: a tool's result; else how many characters of a gate-written result are kept
    marker: bool = False
    blocks: bool = False


@dataclass(frozen=True)
class Junk:
    which: int


class Raising:
    """A message-like object whose every attribute raises."""

    def __getattr__(self, name: str) -> Any:
        raise RuntimeError(f"no {name}")


JUNK: list[Any] = [42, None, 3.5, b"user", ("user", "x", "y"), SystemMessage("sys"), {"role": "system", "content": "x"},
                   {"role": "developer", "content": "x"}, {"foo": 1}, {"role": ["user"], "content": "x"},
                   {"type": "function", "name": PRE, "content": "ok"}, {"type": "reasoning", "summary": []},
                   {"role": "tool", "content": "ok"}, Raising()]
RAISING = len(JUNK) - 1

calls = st.builds(Call, st.sampled_from(IDS), st.sampled_from(NAMES), st.sampled_from(ENVS),
                  st.sampled_from(["env", "env", "none", "deep", "list"]))
gate_written = st.integers(1, 400)
events = st.one_of(
    st.builds(User, st.sampled_from(USER_SHAPES)),
    st.builds(Request, st.lists(calls, min_size=1, max_size=3).map(tuple), st.sampled_from(SHAPES)),
    st.builds(Result, st.sampled_from(IDS), st.sampled_from(NAMES),
              st.sampled_from([None, "success", "error", "error", ["error"], "ERROR"]), st.sampled_from(CONTENTS),
              st.sampled_from(SHAPES), st.sampled_from([0, 0, 0]) | gate_written, st.booleans(), st.booleans()),
    st.builds(Junk, st.integers(0, len(JUNK) - 1)),
)
good_ids = st.sampled_from(["c0", "c1", "call_0", "ü-1"])
pairs = st.tuples(good_ids, st.sampled_from(ENVS), st.sampled_from(SHAPES), st.sampled_from(SHAPES),
                  st.sampled_from([None, "success", "error"]), st.sampled_from([None, PRE])).map(
    lambda t: [Request((Call(t[0], PRE, t[1], "env"),), t[2]), Result(t[0], t[5], t[4], "ok", t[3])])
"""A call of the precondition and its result, well formed: what most conversations hold."""
histories = st.lists(events.map(lambda e: [e]) | pairs, max_size=8).map(lambda runs: [e for r in runs for e in r])


# --- the reference model ---------------------------------------------------------


def _text_id(value: Any) -> bool:
    return isinstance(value, str) and value != ""


def _requested(call: Call) -> bool:
    return _text_id(call.name)


def reference_allows(history: list[Any], env: Any, *, same_args: bool, within: bool, count_failed: bool) -> bool:
    """Whether the guarantee lets ``deploy(env=env)`` run after ``history`` (written from the docs, not the code)."""
    turns = [0]
    for event in history:  # user messages before each event; an object that raises closes the turn too
        turns.append(turns[-1] + (isinstance(event, User) or (isinstance(event, Junk) and event.which == RAISING)))
    final_turn = turns[-1]
    for j, event in enumerate(history):
        if not isinstance(event, Result) or event.gate or not _text_id(event.id):
            continue
        last = max((k for k in range(j) if isinstance(history[k], Result) and history[k].id == event.id), default=-1)
        pending = [(k, c) for k in range(last + 1, j) if isinstance(history[k], Request)
                   for c in history[k].calls if c.id == event.id and _requested(c)]
        if len(pending) != 1:
            continue  # answers no call, or several: which one ran is unknown
        k, call = pending[0]
        name = None if event.shape == "responses" else event.name  # Responses outputs carry no name
        if call.name != PRE or (name not in (None, "") and name != call.name):
            continue
        failed = event.status == "error" and event.shape in STATUS_CARRIED
        if failed and not count_failed:
            continue
        if same_args and not (call.args == "env" and type(call.env) is type(env) and call.env == env):
            continue
        if within and turns[k] != final_turn:
            continue
        return True
    return False


# --- rendering ---------------------------------------------------------------------


def _args(call: Call) -> Any:
    return {"env": call.env} if call.args == "env" else {} if call.args == "none" else ["env", call.env]


def _lc_ok(request: Request) -> bool:
    return all(isinstance(c.id, str) and isinstance(c.name, str) and c.args != "deep" for c in request.calls)


def _ai(request: Request) -> BaseMessage:
    tool_calls = [{"id": c.id, "name": c.name, "args": _args(c)} for c in request.calls]
    if request.shape == "chunk":
        return AIMessageChunk(content="", tool_call_chunks=[
            {"id": c["id"], "name": c["name"], "args": json.dumps(c["args"]), "index": i}
            for i, c in enumerate(tool_calls)])
    return AIMessage(content="", tool_calls=tool_calls)


def render_request(request: Request) -> list[Any]:
    if request.shape == "responses":  # items carry any call_id, name and argument text
        return [{"type": "function_call", "id": f"fc_{i}", "call_id": c.id, "name": c.name,
                 "arguments": DEEP_JSON if c.args == "deep" else json.dumps(_args(c))}
                for i, c in enumerate(request.calls)]
    if any(c.args == "deep" for c in request.calls) or not _lc_ok(request) or \
            any(c.args == "list" for c in request.calls):
        # hostile: the OpenAI wire format, which carries any id, name and argument text
        return [{"role": "assistant", "content": "", "tool_calls": [
            {"id": c.id, "type": "function", "function": {
                "name": c.name, "arguments": DEEP_JSON if c.args == "deep" else json.dumps(_args(c))}}
            for c in request.calls]}]
    shape = request.shape
    if shape == "role":
        return [{"role": "assistant", "content": "",
                 "tool_calls": [{"id": c.id, "name": c.name, "args": _args(c)} for c in request.calls]}]
    return [_convert(_ai(request), shape)]


def _convert(message: BaseMessage, shape: str) -> Any:
    if shape == "lc_dict":
        return message_to_dict(message)
    if shape == "dumpd":
        return dumpd(message)
    if shape in ("openai_text", "openai_block", "openai_back"):
        wire = convert_to_openai_messages(message, text_format="block" if shape == "openai_block" else "string")
        return convert_to_messages([wire])[0] if shape == "openai_back" else wire
    return message


def _result_content(result: Result) -> str:
    if not result.gate:
        return result.content
    full = missing_precondition_content(PRE, ["lookup"], "L") if result.gate % 2 else unavailable_content(PRE)
    return (" \n" if result.gate % 3 == 0 else "") + full[:result.gate]


def render_result(result: Result) -> list[Any]:
    text = _result_content(result)
    content: Any = [{"type": "text", "text": text}] if result.blocks else text
    meta = {GATE_MARKER_KEY: GATE_MARKER_VALUE} if result.marker and result.gate else {}
    if result.shape == "responses":
        output = [{"type": "input_text", "text": text}] if result.blocks else text
        return [{"type": "function_call_output", "call_id": result.id, "output": output}]
    lc_ok = isinstance(result.id, str) and (result.name is None or isinstance(result.name, str)) \
        and result.status in (None, "success", "error")
    if result.shape == "role" or not lc_ok:
        raw: dict[str, Any] = {"role": "tool", "tool_call_id": result.id, "content": content}
        if result.name is not None:
            raw["name"] = result.name
        if result.status is not None and result.shape in STATUS_CARRIED:
            raw["status"] = result.status
        return [raw]
    kwargs: dict[str, Any] = {"tool_call_id": result.id, "name": result.name, "response_metadata": meta}
    if result.status is not None:
        kwargs["status"] = result.status
    cls = ToolMessageChunk if result.shape == "chunk" else ToolMessage
    return [_convert(cls(content=content, **kwargs), result.shape)]


def render_user(user: User) -> Any:
    shape = user.shape
    return {
        "human": lambda: HumanMessage("go"), "human_chunk": lambda: HumanMessageChunk(content="go"),
        "chat": lambda: ChatMessage(role="user", content="go"), "role": lambda: {"role": "user", "content": "go"},
        "type": lambda: {"type": "human", "content": "go"}, "to_dict": lambda: message_to_dict(HumanMessage("go")),
        "dumpd": lambda: dumpd(HumanMessage("go")),
        "responses": lambda: {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go"}]},
        "pair": lambda: ("user", "go"), "bare": lambda: "go",
        "blocks": lambda: {"role": "user", "content": [{"type": "text", "text": "go"}]},
        "openai": lambda: convert_to_openai_messages(HumanMessage("go")),
    }[shape]()


def render(history: list[Any]) -> list[Any]:
    out: list[Any] = []
    for event in history:
        if isinstance(event, User):
            out.append(render_user(event))
        elif isinstance(event, Request):
            out.extend(render_request(event))
        elif isinstance(event, Result):
            out.extend(render_result(event))
        else:
            out.append(JUNK[event.which])
    return out


def terminal(env: Any, shape: str) -> Any:
    args = {"env": env}
    if shape == "responses":
        return {"type": "function_call", "call_id": "t-final", "name": ACTION, "arguments": json.dumps(args)}
    if shape == "role":
        return {"role": "assistant", "content": "", "tool_calls": [{"id": "t-final", "name": ACTION, "args": args}]}
    return _convert(AIMessage("", tool_calls=[{"id": "t-final", "name": ACTION, "args": args}]), shape)


def rule(same_args: bool, within: bool) -> Any:
    entry: dict[str, Any] = {"tool": PRE}
    if same_args:
        entry["same_args"] = ["env"]
    if within:
        entry["within"] = "user_turn"
    return SimpleNamespace(id="s1", metadata={"label": "Deploy", "action_tool": ACTION, "precondition": [entry]})


# --- the properties --------------------------------------------------------------------


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(histories, st.sampled_from(ENVS[:4]), st.sampled_from(SHAPES), st.booleans(),
       st.booleans(), st.booleans())
def test_the_gate_allows_exactly_what_the_reference_allows(
    history: list[Any], env: Any, final_shape: str, same_args: bool, within: bool, count_failed: bool,
) -> None:
    messages = [*render(history), terminal(env, final_shape)]
    decisions = gate_decisions(messages, [rule(same_args, within)], {}, count_failed_calls=count_failed)
    expected = reference_allows(history, env, same_args=same_args, within=within, count_failed=count_failed)
    assert [d.verdict for d in decisions] == ["allowed" if expected else "blocked"]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(histories)
def test_the_reader_reads_every_hostile_shape_without_raising(history: list[Any]) -> None:
    messages = render(history)
    reader = HistoryReader()
    for message in messages:
        reader.feed(message)
    unreadable = [text for _, text in reader.problems if "could not be read" in text]
    # only an object whose attributes raise falls to the reader's last resort; every other shape is read
    assert len(unreadable) == min(sum(isinstance(e, Junk) and e.which == RAISING for e in history), 20)
    assert parse_turn([*messages, terminal("prod", "lc")])[0] == reader.history()


HUGE_DEPTHS = [70, 900, 1100, 5000]


@given(st.sampled_from(HUGE_DEPTHS), st.booleans())
@settings(max_examples=20, deadline=None)
def test_nesting_of_any_depth_meets_no_same_args_and_never_raises(depth: int, as_text: bool) -> None:
    nested: Any = "prod"
    if as_text:
        arguments: Any = '{"env": ' + "[" * depth + '"prod"' + "]" * depth + "}"
        call = {"id": "c1", "type": "function", "function": {"name": PRE, "arguments": arguments}}
    else:
        for _ in range(min(depth, 900)):
            nested = [nested]
        call = {"id": "c1", "name": PRE, "args": {"env": nested}}
    history = [{"role": "assistant", "content": "", "tool_calls": [call]},
               {"role": "tool", "tool_call_id": "c1", "content": "ok"}]
    final = AIMessage("", tool_calls=[{"id": "c2", "name": ACTION, "args": {"env": nested}}])
    same = gate_decisions([*history, final], [rule(True, False)], {})
    plain = gate_decisions([*history, final], [rule(False, False)], {})
    assert [d.verdict for d in same] == ["blocked"]  # unreadable arguments match nothing
    assert [d.verdict for d in plain] == ["allowed"]  # the call itself was made


# --- recorded conversations ------------------------------------------------------------


def test_replay_and_mining_read_hostile_traces_as_the_gate_does_and_name_them(tmp_path: Any, caplog: Any) -> None:
    from symfonic_graph.learning.mining import mine_rules
    from symfonic_graph.learning.replay import replay
    from symfonic_graph.learning.traces import load_traces

    def ask(call_id: Any, name: str, arguments: str = "{}") -> dict[str, Any]:
        return {"role": "assistant", "content": "", "tool_calls": [
            {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}]}

    hostile = [ask("c1", PRE), {"role": "tool", "tool_call_id": ["c1"], "content": "ok"},  # a list id
               ask("c2", "lookup", DEEP_JSON), {"role": "tool", "tool_call_id": "c2", "content": "ok"},
               ask("c3", ACTION)]
    fine = [ask("c1", PRE), {"role": "tool", "tool_call_id": "c1", "content": "ok"}, ask("c2", ACTION)]
    path = tmp_path / "traces.jsonl"
    path.write_text("\n".join(json.dumps({"id": f"t{i}", "messages": m, "outcome": "success"})
                              for i, m in enumerate([hostile, fine, fine])) + "\n")
    report = replay(load_traces(path), [rule(False, False)])
    assert [(r.checked, r.blocked, r.trace_ids) for r in report.rules] == [(3, 1, ("t0",))]
    assert "trace 't0': 1 message(s) or call(s) read as nothing: message 1: a tool result whose tool_call_id " \
           "is a list, not a string" in caplog.text
    caplog.clear()
    proposals = mine_rules(load_traces(path), actions=[ACTION], min_support=1, min_confidence=0.5)
    assert [(p.precondition, p.support, p.confidence) for p in proposals] == [(PRE, 3, 2 / 3)]
    assert "mining: trace 't0'" in caplog.text and "'t1'" not in caplog.text
