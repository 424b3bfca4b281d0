"""Compliance on BFCL's multi-turn tasks: the gate against the APIs' own preconditions (a script, not a test).

Needs the optional ``bench`` extra and a Neo4j 5 server::

    pip install --no-deps bfcl-eval==2026.3.23 mpmath     # or: pip install -e '.[bench]'
    eval "$(symfonic-graph server start)"                  # or export NEO4J_URI/NEO4J_USER/NEO4J_PASSWORD
    python -m bench.compliance                             # all 200 tasks, about a minute
    python -m bench.compliance --limit 20                  # a smoke run
    python -m bench.compliance tau                         # tau-bench's airline and retail policies instead

The preconditions that BFCL's API classes enforce in their own code (a login
before account actions, locked doors and a pressed brake before
``startEngine``, a running engine before ``setCruiseControl``) are authored
as skills in a fresh bench tenant. Each rule that a session may already meet
when the conversation starts (a task whose initial config is logged in)
carries a state predicate on ``session.<flag>``, and the gate reads the
session as the task starts. The rules are read back from the graph and every
decision below is the library's own (:func:`symfonic_graph.gate.gate_decisions`).

Over the 200 ground-truth call sequences and over perturbed copies (one
precondition call removed per copy), each sequence runs on fresh instances of
the real API classes twice: without the gate, and behind the gate with a
scripted model that obeys it (on a block it calls the tools the decision
names as missing, then retries). docs/compliance.md explains the columns.
The tenant's nodes are deleted at the end, also when the run fails.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from bench._bfcl import INSTALL_HINT, Call, bfcl_installed
from symfonic_graph.gate import GateDecision, gate_decisions
from symfonic_graph.learning.mining import mine_rules
from symfonic_graph.learning.traces import Outcome, Trace
from symfonic_graph.rules._messages import GATE_MARKER_KEY, GATE_MARKER_VALUE
from symfonic_graph.rules.ruleset import RuleSet, rules_of

# --- the authored rules ---------------------------------------------------------------


@dataclass(frozen=True)
class AuthoredRule:
    """Call ``requires`` before ``action``; ``unless`` names the session flag that already meets it."""

    label: str
    action: str
    requires: str
    unless: str | None
    source: str

    def precondition(self) -> list[Any]:
        """The skill's precondition list: the tool, and the state predicate when ``unless`` is set."""
        items: list[Any] = [self.requires]
        if self.unless:
            items.append({"state": {"path": f"session.{self.unless}", "op": "eq", "value": False}})
        return items


def _rules(label: str, requires: str, unless: str | None, source: str, actions: Iterable[str]) -> list[AuthoredRule]:
    return [AuthoredRule(label, action, requires, unless, source) for action in actions]


# Read from the API classes' source in bfcl-eval 2026.3.23 (the checks that return an "error" before acting).
RULES: tuple[AuthoredRule, ...] = (
    *_rules("Twitter login", "authenticate_twitter", "twitter_logged_in", "posting_api.py: `if not self.authenticated`",
            ["post_tweet", "retweet", "comment", "follow_user", "list_all_following", "unfollow_user"]),
    *_rules("Ticket login", "ticket_login", "ticket_logged_in", "ticket_api.py: `if not self.current_user`",
            ["create_ticket", "get_user_tickets"]),
    *_rules("Message login", "message_login", "message_logged_in", "message_api.py: `if not self.current_user`",
            ["send_message", "delete_message", "view_messages_sent", "search_messages", "get_message_stats"]),
    *_rules("Trading login", "trading_login", "trading_logged_in", "trading_bot.py: `if not self.authenticated`",
            ["place_order", "withdraw_funds", "get_account_info", "trading_logout", "fund_account",
             "remove_stock_from_watchlist", "get_watchlist", "get_order_history", "get_transaction_history"]),
    *_rules("Travel login", "authenticate_travel", "travel_logged_in", "travel_booking.py: token checks",
            ["register_credit_card", "get_credit_card_balance", "book_flight", "retrieve_invoice",
             "get_booking_history", "cancel_booking", "set_budget_limit", "purchase_insurance"]),
    *_rules("Lock doors before starting", "lockDoors", "doors_locked", "vehicle_control.py: startEngine",
            ["startEngine"]),
    *_rules("Brake before starting", "pressBrakePedal", None, "vehicle_control.py: startEngine", ["startEngine"]),
    *_rules("Engine before cruise control", "startEngine", "engine_running",
            "vehicle_control.py: setCruiseControl", ["setCruiseControl"]),
)
SESSION_FLAGS = tuple(sorted({r.unless for r in RULES if r.unless}))
BLIND: dict[str, Any] = {"session": dict.fromkeys(SESSION_FLAGS, False)}
"""The gate's state when it knows nothing of the session: every rule applies."""


