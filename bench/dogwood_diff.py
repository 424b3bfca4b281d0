"""The gate beside Dogwood (``dogwood-py``, the Rust reference interpreter): the same decisions on the same histories.

Random conversations over a small airline tool set (log in and out, read a user or a reservation, cancel,
change bags, send a certificate) are decided twice, call by call: by our gate
(:func:`symfonic_graph.gate.gate_decisions`, skills as plain dicts) and by Dogwood's trace replay, each
conversation written as a Dogwood trace (a tool call is a ``request`` event, a successful result a
``response`` event carrying the parsed result as ``output``, a failed result an ``error`` event). Only
the calls of guarded tools are compared.

Each scenario pairs our preconditions with the Dogwood policy that says the same thing, over the rules
both can express (ordering, same arguments, result fields, checks on arguments, counts in a
conversation). The ``differences`` scenarios pair a rule with the nearest Dogwood policy where Dogwood
cannot say it (``within: user_turn``); their disagreements are expected and named.

Also times one decision of each on the same 60-event history.

Needs ``dogwood-py`` (``pip install dogwood-py``). Run:
    python -m bench.dogwood_diff                       # 600 conversations a scenario
    python -m bench.dogwood_diff --conversations 100 --seed 3
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import inspect
import json
import random
import re
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from symfonic_graph.gate import gate_decisions

NOW = dt.datetime(2024, 5, 15, 15, 0, tzinfo=dt.UTC)
WINDOW = "24h"  # Dogwood's default event schema caps a window at 24 h; a trace's clock is its event index, in s


@dataclasses.dataclass(frozen=True)
class Tool:
    """A tool: its Dogwood action name, its arguments and its result fields (name -> "String" | "Long")."""

    action: str
    inputs: Mapping[str, str]
    outputs: Mapping[str, str]


TOOLS: dict[str, Tool] = {
    "login": Tool("Login", {"user_id": "String"}, {"user_id": "String", "session": "String"}),
    "logout": Tool("Logout", {"user_id": "String"}, {"user_id": "String"}),
    "get_user": Tool("GetUser", {"user_id": "String"}, {"user_id": "String", "membership": "String"}),
    "verify_identity": Tool("VerifyIdentity", {"account_id": "String"}, {"account_id": "String", "verified": "Bool"}),
    "get_reservation": Tool("GetReservation", {"reservation_id": "String"},
                            {"reservation_id": "String", "cabin": "String", "status": "String",
                             "total_baggages": "Long"}),
    "cancel_reservation": Tool("CancelReservation", {"reservation_id": "String"},
                               {"reservation_id": "String", "status": "String"}),
    "update_baggages": Tool("UpdateBaggages", {"reservation_id": "String", "total_baggages": "Long"},
                            {"reservation_id": "String", "total_baggages": "Long"}),
    "send_certificate": Tool("SendCertificate", {"user_id": "String", "amount": "Long"},
                             {"user_id": "String", "amount": "Long"}),
}
WEIGHTS = {"login": 3, "logout": 1, "get_user": 3, "verify_identity": 2, "get_reservation": 4,
           "cancel_reservation": 3, "update_baggages": 3, "send_certificate": 3}
AMOUNTS = (50, 100, 150, 200, 400)
USERS = ("u1", "u2")
RESERVATIONS = ("R1", "R2", "R3")


def cedar_schema(tools: Mapping[str, Tool] = TOOLS) -> str:
    """The Cedar action schema of ``tools``: one action per tool, its arguments as ``input``, result as ``output``."""
    lines = ["namespace Agent {", "  entity Gateway;", "  entity User;"]
    for tool in tools.values():
        fields_in = ", ".join(f"{k}: {v}" for k, v in tool.inputs.items())
        fields_out = ", ".join(f"{k}: {v}" for k, v in tool.outputs.items())
        lines += [f"  type {tool.action}In = {{ {fields_in} }};", f"  type {tool.action}Out = {{ {fields_out} }};",
                  f'  action "{tool.action}" appliesTo {{ principal: [User], resource: [Gateway],',
                  f"    context: {{ input: {tool.action}In, output?: {tool.action}Out }} }};"]
    return "\n".join([*lines, "}"])


# --- conversations ------------------------------------------------------------------------


def _args(rng: random.Random, tool: str) -> dict[str, Any]:
    args: dict[str, Any] = {}
    for name in TOOLS[tool].inputs:
        if name in ("user_id", "account_id"):
            args[name] = rng.choice(USERS)
        elif name == "reservation_id":
            args[name] = rng.choice(RESERVATIONS)
        elif name == "total_baggages":
            args[name] = rng.randint(0, 8)
        elif name == "amount":
            args[name] = rng.choice(AMOUNTS)
    return args


def _result(rng: random.Random, tool: str, args: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in TOOLS[tool].outputs:
        if name in args:
            out[name] = args[name]
        elif name == "cabin":
            out[name] = rng.choice(("business", "economy", "basic_economy"))
        elif name == "status":
            out[name] = "cancelled" if tool == "cancel_reservation" else rng.choice(("active", "active", "flown"))
        elif name == "membership":
            out[name] = rng.choice(("gold", "silver", "regular"))
        elif name == "session":
            out[name] = "ok"
        elif name == "verified":
            out[name] = rng.random() < 0.6
        elif name == "total_baggages":
            out[name] = rng.randint(0, 5)
    return out


def conversation(rng: random.Random, n: int) -> list[dict[str, Any]]:
    """One recorded conversation: 1-4 user turns, each of 1-5 AI messages of 1 (sometimes 2) tool calls.

    Every call is answered: 88% by a JSON result, 12% by a failed result (``status: error``).
    """
    tools, weights = list(WEIGHTS), list(WEIGHTS.values())
    messages: list[dict[str, Any]] = []
    k = 0
    for turn in range(rng.randint(1, 4)):
        messages.append({"role": "user", "content": f"turn {turn}"})
        for _ in range(rng.randint(1, 5)):
            calls = []
            for _ in range(2 if rng.random() < 0.2 else 1):
                tool = rng.choices(tools, weights)[0]
                calls.append({"id": f"c{n}_{k}", "name": tool, "args": _args(rng, tool)})
                k += 1
            messages.append({"role": "assistant", "content": "", "tool_calls": calls})
            for call in calls:
                answer: dict[str, Any] = {"role": "tool", "tool_call_id": call["id"], "name": call["name"]}
                if rng.random() < 0.12:
                    answer.update(content="Error: the service failed", status="error")
                else:
                    answer["content"] = json.dumps(_result(rng, call["name"], call["args"]))
                messages.append(answer)
    return messages


# --- Dogwood traces -------------------------------------------------------------------------


def _cedar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, Mapping):
        return "{ " + ", ".join(f"{k}: {_cedar(v)}" for k, v in value.items()) + " }"
    raise TypeError(f"no Cedar literal for {value!r}")


def dogwood_trace(messages: Sequence[Mapping[str, Any]], tools: Mapping[str, Tool] = TOOLS
                  ) -> tuple[str, dict[int, str]]:
    """The Dogwood trace of a conversation, and each request's timestamp -> its call id.

    The clock is the event's index in seconds (all windows are 24 h, so time never decides). Arguments and
    results carry the fields the tool's schema declares.
    """
    lines: list[str] = []
    requests: dict[int, str] = {}
    calls: dict[str, Mapping[str, Any]] = {}
    tail = 'callerPrincipal: Agent::User::"agent", callerResource: Agent::Gateway::"g"'
    for message in messages:
        if message["role"] == "assistant":
            for call in message.get("tool_calls", ()):
                ts, tool = len(lines), tools[call["name"]]
                args = {k: v for k, v in call["args"].items() if k in tool.inputs}
                calls[call["id"]] = call
                requests[ts] = call["id"]
                lines.append(f'@{ts} scope(principal: Agent::User::"agent", resource: Agent::Gateway::"g") '
                             f"request_context(input: {_cedar(args)}) "
                             f'Agent::Action::"{tool.action}"::request(input: {_cedar(args)}, {tail}, '
                             f'requestId: "{call["id"]}")')
        elif message["role"] == "tool":
            call = calls[message["tool_call_id"]]
            ts, tool = len(lines), tools[call["name"]]
            args = {k: v for k, v in call["args"].items() if k in tool.inputs}
            if message.get("status") == "error":
                lines.append(f'@{ts} Agent::Action::"{tool.action}"::error(input: {_cedar(args)}, {tail}, '
                             f'requestId: "{call["id"]}")')
            else:
                parsed = json.loads(message["content"])
                output = {k: v for k, v in parsed.items() if k in tool.outputs}
                lines.append(f'@{ts} Agent::Action::"{tool.action}"::response(input: {_cedar(args)}, '
                             f'output: {_cedar(output)}, {tail}, requestId: "{call["id"]}")')
    return "\n".join(lines), requests


_VERDICT = re.compile(r"@(\d+) \(time point \d+\): (true|false)")


def dogwood_decisions(policy: str, schema: str, messages: Sequence[Mapping[str, Any]],
                      tools: Mapping[str, Tool] = TOOLS) -> dict[str, bool]:
    """Dogwood's verdict (allowed?) on every tool call of the conversation, by call id."""
    from dogwood import native

    trace, requests = dogwood_trace(messages, tools)
    verdicts = {}
    for line in native.replay(policy, schema, trace).splitlines():
        match = _VERDICT.fullmatch(line.strip())
        if match:
            verdicts[requests[int(match.group(1))]] = match.group(2) == "true"
    return verdicts


