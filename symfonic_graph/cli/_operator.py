"""Operator commands: seed, cypher run, skills, retract/restore, publish/discard (triggers: ``_triggers``)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import anyio

from symfonic_graph._store import GraphMemoryStore
from symfonic_graph.cli._common import actor_of, add_json_flag, add_scope_flags, add_who_flags, emit, scope_of
from symfonic_graph.cli._connect import open_store, run_script, run_statement
from symfonic_graph.cli._script_effects import Effects, follow_up, snapshot, tenant_literals
from symfonic_graph.cli._tenants import notice_if_empty
from symfonic_graph.errors import ValidationError
from symfonic_graph.memory.layers import ProceduralLayer
from symfonic_graph.ops.seedfile import load_seed_file, split_cypher_script
from symfonic_graph.ops.seeding import apply_seed, count_changes, plan_seed
from symfonic_graph.rules.preconditions import action_tool_of
from symfonic_graph.shape.models import Skill
from symfonic_graph.shape.scope import MemoryScope, describe_scope

_SEED_TIMEOUT = 290.0  # seconds for each transaction of a seed file (one, or one per batch)
_ROWS_SHOWN = 100  # rows of a statement's result that `cypher run` prints


def register(sub: Any) -> None:
    seed = sub.add_parser("seed", help="seed skills and triggers from a YAML or JSON file (all or nothing)")
    seed.add_argument("file", type=Path)
    seed.add_argument("--tenant", default=None, help="tenant id, unless the file names its scopes")
    seed.add_argument("--namespace", default=None, help="namespace inside the tenant (default: tenant-wide)")
    seed.add_argument("--write-id", default=None, help="stage the write; `publish` makes it visible")
    seed.add_argument("--plan", action="store_true",
                      help="print what the file would create, update or leave unchanged, and write nothing")
    add_json_flag(seed)
    add_who_flags(seed)  # recorded per changed skill by a live seed; a staged one is recorded by `publish`
    seed.set_defaults(handler=lambda a: anyio.run(_seed, a))

    cypher = sub.add_parser("cypher", help="run plain Cypher scripts")
    cypher_actions = cypher.add_subparsers(dest="action", required=True, metavar="ACTION")
    run = cypher_actions.add_parser(
        "run", help="run a .cypher script in one transaction (all or nothing)",
        description="Statements end with `;` at the end of a line. The whole file runs in one transaction: "
                    "a failure leaves nothing of it and names the statement.")
    run.add_argument("file", type=Path)
    run.add_argument("--per-statement", action="store_true",
                     help="commit each statement on its own (e.g. schema changes, or CALL ... IN TRANSACTIONS); "
                          "a failure stops the script with the earlier statements committed")
    run.set_defaults(handler=lambda a: anyio.run(_cypher_run, a))

    for name, helptext in (("retract", "hide a node from every read"), ("restore", "undo retract")):
        p = sub.add_parser(name, help=helptext)
        p.add_argument("node_id", help="the node's id, or a skill's or trigger's identifier in the scope")
        add_scope_flags(p)
        add_json_flag(p)
        if name == "retract":
            p.add_argument("--reason", default="", help="why (kept for audit, and recorded with the change)")
        add_who_flags(p, reason=name != "retract")
        p.set_defaults(handler=lambda a, n=name: anyio.run(_marker, a, n))
    for name, helptext in (("publish", "make a staged write visible"), ("discard", "delete a staged write")):
        p = sub.add_parser(name, help=helptext)
        p.add_argument("write_id")
        add_scope_flags(p)
        add_json_flag(p)
        if name == "publish":
            add_who_flags(p)
        p.set_defaults(handler=lambda a, n=name: anyio.run(_staged, a, n))


def register_skills(skills_actions: Any) -> None:
    """``skills list`` (approve, reject, shadow and enforce are in ``_rules_trust``)."""
    listing = skills_actions.add_parser("list", help="skills the scope sees, in turn order")
    add_scope_flags(listing)
    add_json_flag(listing)
    listing.add_argument("--drafts", action="store_true", help="include drafts")
    listing.add_argument("--write-id", default=None,
                         help="preview this staged write: the catalog as it will be after publish")
    listing.add_argument("--retracted", action="store_true", help="include retracted skills (marked)")
    listing.set_defaults(handler=lambda a: anyio.run(_skills_list, a))


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def _changes(counts: dict[str, int]) -> str:
    reverted = f", {counts['reverted']} reverted a hand edit" if counts.get("reverted") else ""
    return f"{counts['created']} created, {counts['updated']} updated, {counts['unchanged']} unchanged{reverted}"


async def _seed(args: argparse.Namespace) -> int:
    default = MemoryScope(args.tenant, args.namespace) if args.tenant is not None else None
    plan = plan_seed(load_seed_file(args.file), default, write_id=args.write_id)  # validates the whole file
    if args.write_id is not None and (args.actor is not None or args.reason is not None):
        raise ValidationError("--actor" if args.actor is not None else "--reason",
                              "a staged seed records nothing yet; give it to `publish`, which records the change")
    async with open_store() as store:
        for tenant in dict.fromkeys(block.scope.tenant_id for block in plan.scopes):
            await notice_if_empty(store, tenant, doing=" yet: this seed creates it" if not args.plan else " yet")
        changes = await count_changes(store, plan)
        if not args.plan:
            # A file's one transaction (or each batch of a large file): allow the time a large one needs.
            patient = GraphMemoryStore(store.driver, database=store.database, query_timeout=_SEED_TIMEOUT)
            result = await apply_seed(patient, plan, actor=actor_of(args), reason=args.reason)
    staged = f" (staged as {args.write_id}; run `symfonic-graph publish`)" if args.write_id else ""
    lines, data = [], []
    for block, change in zip(plan.scopes, changes, strict=True):
        scope = block.scope
        where = describe_scope(scope)
        counted = f"skills: {_changes(change['skills'])}; triggers: {_changes(change['triggers'])}"
        entry: dict[str, Any] = {"tenant_id": scope.tenant_id, "namespace": scope.namespace,
                                 "write_id": args.write_id, "changes": change}
        if args.plan:
            lines.append(f"plan for {where}: {counted} (nothing written)")
        else:
            ids = next((s, t) for sc, s, t in result.scopes if sc == scope)
            entry.update(skills=ids[0], triggers=ids[1])
            lines.append(f"seeded {_plural(len(ids[0]), 'skill')} and {_plural(len(ids[1]), 'trigger')} into "
                         f"{where}{staged}: {counted}")
        data.append(entry)
    emit(args, data, "\n".join(lines))
    return 0


async def _cypher_run(args: argparse.Namespace) -> int:
    try:
        text = args.file.read_text(encoding="utf-8")
    except OSError as exc:
        raise ValidationError(str(args.file), f"cannot read: {exc.strerror}") from None
    statements = split_cypher_script(text)
    named = [(f"{args.file}:{s.line}: statement {n} of {len(statements)}", s.text)
             for n, s in enumerate(statements, start=1)]
    tenants = tenant_literals(text)
    wrote = False
    async with open_store() as store:
        before = await snapshot(store, tenants)
        if args.per_statement:
            for n, (where, statement) in enumerate(named, start=1):
                records, counters = await run_statement(
                    store, statement, where, hint=f"Ran {n - 1} statement(s) before it; later ones were not run.")
                _print_statement(args.file, statements[n - 1].line, records, counters.nodes_created,
                                 counters.properties_set)
                wrote = wrote or counters.contains_updates
        else:
            results = await run_script(store, str(args.file), named)
            for s, (records, counts) in zip(statements, results, strict=True):
                _print_statement(args.file, s.line, records, counts["nodes_created"], counts["properties_set"])
                wrote = wrote or any(counts.values())
        effects = await follow_up(store, before, await snapshot(store, tenants))
        stamped = await store.stamp_keys()  # what the script seeded is read on the fast paths at once
    how = "one statement at a time" if args.per_statement else "in one transaction"
    print(f"ran {len(statements)} statement(s) {how}")
    if stamped:
        print(f"stamped {stamped} library key(s) (trigger scope keys, tenant tokens) on what the script seeded")
    _print_effects(effects, wrote)
    return 0


def _print_effects(effects: Effects, wrote: bool) -> None:
    """What ``cypher run`` did after the script: catalog bumps, and doctor's findings for the tenants touched."""
    if effects.bumped:
        print(f"bumped the catalog version of tenant(s) {', '.join(effects.bumped)}: the script changed their "
              "skills, and the next turn of each reads them")
    if effects.bumped_by_script:
        print(f"the script bumped the catalog of tenant(s) {', '.join(effects.bumped_by_script)} itself")
    if wrote and not effects.touched:
        print("the script wrote to the graph, but to no tenant it names in a string literal, so nothing was "
              "bumped or checked: if it changed skills, bump each such tenant's catalog (MERGE (c:SymfonicCatalog "
              "{tenant_id: 'T'}) ON CREATE SET c.version = 0 SET c.version = c.version + 1), or turns keep the "
              "rules they cached for up to recheck_every (300 s by default); then run "
              "`symfonic-graph doctor --tenant T`")
    if effects.touched:
        tenants = ", ".join(effects.touched)
        if not effects.findings:
            print(f"doctor: no problems found in tenant(s) {tenants}")
        else:
            print(f"doctor found {_plural(len(effects.findings), 'problem')} in tenant(s) {tenants} (the script is "
                  "committed; fix them and run it again):")
            for f in effects.findings:
                print(f"  [{f.check}] {f.label} {f.node} in {f.where()}: {f.problem}")