def precondition_tools(rules: Iterable[AuthoredRule] = RULES) -> dict[str, set[str]]:
    """Precondition tool -> the actions it guards."""
    out: dict[str, set[str]] = {}
    for rule in rules:
        out.setdefault(rule.requires, set()).add(rule.action)
    return out


def session_state(instances: Mapping[str, Any]) -> dict[str, Any]:
    """The session flags as a task starts, read from its freshly loaded API instances."""
    flags = dict.fromkeys(SESSION_FLAGS, False)
    get = instances.get
    if (api := get("TwitterAPI")) is not None:
        flags["twitter_logged_in"] = bool(api.authenticated)
    if (api := get("TicketAPI")) is not None:
        flags["ticket_logged_in"] = bool(api.current_user)
    if (api := get("MessageAPI")) is not None:
        flags["message_logged_in"] = bool(api.current_user)
    if (api := get("TradingBot")) is not None:
        flags["trading_logged_in"] = bool(api.authenticated)
    if (api := get("TravelAPI")) is not None:
        flags["travel_logged_in"] = api.token_expires_in not in (None, 0)
    if (api := get("VehicleControlAPI")) is not None:
        flags["doors_locked"] = all(s == "locked" for s in api.doorStatus.values())
        flags["engine_running"] = api.engine_state == "running"
    return {"session": flags}


# --- sequences, perturbation, the scripted run (no bfcl needed) -------------------------------


class Apis(Protocol):
    """What a run needs from the APIs: call a tool, read the state."""

    def call(self, name: str, args: Mapping[str, Any]) -> tuple[str, bool, bool]: ...

    def state(self) -> Any: ...


@dataclass(frozen=True)
class Step:
    """One ground-truth call and the user turn it belongs to."""

    turn: int
    call: Call


@dataclass(frozen=True)
class Sequence_:
    """A call sequence to run: the ground truth or a perturbed copy (``removed`` = the dropped step's index)."""

    id: str
    questions: Sequence[str]
    steps: tuple[Step, ...]
    removed: int | None = None
    removed_call: Call | None = None


def perturbations(seq: Sequence_, guards: Mapping[str, set[str]]) -> list[Sequence_]:
    """One copy per precondition call that a later call of an action it guards depends on, with that call removed.

    Example:
        >>> s = Sequence_("t", ["q"], (Step(0, Call("login", {})), Step(0, Call("buy", {}))))
        >>> [(c.id, [st.call.name for st in c.steps]) for c in perturbations(s, {"login": {"buy"}})]
        [('t~0:login', ['buy'])]
    """
    copies = []
    for i, step in enumerate(seq.steps):
        guarded = guards.get(step.call.name)
        if not guarded or not any(later.call.name in guarded for later in seq.steps[i + 1:]):
            continue
        steps = seq.steps[:i] + seq.steps[i + 1:]
        copies.append(Sequence_(f"{seq.id}~{i}:{step.call.name}", seq.questions, steps, i, step.call))
    return copies


@dataclass
class Run:
    """What one sequence did: its messages, the APIs' precondition errors, the gate's blocks, the end state."""

    id: str
    messages: list[dict[str, Any]] = field(default_factory=list)
    precondition_errors: int = 0
    failed_calls: int = 0
    blocks: list[GateDecision] = field(default_factory=list)
    recovery_calls: int = 0
    unrecovered: int = 0
    state: Any = None