# --- our decisions ----------------------------------------------------------------------------

_TAKES_NOW = "now" in inspect.signature(gate_decisions).parameters


def our_decisions(skills: Sequence[Mapping[str, Any]], messages: Sequence[Mapping[str, Any]], *,
                  count_failed_calls: bool = False) -> dict[str, bool]:
    """Our gate's verdict (allowed?) on every tool call, each AI message decided on the history before it."""
    verdicts: dict[str, bool] = {}
    extra: dict[str, Any] = {"now": NOW} if _TAKES_NOW else {}
    for i, message in enumerate(messages):
        if message["role"] == "assistant" and message.get("tool_calls"):
            for decision in gate_decisions(messages[: i + 1], skills, {}, count_failed_calls=count_failed_calls,
                                           **extra):
                verdicts[str(decision.call_id)] = decision.allowed
    return verdicts


# --- scenarios --------------------------------------------------------------------------------


def camel(name: str) -> str:
    """A tool's Dogwood action name: ``get_order_details`` -> ``GetOrderDetails``."""
    return "".join(part[:1].upper() + part[1:] for part in name.split("_"))


def _action(tool: str) -> str:
    return f'Agent::Action::"{camel(tool)}"'


def formerly(tool: str, same: Sequence[str] | Mapping[str, str] = (), output: Mapping[str, Any] | None = None,
             kind: str = "response") -> str:
    """Dogwood: an earlier ``kind`` event of ``tool`` in the window, with the same arguments and result fields."""
    return f"formerly within {WINDOW} {pattern(tool, same, output, kind)}"


