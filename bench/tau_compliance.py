"""Compliance on tau-bench's airline and retail policies: the gate against their clauses (a script, not a test).

Needs a copy of tau-bench (``$SYMFONIC_TAU_BENCH`` or ``../shared/tau-bench``, see bench/_tau.py) and
a Neo4j 5 server::

    eval "$(symfonic-graph server start)"        # or export NEO4J_URI/NEO4J_USER/NEO4J_PASSWORD
    python -m bench.tau_compliance               # both domains, every task
    python -m bench.tau_compliance --domain airline --limit 10
    python -m bench.tau_compliance --traces DIR  # also DIR/tau_<domain>.jsonl.gz, for `rules replay`

``bench/policies/tau_<domain>.yaml`` is seeded into a fresh bench tenant, read back from the graph,
and the tenant is deleted (also when the run fails). Each task's ground-truth actions run on the
shipped tools and data, each call one model step; before each write the harness inserts the reads a
compliant agent makes (the user's profile, the reservation or order the write names; in retail, an
email lookup when the task has no lookup before its first write), and the gate
(:func:`symfonic_graph.gate.gate_decisions` at tau-bench's clock, 2024-05-15T15:00:00) decides every
write. Then, per clause, a perturbed copy of each task that reaches it breaks it (an argument, a
field of the data, a read left out or a write repeated) and must be blocked at the breaking call.
docs/compliance.md explains the tables.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import sys
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from bench._tau import DOMAINS, WRITES, Action, Domain, Task, load_domain, tau_bench_root
from bench.tau_perturb import PERTURBATIONS, Perturbation
from symfonic_graph.gate import GateDecision, gate_decisions
from symfonic_graph.rules._messages import GATE_MARKER_KEY, GATE_MARKER_VALUE
from symfonic_graph.rules.ruleset import RuleSet, rules_of

NOW = datetime(2024, 5, 15, 15, 0, tzinfo=UTC)
"""tau-bench's airline clock ("The current time is 2024-05-15 15:00:00 EST"; the data's times carry no zone)."""
POLICIES = Path(__file__).resolve().parent / "policies"
FINDERS = ("find_user_id_by_email", "find_user_id_by_name_zip")


def policy_file(domain: str) -> Path:
    return POLICIES / f"tau_{domain}.yaml"


# --- the clauses of a policy file ------------------------------------------------------------


@dataclass(frozen=True)
class Clause:
    """One precondition entry of a skill: its tool, position and the words that name it (messages, tools)."""

    tool: str
    position: int
    names: tuple[str, ...]

    @property
    def title(self) -> str:
        return " OR ".join(self.names)


def _names(entry: Any) -> tuple[str, ...]:
    if isinstance(entry, str):
        return (entry,)
    if "any" in entry:
        return tuple(n for alt in entry["any"] for n in _names(alt))
    for kind in ("fact", "check", "limit"):
        if kind in entry:
            body = entry[kind]
            return (body.get("message") or body.get("where") or body.get("tool", kind),)
    return (str(entry),)


def clauses(domain: str) -> list[Clause]:
    """Every precondition entry of ``bench/policies/tau_<domain>.yaml``, in file order."""
    data = yaml.safe_load(policy_file(domain).read_text(encoding="utf-8"))
    return [Clause(skill["action_tool"], i, _names(entry))
            for skill in data["skills"] for i, entry in enumerate(skill["precondition"])]


def clause_for(all_clauses: Sequence[Clause], tool: str, words: str) -> Clause:
    """The one clause of ``tool`` whose names contain ``words``."""
    found = [c for c in all_clauses if c.tool == tool and any(words in n for n in c.names)]
    if len(found) != 1:
        raise LookupError(f"{tool}: {len(found)} clauses name {words!r}")
    return found[0]


# --- one run: ground truth or a perturbed copy -----------------------------------------------


@dataclass
class WriteCall:
    """A write the conversation proposed: where, what the gate said, what the tool said."""

    index: int
    action: Action
    decision: GateDecision | None
    failed: bool | None  # the tool's own verdict; None when the gate blocked it (it never ran)
    breaking: bool = False


@dataclass
class Run:
    task: str
    messages: list[dict[str, Any]] = field(default_factory=list)
    writes: list[WriteCall] = field(default_factory=list)
    inserted: int = 0
    applicable: bool = True

    @property
    def blocks(self) -> list[WriteCall]:
        return [w for w in self.writes if w.decision is not None and not w.decision.allowed]


def reads_before(domain: Domain, data: Mapping[str, Any], task: Task, action: Action,
                 authenticated: str | None) -> list[Action]:
    """The reads a compliant agent makes before ``action`` (the rules of bench/policies read their results)."""
    args, name = action.args, action.name
    if domain.name == "airline":
        if name == "book_reservation":
            return [Action("get_user_details", {"user_id": args.get("user_id")})]
        if name == "send_certificate":
            user = data["users"].get(args.get("user_id")) or {}
            return [Action("get_user_details", {"user_id": args.get("user_id")}),
                    *(Action("get_reservation_details", {"reservation_id": r}) for r in user.get("reservations", []))]
        return [Action("get_user_details", {"user_id": task.user_id}),
                Action("get_reservation_details", {"reservation_id": args.get("reservation_id")})]
    reads = []
    if authenticated is None:
        user = data["users"].get(task.user_id) or {}
        reads.append(Action("find_user_id_by_email", {"email": user.get("email", "")}))
    if "order_id" in args:
        reads += [Action("get_user_details", {"user_id": authenticated or task.user_id}),
                  Action("get_order_details", {"order_id": args["order_id"]})]
    return reads


def _key(action: Action) -> tuple[str, str]:
    return action.name, repr(sorted(action.args.items()))


class _Player:
    def __init__(self, domain: Domain, task: Task, rules: RuleSet | None, data: dict[str, Any],
                 drop: frozenset[str] = frozenset()) -> None:
        self.domain, self.task, self.rules, self.data, self.drop = domain, task, rules, data, drop
        self.run = Run(task.id, [{"role": "user", "content": task.instruction}])
        self.fresh: set[tuple[str, str]] = set()
        self.authenticated: str | None = None
        self.ids = 0

    def _ai(self, action: Action) -> dict[str, Any]:
        self.ids += 1
        return {"role": "assistant", "content": "",
                "tool_calls": [{"id": f"call_{self.ids}", "name": action.name, "args": dict(action.args)}]}

    def _execute(self, ai: dict[str, Any], action: Action) -> bool:
        text, failed = self.domain.call(self.data, action)
        result: dict[str, Any] = {"role": "tool", "tool_call_id": ai["tool_calls"][0]["id"], "name": action.name,
                                  "content": text}
        if failed:
            result["status"] = "error"
        self.run.messages += [ai, result]
        if action.name in FINDERS and not failed:
            self.authenticated = text
        return failed

    def read(self, action: Action, *, inserted: bool) -> None:
        if action.name in self.drop or (inserted and _key(action) in self.fresh):
            return
        self.run.inserted += inserted
        self._execute(self._ai(action), action)
        self.fresh.add(_key(action))

    def write(self, action: Action, *, breaking: bool = False, insert_reads: bool = True) -> WriteCall:
        if insert_reads:
            for read in reads_before(self.domain, self.data, self.task, action, self.authenticated):
                self.read(read, inserted=True)
        ai = self._ai(action)
        decision = None
        if self.rules is not None:
            [decision] = gate_decisions([*self.run.messages, ai], self.rules, {}, now=NOW)
        call = WriteCall(len(self.run.messages), action, decision, None, breaking)
        self.run.writes.append(call)
        if decision is not None and not decision.allowed:
            self.run.messages += [ai, {"role": "tool", "tool_call_id": ai["tool_calls"][0]["id"], "name": action.name,
                                       "content": decision.content(), "status": "error",
                                       "response_metadata": {GATE_MARKER_KEY: GATE_MARKER_VALUE}}]
            return call
        call.failed = self._execute(ai, action)
        if not call.failed:
            self.fresh.clear()  # the world changed: a compliant agent reads again
        return call


def play(domain: Domain, task: Task, rules: RuleSet | None, perturbation: Perturbation | None = None) -> Run:
    """Run ``task``'s ground truth (or the copy ``perturbation`` breaks) on fresh data, behind the gate if ``rules``.

    A perturbed run stops after its breaking call. ``Run.applicable`` is False when the
    perturbation does not apply to the task (no call of its tool, or nothing to break).
    """
    data = domain.data()
    target = next((i for i, a in enumerate(task.actions) if perturbation and a.name == perturbation.tool), None)
    if perturbation is not None and (target is None or (perturbation.data is not None and not perturbation.data(
            data, task.actions[target], task))):
        return Run(task.id, applicable=False)
    player = _Player(domain, task, rules, data, perturbation.drop if perturbation else frozenset())
    for i, action in enumerate(task.actions):
        if perturbation is not None and i == target:
            if perturbation.args is not None:
                args = perturbation.args(data, action, task)
                if args is None:
                    return Run(task.id, applicable=False)
                action = replace(action, args=args)
            call = player.write(action, breaking=not perturbation.repeat)
            if perturbation.repeat:
                if call.failed is not False:
                    return Run(task.id, applicable=False)  # the first call was blocked or failed: it did not happen
                player.write(action, breaking=True, insert_reads=False)
            player.drop = frozenset()
        elif action.name in WRITES[domain.name]:
            player.write(action)
        else:
            player.read(action, inserted=False)
        if perturbation is not None and i == target:
            break  # nothing after the breaking call is judged
    return player.run


# --- the benchmark -------------------------------------------------------------------------------


@dataclass
class GroundTruth:
    tasks: int = 0
    writes: int = 0
    inserted: int = 0
    refused_by_tool: int = 0  # writes the shipped tool answered with an error (the gate did not block them)
    blocks: list[tuple[str, WriteCall]] = field(default_factory=list)


@dataclass
class ClauseRow:
    clause: Clause
    how: str
    copies: int = 0
    at_breaking: int = 0
    named: int = 0
    earlier: int = 0
    missed: list[str] = field(default_factory=list)


def ground_truth(domain: Domain, tasks: Sequence[Task], rules: RuleSet) -> tuple[GroundTruth, dict[str, Run]]:
    """The ground-truth runs behind the gate, and their totals."""
    out, runs = GroundTruth(), {}
    for task in tasks:
        run = runs[task.id] = play(domain, task, rules)
        out.tasks += 1
        out.writes += len(run.writes)
        out.inserted += run.inserted
        out.refused_by_tool += sum(1 for w in run.writes if w.failed)
        out.blocks += [(task.id, w) for w in run.blocks]
    return out, runs


def perturbed(domain: Domain, tasks: Sequence[Task], rules: RuleSet, truth: Mapping[str, Run]) -> list[ClauseRow]:
    """Per clause: its perturbed copies and where the gate blocked them (``truth``: the ground-truth run per task)."""
    all_clauses = clauses(domain.name)
    rows = []
    for p in PERTURBATIONS[domain.name]:
        row = ClauseRow(clause_for(all_clauses, p.tool, p.clause), p.how)
        rows.append(row)
        for task in tasks:
            run = play(domain, task, rules, p)
            if not run.applicable:
                continue
            row.copies += 1
            truth_blocked = {i for i, w in enumerate(truth[task.id].writes) if w.decision and not w.decision.allowed}
            breaking = next(i for i, w in enumerate(run.writes) if w.breaking)
            call = run.writes[breaking]
            if any(w.decision and not w.decision.allowed and i not in truth_blocked
                   for i, w in enumerate(run.writes[:breaking])):
                row.earlier += 1
            if call.decision is None or call.decision.allowed:
                row.missed.append(task.id)
                continue
            row.at_breaking += 1
            text = call.decision.content() or ""
            row.named += any(n in text for n in row.clause.names)
    uncovered = [c for c in all_clauses if c not in {r.clause for r in rows}]
    rows += [ClauseRow(c, "none") for c in uncovered]
    rows.sort(key=lambda r: (all_clauses.index(r.clause), r.how))
    return rows


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows])


def _short(text: str, n: int = 90) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def report(domain: str, gt: GroundTruth, rows: Sequence[ClauseRow]) -> str:
    out = [f"## {domain}", "",
           f"ground truth: {gt.tasks} tasks, {gt.writes} write calls ({gt.inserted} reads inserted), "
           f"{len(gt.blocks)} blocked, {gt.refused_by_tool} answered with an error by the shipped tool"]
    for task_id, w in gt.blocks:
        reason = (w.decision.content() or "").splitlines()[0] if w.decision else ""
        call = f"{w.action.name}({_short(repr(dict(w.action.args)), 80)})"
        out.append(f"  blocked: {task_id} {call}: {_short(reason, 160)}")
    out += ["", table(["tool", "clause", "perturbation", "copies", "blocked at the breaking call",
                       "block names the clause", "other blocks before it", "not blocked"],
                      [[f"`{r.clause.tool}`", _short(r.clause.title), r.how,
                        str(r.copies), str(r.at_breaking), str(r.named), str(r.earlier),
                        str(len(r.missed)) + (f" ({', '.join(r.missed[:3])})" if r.missed else "")] for r in rows])]
    return "\n".join(out)


async def seed_policy(store: Any, tenant: str, domain: str) -> list[Any]:
    """Seed ``bench/policies/tau_<domain>.yaml`` into ``tenant``, namespace ``domain``; the skills read back."""
    from symfonic_graph import MemoryScope, ProceduralLayer
    from symfonic_graph.ops.seedfile import load_seed_file
    from symfonic_graph.ops.seeding import apply_seed, plan_seed

    scope = MemoryScope(tenant, domain)
    await apply_seed(store, plan_seed(load_seed_file(policy_file(domain)), scope))
    return await ProceduralLayer(store).query_skills(scope)


async def read_rules(domains: Sequence[str], keep: bool) -> dict[str, list[Any]]:
    from symfonic_graph import GraphMemoryStore

    uri, user, pw = (os.environ.get(k, d) for k, d in
                     (("NEO4J_URI", "bolt://127.0.0.1:7687"), ("NEO4J_USER", "neo4j"), ("NEO4J_PASSWORD", "")))
    tenant = f"bench-tau-{uuid.uuid4().hex[:12]}"
    async with GraphMemoryStore.connect(uri, user, pw, database=os.environ.get("NEO4J_DATABASE") or None) as store:
        await store.apply_schema()
        try:
            skills = {d: await seed_policy(store, tenant, d) for d in domains}
        finally:
            if not keep:
                await store.driver.execute_query("MATCH (n {tenant_id: $t}) DETACH DELETE n", {"t": tenant},
                                                 database_=store.database)
    print(f"seeded {', '.join(f'{len(s)} {d} skills' for d, s in skills.items())} into tenant {tenant} "
          f"(namespace = domain; {'kept' if keep else 'deleted after reading'})", flush=True)
    return skills


def write_traces(domain: Domain, tasks: Sequence[Task], folder: Path) -> Path:
    """The conversations without the gate, as ``rules replay`` reads them: ground truths, then perturbed copies.

    One JSON line per conversation, ``{"id", "messages", "outcome"}``: a ground truth is
    ``<task id>`` (outcome success), a perturbed copy ``<task id>~<tool>:<how>`` (failure),
    stopping after its breaking call.
    """
    path = folder / f"tau_{domain.name}.jsonl.gz"
    folder.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        for task in tasks:
            fh.write(json.dumps({"id": task.id, "messages": play(domain, task, None).messages,
                                 "outcome": "success"}) + "\n")
        for p in PERTURBATIONS[domain.name]:
            for task in tasks:
                run = play(domain, task, None, p)
                if run.applicable:
                    fh.write(json.dumps({"id": f"{task.id}~{p.tool}:{p.how}", "messages": run.messages,
                                         "outcome": "failure"}) + "\n")
    return path


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.tau_compliance", description=__doc__.split("\n")[0])
    parser.add_argument("--domain", choices=DOMAINS, action="append", help="a domain (default: both)")
    parser.add_argument("--limit", type=int, default=None, help="only the first N tasks of each domain")
    parser.add_argument("--keep", action="store_true", help="keep the bench tenant's skills in the graph")
    parser.add_argument("--traces", type=Path, default=None, metavar="DIR",
                        help="also write the conversations (no gate) to DIR/tau_<domain>.jsonl.gz")
    args = parser.parse_args(argv)
    root = tau_bench_root()
    if root is None:
        print("tau-bench not found: set SYMFONIC_TAU_BENCH or put it at ../shared/tau-bench", file=sys.stderr)
        raise SystemExit(2)
    import anyio

    started = time.perf_counter()
    domains = tuple(args.domain or DOMAINS)
    skills = anyio.run(read_rules, domains, args.keep)
    for name in domains:
        domain = load_domain(root, name)
        tasks = domain.tasks[:args.limit]
        rules = rules_of(skills[name])
        print()
        gt, truth = ground_truth(domain, tasks, rules)
        print(report(name, gt, perturbed(domain, tasks, rules, truth)))
        if args.traces is not None:
            print(f"traces: {write_traces(domain, tasks, args.traces)}")
    print(f"\nran in {time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main()