class _Runner:
    def __init__(self, env: Apis, rules: RuleSet | None, gate_state: object,
                 recovery_args: Callable[[str], Mapping[str, Any] | None], run: Run) -> None:
        self.env, self.rules, self.gate_state, self.recovery_args, self.run = env, rules, gate_state, recovery_args, run
        self.ids = 0

    def _ai(self, call: Call) -> dict[str, Any]:
        self.ids += 1
        return {"role": "assistant", "content": "",
                "tool_calls": [{"id": f"call_{self.ids}", "name": call.name, "args": dict(call.args)}]}

    def attempt(self, call: Call, depth: int = 0) -> None:
        """Propose ``call``; when the gate blocks it, call what is missing (as the message says), then retry."""
        ai = self._ai(call)
        msgs = self.run.messages
        if self.rules is not None:
            [decision] = gate_decisions([*msgs, ai], self.rules, self.gate_state)
            if not decision.allowed:
                self.run.blocks.append(decision)
                msgs += [ai, {"role": "tool", "tool_call_id": ai["tool_calls"][0]["id"], "name": call.name,
                              "content": decision.content(), "status": "error",
                              "response_metadata": {GATE_MARKER_KEY: GATE_MARKER_VALUE}}]
                args = [(tool, self.recovery_args(tool)) for tool in decision.missing]
                if depth >= 3 or any(a is None for _, a in args):
                    self.run.unrecovered += 1  # the model does not know how to call what is missing: it gives up
                    return
                for tool, tool_args in args:
                    self.run.recovery_calls += 1
                    self.attempt(Call(tool, dict(tool_args or {})), depth + 1)
                self.attempt(call, depth + 1)
                return
        self._execute(ai, call)

    def _execute(self, ai: dict[str, Any], call: Call) -> None:
        text, failed, precondition_failed = self.env.call(call.name, call.args)
        self.run.failed_calls += failed
        self.run.precondition_errors += precondition_failed
        result: dict[str, Any] = {"role": "tool", "tool_call_id": ai["tool_calls"][0]["id"], "name": call.name,
                                  "content": text}
        if failed:
            result["status"] = "error"
        self.run.messages += [ai, result]


def run_sequence(
    seq: Sequence_,
    env: Apis,
    *,
    rules: RuleSet | Iterable[Any] | None = None,
    gate_state: object = None,
    recovery_args: Callable[[str], Mapping[str, Any] | None] = lambda tool: None,
) -> Run:
    """Run ``seq`` on ``env``, each call its own model step; behind the gate when ``rules`` is given.

    Behind the gate, a blocked call is answered with the gate's error and the
    scripted model calls each tool in ``decision.missing`` with
    ``recovery_args(tool)`` (the removed call's arguments first), then retries.
    """
    run = Run(seq.id)
    removed = seq.removed_call

    def args_for(tool: str) -> Mapping[str, Any] | None:
        if removed is not None and removed.name == tool:
            return removed.args
        return recovery_args(tool)

    runner = _Runner(env, None if rules is None else rules_of(rules), gate_state, args_for, run)
    turn = -1
    for step in seq.steps:
        while turn < step.turn:
            turn += 1
            run.messages.append({"role": "user", "content": seq.questions[turn] if turn < len(seq.questions) else ""})
        runner.attempt(step.call)
    run.state = env.state()
    return run


# --- traces and mining ------------------------------------------------------------------


def make_trace(id: str, messages: Sequence[Any], outcome: Outcome | None) -> Trace:
    """One recorded conversation, as the library's miner and replay read it."""
    return Trace(id=id, messages=list(messages), outcome=outcome)


# --- the benchmark ------------------------------------------------------------------------


@dataclass
class Row:
    """One line of the results table."""

    name: str
    sequences: int = 0
    calls: int = 0
    errors_no_gate: int = 0
    seqs_errors_no_gate: int = 0
    gt_state_no_gate: int = 0
    blocks: int = 0
    seqs_blocked: int = 0
    errors_gated: int = 0
    gt_state_gated: int = 0
    unrecovered: int = 0
    caught: int = 0  # sequences blocked that the API would have failed
    needless: int = 0  # sequences blocked that the API would have run without a precondition error
    missed: int = 0  # sequences the API failed on a precondition and the gate did not block

    def add(self, n_calls: int, plain: Run, gated: Run, truth_state: Any) -> None:
        self.sequences += 1
        self.calls += n_calls
        self.errors_no_gate += plain.precondition_errors
        self.seqs_errors_no_gate += plain.precondition_errors > 0
        self.gt_state_no_gate += plain.state == truth_state
        self.blocks += len(gated.blocks)
        self.seqs_blocked += bool(gated.blocks)
        self.errors_gated += gated.precondition_errors
        self.gt_state_gated += gated.state == truth_state
        self.unrecovered += gated.unrecovered
        failed, blocked = plain.precondition_errors > 0, bool(gated.blocks)
        self.caught += failed and blocked
        self.needless += blocked and not failed
        self.missed += failed and not blocked

    def breakdown(self) -> str:
        return (f"{self.name}: {self.caught} caught (blocked; the API would have failed), "
                f"{self.needless} blocked needlessly, {self.missed} missed (the API failed; no block)")

    def cells(self) -> list[str]:
        return [self.name, f"{self.sequences:,}", f"{self.calls:,}",
                f"{self.errors_no_gate} / {self.seqs_errors_no_gate}", f"{self.gt_state_no_gate}",
                f"{self.blocks} / {self.seqs_blocked}", f"{self.errors_gated}",
                f"{self.gt_state_gated}" + (f" ({self.unrecovered} gave up)" if self.unrecovered else "")]