def pattern(tool: str, same: Sequence[str] | Mapping[str, str] = (), output: Mapping[str, Any] | None = None,
            kind: str = "response") -> str:
    pairs = same.items() if isinstance(same, Mapping) else ((name, name) for name in same)
    fields = [f"input.{earlier}: context.input.{action}" for action, earlier in pairs]
    fields += [f"output.{k}: {_cedar(v)}" for k, v in (output or {}).items()]
    return f"{_action(tool)}::{kind}{{ {', '.join(fields)} }}"


def permit(tool: str, temporal: Sequence[str] = (), when: Sequence[str] = ()) -> str:
    """One Dogwood permit for ``tool``: every ``when`` (Cedar) and ``temporal`` condition must hold."""
    blocks = "".join(f" when {{ {c} }}" for c in when) + "".join(f" when temporal {{ {c} }}" for c in temporal)
    return f"permit (principal, action == {_action(tool)}, resource){blocks};"


@dataclasses.dataclass(frozen=True)
class Scenario:
    """Our skills and the Dogwood policy meant to decide the same; ``expected`` names a deliberate difference."""

    name: str
    kinds: tuple[str, ...]
    skills: tuple[dict[str, Any], ...]
    policy: str
    expected: str | None = None
    count_failed_calls: bool = False
    classify: Callable[[Sequence[Mapping[str, Any]], str], str] | None = None


def skill(tool: str, *precondition: Any) -> dict[str, Any]:
    return {"metadata": {"action_tool": tool, "precondition": list(precondition)}}


def base_scenarios() -> list[Scenario]:
    """The scenarios over what the gate has decided since ordering rules: tool, same_args, any."""
    return [
        Scenario("ordering", ("ordering",),
                 (skill("cancel_reservation", "get_reservation"),
                  skill("send_certificate", "login", "get_user")),
                 "\n".join([permit("cancel_reservation", [formerly("get_reservation")]),
                            permit("send_certificate", [formerly("login"), formerly("get_user")])])),
        Scenario("same arguments", ("ordering", "same_args"),
                 (skill("update_baggages", {"tool": "get_reservation", "same_args": ["reservation_id"]}),
                  skill("cancel_reservation", {"tool": "get_reservation", "same_args": ["reservation_id"]}),
                  skill("send_certificate", {"tool": "login", "same_args": ["user_id"]},
                        {"tool": "get_user", "same_args": ["user_id"]})),
                 "\n".join([permit("update_baggages", [formerly("get_reservation", ["reservation_id"])]),
                            permit("cancel_reservation", [formerly("get_reservation", ["reservation_id"])]),
                            permit("send_certificate", [formerly("login", ["user_id"]),
                                                        formerly("get_user", ["user_id"])])])),
        # Dogwood has no `||` inside a temporal block; one permit per alternative says the same.
        Scenario("any of (one permit per alternative)", ("any",),
                 (skill("send_certificate", {"any": ["login", "get_user"]}),),
                 "\n".join([permit("send_certificate", [formerly("login")]),
                            permit("send_certificate", [formerly("get_user")])])),
        Scenario("failed results counted", ("ordering", "count_failed_calls"),
                 (skill("cancel_reservation", {"tool": "get_reservation", "same_args": ["reservation_id"]}),),
                 "\n".join([permit("cancel_reservation", [formerly("get_reservation", ["reservation_id"])]),
                            permit("cancel_reservation", [formerly("get_reservation", ["reservation_id"],
                                                                   kind="error")])]),
                 count_failed_calls=True),
        Scenario("within: user_turn", ("ordering", "user_turn"),
                 (skill("update_baggages", {"tool": "get_reservation", "same_args": ["reservation_id"],
                                            "within": "user_turn"}),),
                 permit("update_baggages", [formerly("get_reservation", ["reservation_id"])]),
                 expected="earlier_turn: Dogwood has no user turns; its nearest rule also counts a read made "
                          "before the user's latest message",
                 classify=_earlier_turn),
    ]