def _print_statement(path: Path, line: int, records: list[dict[str, Any]], created: int, props: int) -> None:
    print(f"{path}:{line}: ok ({created} nodes created, {props} properties set, {len(records)} rows)")
    for record in records[:_ROWS_SHOWN]:
        print("  " + json.dumps(record, default=str, ensure_ascii=False))
    if len(records) > _ROWS_SHOWN:
        print(f"  ... {len(records) - _ROWS_SHOWN} more row(s)")


def skill_json(skill: Skill, evidence: dict[str, Any] | None = None) -> dict[str, Any]:
    """One skill as ``skills list --json`` prints it: every field, the tool the gate guards with it, its
    ``mode`` (``"enforce"`` or ``"shadow"``, as the gate runs it) and a mined rule's ``evidence`` (else None)."""
    return {**skill.model_dump(mode="json"), "precondition": skill.metadata["precondition"],
            "guards": action_tool_of(skill), "mode": "shadow" if skill.shadow else "enforce", "evidence": evidence}


async def skills_evidence(store: GraphMemoryStore, tenant_id: str, skills: list[Skill]) -> dict[str, dict[str, Any]]:
    """The evidence mined rules carry (support, confidence, failures_without, examples), by skill id."""
    if not skills:
        return {}
    rows = await store.read("skills_evidence", tenant_id=tenant_id, ids=[s.id for s in skills])
    return {str(r["id"]): {k: r[k] for k in ("support", "confidence", "failures_without", "examples")} for r in rows}