HEADER = ["sequences", "n", "calls", "API precondition errors, no gate (calls / sequences)",
          "ground-truth end state, no gate", "gate blocks (calls / sequences)",
          "API precondition errors behind the gate", "ground-truth end state, gate + obeying model"]


def table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def default_recovery_args(task: Any) -> Callable[[str], Mapping[str, Any] | None]:
    """How the scripted model calls a missing tool when no removed call tells it (a false block's recovery)."""
    cfg = task.initial_config
    twitter = cfg.get("TwitterAPI", {})
    users = list(cfg.get("MessageAPI", {}).get("user_map", {}).values())
    table_: dict[str, Mapping[str, Any]] = {
        "authenticate_twitter": {"username": twitter.get("username", "user"),
                                 "password": twitter.get("password", "pw")},
        "ticket_login": {"username": "user", "password": "password"},
        "message_login": {"user_id": users[0] if users else "USR001"},
        "trading_login": {"username": "user", "password": "password"},
        "authenticate_travel": {"client_id": "client", "client_secret": "secret", "refresh_token": "token",
                                "grant_type": "read_write", "user_first_name": "A", "user_last_name": "B"},
        "lockDoors": {"unlock": False, "door": ["driver", "passenger", "rear_left", "rear_right"]},
        "pressBrakePedal": {"pedalPosition": 1.0},
        "startEngine": {"ignitionMode": "START"},
    }
    return table_.get


async def seed_rules(store: Any, scope: Any) -> list[Any]:
    """Write :data:`RULES` as authored skills in ``scope``; return the skills read back from the graph."""
    from symfonic_graph import ProceduralLayer

    layer = ProceduralLayer(store)
    for rule in RULES:
        await layer.seed_authored_skill(
            scope, label=f"{rule.label} ({rule.action})", steps=[rule.action], source_tag="authored:bench-compliance",
            action_tool=rule.action, precondition=rule.precondition(), context=rule.source,
            identifier=f"{rule.requires}-before-{rule.action}")
    return await layer.query_skills(scope)


def evaluate(tasks: Sequence[Any], rules: RuleSet) -> tuple[list[Row], list[Any], dict[str, int]]:
    """Run every sequence; return the table rows, the ground-truth traces and the removed calls per tool."""
    from bench._bfcl import Env as BfclEnv

    guards = precondition_tools()
    rows = {k: Row(k) for k in ("ground truth, session state", "ground truth, blind",
                                "perturbed, session state", "perturbed, blind")}
    traces: list[Any] = []
    removed: dict[str, int] = {}
    for task in tasks:
        seq = Sequence_(task.id, task.questions,
                        tuple(Step(t, c) for t, turn in enumerate(task.turns) for c in turn))
        truth = run_sequence(seq, BfclEnv(task))
        traces.append(make_trace(task.id, truth.messages, "success"))
        session = session_state(BfclEnv(task).instances)
        recovery = default_recovery_args(task)
        for kind, copy in [("ground truth", seq)] + [("perturbed", c) for c in perturbations(seq, guards)]:
            if copy.removed_call is not None:
                removed[copy.removed_call.name] = removed.get(copy.removed_call.name, 0) + 1
            plain = truth if copy is seq else run_sequence(copy, BfclEnv(task))
            for label, state in (("session state", session), ("blind", BLIND)):
                gated = run_sequence(copy, BfclEnv(task), rules=rules, gate_state=state, recovery_args=recovery)
                rows[f"{kind}, {label}"].add(len(copy.steps), plain, gated, truth.state)
    return list(rows.values()), traces, removed