def _same_batch(messages: Sequence[Mapping[str, Any]], call_id: str) -> str:
    """Names a disagreement on a call whose AI message has an earlier call of the same tool."""
    for message in messages:
        calls = list(message.get("tool_calls", ()))
        ids = [c["id"] for c in calls]
        if call_id in ids:
            me = calls[ids.index(call_id)]
            if any(c["name"] == me["name"] for c in calls[: ids.index(call_id)]):
                return "in_flight"
            return "OTHER"
    return "OTHER"


def _failed_before(messages: Sequence[Mapping[str, Any]], call_id: str) -> str:
    """Names a disagreement on a call before which an earlier call of the same tool failed."""
    names = {c["id"]: c["name"] for m in messages for c in m.get("tool_calls", ())}
    for message in messages:
        if call_id in (c["id"] for c in message.get("tool_calls", ())):
            return "OTHER"
        if message["role"] == "tool" and message.get("status") == "error" \
                and names[message["tool_call_id"]] == names[call_id]:
            return "failed_counted"
    return "OTHER"


def _earlier_turn(messages: Sequence[Mapping[str, Any]], call_id: str) -> str:
    """Names a disagreement on a call whose reservation was read successfully only before the latest user message."""
    calls = {c["id"]: c for m in messages for c in m.get("tool_calls", ())}
    me, turn, read_in = calls[call_id], 0, set()
    for message in messages:
        if call_id in (c["id"] for c in message.get("tool_calls", ())):
            break
        if message["role"] == "user":
            turn += 1
        elif message["role"] == "tool" and message.get("status") != "error":
            earlier = calls[message["tool_call_id"]]
            if earlier["name"] == "get_reservation" and earlier["args"] == {"reservation_id":
                                                                             me["args"]["reservation_id"]}:
                read_in.add(turn)
    return "earlier_turn" if read_in and turn not in read_in else "OTHER"


def _since(tool: str, same: Sequence[str] | Mapping[str, str], output: Mapping[str, Any] | None, *,
           undone_by: str, undone_same: Sequence[str] | Mapping[str, str] = ()) -> str:
    """Dogwood: an earlier response matching, with no later ``undone_by`` response since."""
    return f"(!{pattern(undone_by, undone_same)}) since within {WINDOW} {pattern(tool, same, output)}"