def _evidence_text(evidence: dict[str, Any] | None) -> str:
    """``  support=12 confidence=0.950 failures_without=3 examples=t1,t2`` (what a mined rule carries), or ''."""
    if evidence is None:
        return ""
    conf = evidence["confidence"]
    shown = {**evidence, "confidence": f"{conf:.3f}" if isinstance(conf, float) else conf}
    examples = shown["examples"]
    if isinstance(examples, list):
        shown["examples"] = ",".join(map(str, examples)) or "-"
    return "".join(f"  {k}={v}" for k, v in shown.items() if v is not None)


def _after_publish(skills: list[Skill]) -> list[Skill]:
    """The catalog as it will read after publishing: a staged re-seed replaces the live skill of its identifier."""
    staged = {(s.namespace, s.identifier) for s in skills if s.staged and s.identifier is not None}
    return [s for s in skills if s.staged or (s.namespace, s.identifier) not in staged]


def _staged_mark(skill: Skill, write_id: str | None) -> str:
    """Marks a skill of the previewed write. Without ``--write-id`` nothing shown is staged: a skill
    published moments ago keeps its staging label for a settle period, but it is live."""
    if not skill.staged or write_id is None:
        return ""
    return f"  [staged: write {write_id}]"


def _precondition_text(skill: Skill) -> str:
    return json.dumps(skill.metadata["precondition"], ensure_ascii=False)


async def _skills_list(args: argparse.Namespace) -> int:
    async with open_store() as store:
        await notice_if_empty(store, args.tenant)
        skills = await ProceduralLayer(store).query_skills(
            scope_of(args), include_drafts=args.drafts, write_id=args.write_id, include_retracted=args.retracted
        )
        if args.write_id is not None:
            skills = _after_publish(skills)
        evidence = await skills_evidence(store, args.tenant, skills)
    data = [skill_json(s, evidence.get(s.id)) for s in skills]
    lines = [f"{s.id}  identifier={s.identifier or '-'}  namespace={s.namespace or '(tenant-wide)'}  "
             f"{s.status:<8} {'shadow' if s.shadow else 'enforce':<7} {s.label}  guards={action_tool_of(s)}  "
             f"precondition={_precondition_text(s)}" + _evidence_text(evidence.get(s.id))
             + ("  [retracted]" if s.retracted else "") + _staged_mark(s, args.write_id) for s in skills]
    emit(args, data, "\n".join(lines) or "(no skills)")
    return 0


_DONE = {"retract": "retracted", "restore": "restored", "publish": "published", "discard": "discarded"}


async def _marker(args: argparse.Namespace, name: str) -> int:
    scope = scope_of(args)
    async with open_store() as store:
        await notice_if_empty(store, scope.tenant_id)
        if name == "retract":
            node_id = await store.retract(scope, args.node_id, reason=args.reason, actor=actor_of(args))
        else:
            node_id = await store.restore(scope, args.node_id, actor=actor_of(args), reason=args.reason)
    named = "" if node_id == args.node_id else f" (identifier {args.node_id})"
    emit(args, {"action": name, "node_id": node_id, "tenant_id": scope.tenant_id,
                "namespace": scope.namespace}, f"{_DONE[name]} {node_id}{named}")
    return 0


async def _staged(args: argparse.Namespace, name: str) -> int:
    scope = scope_of(args)
    async with open_store() as store:
        await notice_if_empty(store, scope.tenant_id)
        if name == "publish":
            count = await store.publish(scope, args.write_id, actor=actor_of(args), reason=args.reason)
        else:
            count = await store.discard(scope, args.write_id)
    if count == 0:
        print(f"error: nothing is staged under write id {args.write_id!r} in {describe_scope(scope)} "
              f"(already {_DONE[name]}, or a typo in the write id or scope?)", file=sys.stderr)
        return 1
    emit(args, {"action": name, "write_id": args.write_id, "tenant_id": scope.tenant_id,
                "namespace": scope.namespace, "nodes": count},
         f"{_DONE[name]} {count} node(s) of write {args.write_id}")
    return 0