def mined_table(traces: Sequence[Any], *, min_support: int, min_confidence: float) -> str:
    """The mined proposals beside the authored rules, or the line saying mining is skipped."""
    name = "symfonic_graph.learning.mining"
    proposals = mine_rules(traces, min_support=min_support, min_confidence=min_confidence)
    mined = {(p.action, p.precondition): p for p in proposals}
    rows = []
    for requires, actions in sorted(precondition_tools().items()):
        hits = [mined[a, requires] for a in sorted(actions) if (a, requires) in mined]
        evidence = ", ".join(f"`{p.action}` {p.support} / {p.confidence:.2f}" for p in hits)
        cell = f"{len(hits)}" + (f": {evidence}" if hits else "")
        rows.append([f"`{requires}` before {len(actions)} action(s)", "yes", cell])
    authored = {(r.action, r.requires) for r in RULES}
    for (action, requires), p in sorted(mined.items()):
        if (action, requires) not in authored:
            rows.append([f"`{requires}` before `{action}`", "no", f"{p.support} / {p.confidence:.2f}"])
    found = len(authored & mined.keys())
    head = (f"{name}: mined {len(proposals)} rule(s) from {len(traces)} ground-truth traces "
            f"(min_support={min_support}, min_confidence={min_confidence}); {found} of {len(authored)} authored found")
    return head + "\n\n" + table(["rule", "authored", "mined (support / confidence)"], rows)


async def main_async(args: argparse.Namespace) -> None:
    from bench._bfcl import load_tasks
    from symfonic_graph import GraphMemoryStore, MemoryScope

    started = time.perf_counter()
    tasks = load_tasks(limit=args.limit)
    uri, user, pw = (os.environ.get(k, d) for k, d in
                     (("NEO4J_URI", "bolt://127.0.0.1:7687"), ("NEO4J_USER", "neo4j"), ("NEO4J_PASSWORD", "")))
    tenant = f"bench-compliance-{uuid.uuid4().hex[:12]}"
    async with GraphMemoryStore.connect(uri, user, pw, database=os.environ.get("NEO4J_DATABASE") or None) as store:
        await store.apply_schema()
        try:
            skills = await seed_rules(store, MemoryScope(tenant))
        finally:
            if not args.keep:
                await store.driver.execute_query("MATCH (n {tenant_id: $t}) DETACH DELETE n", {"t": tenant},
                                                 database_=store.database)
    print(f"{len(skills)} authored skills in tenant {tenant} ({'kept' if args.keep else 'deleted after reading'}); "
          f"{len(tasks)} tasks, {sum(len(t.calls) for t in tasks):,} ground-truth calls", flush=True)
    rows, traces, removed = evaluate(tasks, rules_of(skills))
    print()
    print(table(HEADER, [r.cells() for r in rows]))
    print()
    by_count = sorted(removed.items(), key=lambda kv: -kv[1])
    print("removed per perturbed copy: " + ", ".join(f"{k} {v}" for k, v in by_count))
    for row in rows:
        print(row.breakdown())
    print()
    print(mined_table(traces, min_support=args.min_support, min_confidence=args.min_confidence))
    print(f"\nran in {time.perf_counter() - started:.1f} s")


def main(argv: Sequence[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["tau"]:  # python -m bench.compliance tau [--domain D] [--limit N]: the tau-bench policies
        from bench.tau_compliance import main as tau_main

        tau_main(argv[1:])
        return
    parser = argparse.ArgumentParser(prog="python -m bench.compliance", description=__doc__.split("\n")[0],
                                     epilog="`python -m bench.compliance tau --help`: the tau-bench policies "
                                            "(bench/tau_compliance.py)")
    parser.add_argument("--limit", type=int, default=None, help="only the first N tasks")
    parser.add_argument("--min-support", type=int, default=5)
    parser.add_argument("--min-confidence", type=float, default=0.95)
    parser.add_argument("--keep", action="store_true", help="keep the bench tenant's skills in the graph")
    args = parser.parse_args(argv)
    if not bfcl_installed():
        print(INSTALL_HINT, file=sys.stderr)
        raise SystemExit(2)
    import anyio

    anyio.run(main_async, args)


if __name__ == "__main__":
    main()