def result_scenarios() -> list[Scenario]:
    """The kinds over results, arguments and counts: fact, check, any of them, limit per conversation."""
    rid = ["reservation_id"]
    count = f"count for (t: Timepoint). where (formerly within {WINDOW} ({pattern('cancel_reservation')} && tp(t)))"
    requests = (f"count for (t: Timepoint). where (formerly within {WINDOW} "
                f"({pattern('cancel_reservation', kind='request')} && tp(t)))")
    sent = f"sum_within(amt, {WINDOW}, {_action('send_certificate')}::response{{ input.amount: amt }})"
    return [
        Scenario("fact: a result field equals", ("fact", "same_args", "where"),
                 (skill("cancel_reservation", {"fact": {"tool": "get_reservation", "same_args": rid,
                                                        "where": 'result.cabin == "business"'}}),),
                 permit("cancel_reservation", [formerly("get_reservation", rid, {"cabin": "business"})])),
        Scenario("fact: latest", ("fact", "same_args", "where", "latest"),
                 (skill("update_baggages", {"fact": {"tool": "get_reservation", "same_args": rid, "latest": True,
                                                     "where": 'result.status == "active"'}}),),
                 permit("update_baggages", [_since("get_reservation", rid, {"status": "active"},
                                                   undone_by="get_reservation", undone_same=rid)])),
        Scenario("fact: voided_by", ("fact", "same_args", "voided_by"),
                 (skill("send_certificate", {"fact": {"tool": "login", "same_args": ["user_id"],
                                                      "voided_by": ["logout"]}}),),
                 permit("send_certificate", [_since("login", ["user_id"], None, undone_by="logout",
                                                    undone_same=["user_id"])])),
        Scenario("fact: same_args mapped to another name", ("fact", "same_args map", "where"),
                 (skill("send_certificate", {"fact": {"tool": "verify_identity",
                                                      "same_args": {"user_id": "account_id"},
                                                      "where": "result.verified == true"}}),),
                 permit("send_certificate", [formerly("verify_identity", {"user_id": "account_id"},
                                                      {"verified": True})])),
        Scenario("fact: a result field against an argument", ("fact", "same_args", "where"),
                 (skill("update_baggages", {"fact": {"tool": "get_reservation", "same_args": rid,
                                                     "where": "result.total_baggages <= args.total_baggages"}}),),
                 permit("update_baggages", [
                     "exists (x: Long). (formerly within " + WINDOW + " "
                     + pattern("get_reservation", rid)[:-2] + ", output.total_baggages: x } "
                     "&& x <= context.input.total_baggages)"])),
        Scenario("check with ordering", ("check", "ordering", "same_args"),
                 (skill("update_baggages", {"tool": "get_reservation", "same_args": rid},
                        {"check": {"where": "args.total_baggages <= 5"}}),),
                 permit("update_baggages", [formerly("get_reservation", rid)],
                        when=["context.input.total_baggages <= 5"])),
        Scenario("any of a tool, a fact and a check", ("any", "fact", "check"),
                 (skill("send_certificate", {"any": [
                     "login",
                     {"fact": {"tool": "verify_identity", "same_args": {"user_id": "account_id"},
                               "where": "result.verified == true"}},
                     {"check": {"where": "args.amount <= 100"}}]}),),
                 "\n".join([permit("send_certificate", [formerly("login")]),
                            permit("send_certificate", [formerly("verify_identity", {"user_id": "account_id"},
                                                                 {"verified": True})]),
                            permit("send_certificate", when=["context.input.amount <= 100"])])),
        Scenario("limit: max_calls per conversation", ("limit", "max_calls"),
                 (skill("cancel_reservation", {"limit": {"max_calls": 2, "per": "conversation"}}),),
                 permit("cancel_reservation", [f"exists (n: Long). (({count}) == n && n < 2)"]),
                 expected="in_flight: we count the calls already allowed in the same AI message; Dogwood's "
                          "rule over responses does not see them",
                 classify=_same_batch),
        Scenario("limit: max_calls, Dogwood counting requests", ("limit", "max_calls"),
                 (skill("cancel_reservation", {"limit": {"max_calls": 2, "per": "conversation"}}),),
                 permit("cancel_reservation", [f"exists (n: Long). (({requests}) == n && n <= 2)"]),
                 expected="failed_counted: Dogwood's count of requests takes in every earlier attempt, failed "
                          "ones too; we count successful runs (and the calls allowed in the same AI message)",
                 classify=_failed_before),
        # Dogwood's temporal block has no arithmetic: "earlier sum + this amount <= 300" is one permit per amount.
        Scenario("limit: max_sum per conversation", ("limit", "max_sum"),
                 (skill("send_certificate", {"limit": {"max_sum": 300, "sum": "args.amount",
                                                       "per": "conversation"}}),),
                 "\n".join(permit("send_certificate",
                                  [f"exists (total: Long). ({sent} == total && total <= {300 - a})"],
                                  when=[f"context.input.amount == {a}"]) for a in AMOUNTS if a <= 300),
                 expected="in_flight: we count the calls already allowed in the same AI message; Dogwood's "
                          "rule over responses does not see them",
                 classify=_same_batch),
    ]


def scenarios() -> list[Scenario]:
    return base_scenarios() + result_scenarios()


# --- tau-bench's airline and retail tasks -----------------------------------------------------------

_TAU_READS = {"get_reservation_details", "get_user_details", "get_order_details"}


def tau_rules(domain: str) -> tuple[dict[str, Tool], Scenario]:
    """The clauses of a tau-bench domain's policy that both can express, as skills and as a Dogwood policy.

    Airline: a reservation is read (same id) before it is cancelled or its passengers changed; bags are
    only added (the read's ``total_baggages`` at most the new count); a basic economy reservation's
    flights are not changed; a user is read before a booking or a certificate. Retail: an order is read
    (same id) before it is cancelled or modified (status pending) or returned or exchanged (delivered).
    """
    rid, oid = ["reservation_id"], ["order_id"]
    if domain == "airline":
        tools = {"get_reservation_details": Tool("GetReservationDetails", {"reservation_id": "String"},
                                                 {"reservation_id": "String", "cabin": "String",
                                                  "total_baggages": "Long"}),
                 "get_user_details": Tool("GetUserDetails", {"user_id": "String"}, {}),
                 "update_reservation_baggages": Tool("UpdateReservationBaggages",
                                                     {"reservation_id": "String", "total_baggages": "Long"}, {}),
                 "cancel_reservation": Tool("CancelReservation", {"reservation_id": "String"}, {}),
                 "update_reservation_passengers": Tool("UpdateReservationPassengers",
                                                       {"reservation_id": "String"}, {}),
                 "update_reservation_flights": Tool("UpdateReservationFlights", {"reservation_id": "String"}, {}),
                 "book_reservation": Tool("BookReservation", {"user_id": "String"}, {}),
                 "send_certificate": Tool("SendCertificate", {"user_id": "String"}, {})}
        read = {"tool": "get_reservation_details", "same_args": rid}
        user = {"fact": {"tool": "get_user_details", "same_args": ["user_id"]}}
        skills = (skill("cancel_reservation", {"fact": read}),
                  skill("update_reservation_passengers", {"fact": read}),
                  skill("update_reservation_baggages",
                        {"fact": {**read, "where": "result.total_baggages <= args.total_baggages"}}),
                  skill("update_reservation_flights", {"fact": {**read, "where": 'result.cabin != "basic_economy"'}}),
                  skill("book_reservation", user), skill("send_certificate", user))
        head = pattern("get_reservation_details", rid)[:-2]
        policy = "\n".join([
            permit("cancel_reservation", [formerly("get_reservation_details", rid)]),
            permit("update_reservation_passengers", [formerly("get_reservation_details", rid)]),
            permit("update_reservation_baggages", [f"exists (x: Long). (formerly within {WINDOW} {head}, "
                                                   "output.total_baggages: x } && x <= context.input.total_baggages)"]),
            permit("update_reservation_flights", [f"exists (c: String). (formerly within {WINDOW} {head}, "
                                                  'output.cabin: c } && c != "basic_economy")']),
            permit("book_reservation", [formerly("get_user_details", ["user_id"])]),
            permit("send_certificate", [formerly("get_user_details", ["user_id"])])])
    else:
        tools = {"get_order_details": Tool("GetOrderDetails", {"order_id": "String"},
                                           {"order_id": "String", "status": "String"})}
        pending = {"fact": {"tool": "get_order_details", "same_args": oid, "where": 'result.status == "pending"'}}
        delivered = {"fact": {"tool": "get_order_details", "same_args": oid, "where": 'result.status == "delivered"'}}
        writes = {"cancel_pending_order": ("pending", pending), "modify_pending_order_items": ("pending", pending),
                  "modify_pending_order_address": ("pending", pending),
                  "modify_pending_order_payment": ("pending", pending),
                  "return_delivered_order_items": ("delivered", delivered),
                  "exchange_delivered_order_items": ("delivered", delivered)}
        skills = tuple(skill(tool, rule) for tool, (_, rule) in writes.items())
        policy = "\n".join(permit(tool, [formerly("get_order_details", oid, {"status": status})])
                           for tool, (status, _) in writes.items())
        for tool in writes:
            tools[tool] = Tool(camel(tool), {"order_id": "String"}, {})
    return tools, Scenario(f"tau-bench {domain}", ("fact", "same_args", "where"), skills, policy)


def _tau_variants(task: Any, guarded: set[str]) -> Iterator[list[tuple[str, dict[str, Any]]]]:
    """The ground-truth actions, and copies that break them: a read dropped, a write on another id."""
    actions = [(a.name, dict(a.args)) for a in task.actions]
    yield actions
    for k, (name, _) in enumerate(actions):
        if name in _TAU_READS and any(n in guarded for n, _ in actions[k + 1:]):
            yield actions[:k] + actions[k + 1:]
    for k, (name, args) in enumerate(actions):
        if name not in guarded:
            continue
        for key in ("reservation_id", "order_id", "user_id"):
            if key in args:
                other = [a for a in actions[:k] if a[0] in _TAU_READS and key in a[1] and a[1][key] != args[key]]
                swapped = other[0][1][key] if other else args[key][:-1] + "0"
                yield [*actions[:k], (name, {**args, key: swapped}), *actions[k + 1:]]
        if "total_baggages" in args and args["total_baggages"] > 0:
            yield [*actions[:k], (name, {**args, "total_baggages": 0}), *actions[k + 1:]]


def tau_conversations(domain: str) -> tuple[dict[str, Tool], Scenario, list[list[dict[str, Any]]]] | None:
    """Each task's ground truth and its broken copies, run on the shipped tools and data; None without tau-bench."""
    try:
        from bench._tau import load_domain, tau_bench_root
    except ImportError:
        return None
    root = tau_bench_root()
    if root is None:
        return None
    loaded = load_domain(root, domain)
    tools, scenario = tau_rules(domain)
    guarded = {s["metadata"]["action_tool"] for s in scenario.skills}
    for name in loaded.tools:
        tools.setdefault(name, Tool(camel(name), {}, {}))
    from bench._tau import Action

    conversations = []
    for t, task in enumerate(loaded.tasks):
        for v, actions in enumerate(_tau_variants(task, guarded)):
            data = loaded.data()
            messages: list[dict[str, Any]] = [{"role": "user", "content": task.instruction}]
            for k, (name, args) in enumerate(actions):
                call_id = f"{domain}{t}_{v}_{k}"
                text, failed = loaded.call(data, Action(name, args))
                messages.append({"role": "assistant", "content": "",
                                 "tool_calls": [{"id": call_id, "name": name, "args": args}]})
                answer = {"role": "tool", "tool_call_id": call_id, "name": name, "content": text}
                if failed:
                    answer["status"] = "error"
                elif not text.startswith("{"):
                    answer["content"] = json.dumps({"text": text})
                messages.append(answer)
            conversations.append(messages)
    return tools, scenario, conversations


# --- the run -----------------------------------------------------------------------------------


@dataclasses.dataclass
class Tally:
    decisions: int = 0
    agree: int = 0
    allowed: int = 0
    disagreements: Counter[tuple[bool, bool]] = dataclasses.field(default_factory=Counter)
    labels: Counter[str] = dataclasses.field(default_factory=Counter)
    examples: list[tuple[list[dict[str, Any]], str]] = dataclasses.field(default_factory=list)


def compare(scenario: Scenario, conversations: Iterator[list[dict[str, Any]]], schema: str,
            tools: Mapping[str, Tool] = TOOLS) -> Tally:
    guarded = {s["metadata"]["action_tool"] for s in scenario.skills}
    tally = Tally()
    for messages in conversations:
        ours = our_decisions(scenario.skills, messages, count_failed_calls=scenario.count_failed_calls)
        theirs = dogwood_decisions(scenario.policy, schema, messages, tools)
        names = {c["id"]: c["name"] for m in messages for c in m.get("tool_calls", ())}
        for call_id, allowed in ours.items():
            if names[call_id] not in guarded:
                continue
            tally.decisions += 1
            tally.allowed += allowed
            if theirs[call_id] == allowed:
                tally.agree += 1
            else:
                tally.disagreements[(allowed, theirs[call_id])] += 1
                if scenario.classify is not None:
                    tally.labels[scenario.classify(messages, call_id)] += 1
                if len(tally.examples) < 3:
                    tally.examples.append((messages, call_id))
    return tally


def validate(scenario: Scenario, schema: str) -> list[str]:
    """Dogwood's validator's errors on the scenario's policy (none expected)."""
    from dogwood import native

    return list(native.validate_policy(scenario.policy, schema, None)["errors"])


def history_60() -> list[dict[str, Any]]:
    """A user message, 29 answered calls and a send_certificate call: 60 events."""
    rng = random.Random(60)
    messages: list[dict[str, Any]] = [{"role": "user", "content": "hi"}]
    for k in range(29):
        tool = rng.choice(["login", "get_user", "verify_identity", "get_reservation", "update_baggages"])
        call = {"id": f"t{k}", "name": tool, "args": _args(rng, tool)}
        messages.append({"role": "assistant", "content": "", "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": call["id"], "name": tool,
                         "content": json.dumps(_result(rng, tool, call["args"]))})
    action = {"id": "final", "name": "send_certificate", "args": {"user_id": "u1", "amount": 100}}
    messages.append({"role": "assistant", "content": "", "tool_calls": [action]})
    return messages


def timing_scenario() -> Scenario:
    """Three rules on one action: a login not undone, an identity verified (result field), an amount checked."""
    return Scenario(
        "timing", ("fact", "voided_by", "where", "check"),
        (skill("send_certificate",
               {"fact": {"tool": "login", "same_args": ["user_id"], "voided_by": ["logout"]}},
               {"fact": {"tool": "verify_identity", "same_args": {"user_id": "account_id"},
                         "where": "result.verified == true"}},
               {"check": {"where": "args.amount <= 400"}}),),
        permit("send_certificate",
               [_since("login", ["user_id"], None, undone_by="logout", undone_same=["user_id"]),
                formerly("verify_identity", {"user_id": "account_id"}, {"verified": True})],
               when=["context.input.amount <= 400"]))


def timing(schema: str, repeat: int) -> None:
    """One decision of each on the same 60-event history, CPU µs."""
    from dogwood import native

    from symfonic_graph.rules._messages import parse_turn
    from symfonic_graph.rules.gate import decide_call
    from symfonic_graph.rules.ruleset import rules_of

    messages = history_60()
    scenario = timing_scenario()
    trace, _ = dogwood_trace(messages)
    action = messages[-1]["tool_calls"][0]

    def best(fn: Callable[[], Any]) -> float:
        times = []
        for _ in range(5):
            start = time.process_time_ns()
            for _ in range(repeat):
                fn()
            times.append((time.process_time_ns() - start) / repeat / 1000)
        return min(times)

    ours = best(lambda: gate_decisions(messages, scenario.skills, {}))
    compiled = rules_of(scenario.skills)
    ours_compiled = best(lambda: gate_decisions(messages, compiled, {}))
    reading = best(lambda: parse_turn(messages))
    history, calls = parse_turn(messages)  # as the integrations hold it: each message read once per conversation
    decided = best(lambda: decide_call(compiled, calls[0], history, {}, filtered=True, count_failed=False))
    replay_full = best(lambda: native.replay(scenario.policy, schema, trace))
    replay_one = best(lambda: native.replay(scenario.policy, schema, trace.splitlines()[-1]))

    # Its binding's authorizer records request events only: the history is the 29 calls as requests.
    requests = [(_action(c["name"]), c["args"]) for m in messages[1:-1] for c in m.get("tool_calls", ())]
    per_request = float("inf")
    for _ in range(5):
        spent = 0
        for _ in range(max(repeat // 10, 5)):
            authorizer = native.NativeAuthorizer(scenario.policy, schema, None)
            for name, args in requests:
                authorizer.authorize_request(name, 'Agent::User::"agent"', 'Agent::Gateway::"g"', args)
            start = time.process_time_ns()
            authorizer.authorize_request(_action("send_certificate"), 'Agent::User::"agent"',
                                         'Agent::Gateway::"g"', action["args"])
            spent += time.process_time_ns() - start
        per_request = min(per_request, spent / max(repeat // 10, 5) / 1000)
    ours_verdict = gate_decisions(messages, compiled, {})[0].allowed
    theirs_verdict = dogwood_decisions(scenario.policy, schema, messages)[action["id"]]
    print(f"\none decision on the same 60-event history (a login not undone, an identity verified, an amount"
          f" checked; allowed: ours {ours_verdict}, Dogwood {theirs_verdict}; CPU µs, best of 5 x {repeat}):")
    print(f"  our gate, gate_decisions over plain dict skills (compiles them, reads the conversation):"
          f" {ours:8.1f}")
    print(f"  our gate, gate_decisions over a compiled RuleSet (as TurnMemory hands it):          {ours_compiled:8.1f}")
    print(f"    of which reading the 60 messages into events (parse_turn):                         {reading:8.1f}")
    print(f"  our gate, decide_call on the history already read (as the middleware and graph do):  {decided:8.1f}")
    print(f"  Dogwood replay of the 60-event trace (lowers the policy, parses, monitors every event):"
          f" {replay_full:8.1f}")
    print(f"  Dogwood replay of the action's event alone (the fixed cost: lowering, parsing):      {replay_one:8.1f}")
    print(f"  Dogwood NativeAuthorizer.authorize_request after {len(requests)} requests (stateful monitor,"
          f" the decision alone): {per_request:8.1f}")
    print(f"  ratio ours (history read) / Dogwood's decision alone: {decided / per_request:.2f}")
    print(f"  ratio ours (RuleSet) / Dogwood's decision alone: {ours_compiled / per_request:.2f};"
          f" ours (RuleSet) / Dogwood full replay: {ours_compiled / replay_full:.3f}")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=600, help="conversations per scenario")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=200, help="timing repetitions")
    parser.add_argument("--only", help="run only the scenarios whose name contains this")
    opts = parser.parse_args(argv)
    schema = cedar_schema()
    total = agree = 0
    print(f"{'scenario':45} {'kinds':38} {'decisions':>9} {'allowed':>7} {'agree':>7}"
          f" {'ours allow/Dogwood deny':>24} {'ours deny/Dogwood allow':>24}")
    for scenario in scenarios():
        if opts.only and opts.only not in scenario.name:
            continue
        errors = validate(scenario, schema)
        if errors:
            print(f"{scenario.name}: Dogwood's validator refuses the policy: {errors}")
            continue
        rng = random.Random(f"{opts.seed}:{scenario.name}")
        tally = compare(scenario, (conversation(rng, n) for n in range(opts.conversations)), schema)
        total += tally.decisions
        agree += tally.agree
        print(f"{scenario.name:45} {', '.join(scenario.kinds):38} {tally.decisions:9} {tally.allowed:7} {tally.agree:7}"
              f" {tally.disagreements[(True, False)]:24} {tally.disagreements[(False, True)]:24}")
        if tally.disagreements:
            print(f"    {scenario.expected or 'UNEXPECTED: no deliberate difference named'}")
            if tally.labels:
                print(f"    by kind: {dict(tally.labels)}")
            messages, call_id = tally.examples[0]
            print(f"    e.g. call {call_id} of {[_brief(m) for m in messages]}")
    for domain in ("airline", "retail"):
        if opts.only and opts.only not in f"tau-bench {domain}":
            continue
        found = tau_conversations(domain)
        if found is None:
            print(f"tau-bench {domain}: not found (set SYMFONIC_TAU_BENCH), skipped")
            continue
        tools, scenario, conversations = found
        tau_schema = cedar_schema(tools)
        errors = validate(scenario, tau_schema)
        if errors:
            print(f"{scenario.name}: Dogwood's validator refuses the policy: {errors}")
            continue
        tally = compare(scenario, iter(conversations), tau_schema, tools)
        total += tally.decisions
        agree += tally.agree
        print(f"{scenario.name + f' ({len(conversations)} runs)':45} {', '.join(scenario.kinds):38}"
              f" {tally.decisions:9} {tally.allowed:7} {tally.agree:7}"
              f" {tally.disagreements[(True, False)]:24} {tally.disagreements[(False, True)]:24}")
        if tally.disagreements:
            messages, call_id = tally.examples[0]
            print(f"    UNEXPECTED, e.g. call {call_id} of {[_brief(m)[:80] for m in messages]}")
    print(f"{'all':84} {total:9} {'':7} {agree:7}")
    timing(schema, opts.repeat)


def _brief(message: Mapping[str, Any]) -> str:
    if message["role"] == "user":
        return "user"
    if message["role"] == "tool":
        return f"-> {message['tool_call_id']} {'error' if message.get('status') == 'error' else message['content']}"
    return " + ".join(f"{c['id']} {c['name']}({','.join(map(str, c['args'].values()))})"
                      for c in message.get("tool_calls", ()))


if __name__ == "__main__":
    main()
