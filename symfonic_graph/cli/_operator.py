"""Operator commands: seed, cypher run, skills, triggers, retract/restore, publish/discard."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import anyio
from neo4j.exceptions import Neo4jError

from symfonic_graph.cli._common import Progress, add_json_flag, add_scope_flags, emit, scope_of
from symfonic_graph.cli._connect import open_store
from symfonic_graph.errors import ValidationError
from symfonic_graph.layers import ProceduralLayer, ProspectiveLayer
from symfonic_graph.models import Skill
from symfonic_graph.preconditions import action_tool_of
from symfonic_graph.seedfile import load_seed_file, split_cypher_script

_BATCH = 500


def register(sub: Any) -> None:
    seed = sub.add_parser("seed", help="seed skills and triggers from a YAML or JSON file")
    seed.add_argument("file", type=Path)
    add_scope_flags(seed)
    seed.add_argument("--write-id", default=None, help="stage the write; `publish` makes it visible")
    seed.set_defaults(handler=lambda a: anyio.run(_seed, a))

    cypher = sub.add_parser("cypher", help="run plain Cypher scripts")
    cypher_actions = cypher.add_subparsers(dest="action", required=True, metavar="ACTION")
    run = cypher_actions.add_parser("run", help="run a .cypher script statement by statement")
    run.add_argument("file", type=Path)
    run.set_defaults(handler=lambda a: anyio.run(_cypher_run, a))

    skills = sub.add_parser("skills", help="inspect skills")
    skills_actions = skills.add_subparsers(dest="action", required=True, metavar="ACTION")
    listing = skills_actions.add_parser("list", help="skills the scope sees, in turn order")
    add_scope_flags(listing)
    add_json_flag(listing)
    listing.add_argument("--drafts", action="store_true", help="include drafts")
    listing.add_argument("--write-id", default=None, help="include this staged write")
    listing.set_defaults(handler=lambda a: anyio.run(_skills_list, a))

    triggers = sub.add_parser("triggers", help="inspect and resolve stored reminders")
    trig_actions = triggers.add_subparsers(dest="action", required=True, metavar="ACTION")
    tlist = trig_actions.add_parser("list", help="pending triggers the scope sees")
    add_scope_flags(tlist)
    add_json_flag(tlist)
    tlist.set_defaults(handler=lambda a: anyio.run(_triggers_list, a))
    resolve = trig_actions.add_parser("resolve", help="mark a trigger resolved")
    resolve.add_argument("trigger_id")
    add_scope_flags(resolve)
    resolve.set_defaults(handler=lambda a: anyio.run(_triggers_resolve, a))

    for name, helptext in (("retract", "hide a node from every read"), ("restore", "undo retract")):
        p = sub.add_parser(name, help=helptext)
        p.add_argument("node_id")
        add_scope_flags(p)
        if name == "retract":
            p.add_argument("--reason", default="", help="why (kept for audit)")
        p.set_defaults(handler=lambda a, n=name: anyio.run(_marker, a, n))
    for name, helptext in (("publish", "make a staged write visible"), ("discard", "delete a staged write")):
        p = sub.add_parser(name, help=helptext)
        p.add_argument("write_id")
        add_scope_flags(p)
        p.set_defaults(handler=lambda a, n=name: anyio.run(_staged, a, n))


async def _seed(args: argparse.Namespace) -> int:
    seed = load_seed_file(args.file)
    scope = scope_of(args)
    async with open_store() as store:
        procedural, prospective = ProceduralLayer(store), ProspectiveLayer(store)
        # Validate every entry before the first write, so a bad file writes nothing.
        try:
            procedural.validate_skills(scope, seed.skills)
        except ValidationError as exc:
            raise ValidationError(f"{args.file}: {exc.field}", exc.problem) from None
        for i, trig in enumerate(seed.triggers):
            if not isinstance(trig, dict) or set(trig) != {"condition", "task"}:
                raise ValidationError(f"{args.file}: triggers[{i}]", "needs exactly `condition` and `task`")
        progress = Progress(len(seed.skills) + len(seed.triggers), "seeding")
        for start in range(0, len(seed.skills), _BATCH):
            batch = seed.skills[start : start + _BATCH]
            await procedural.seed_skills(scope, batch, write_id=args.write_id)
            progress.advance(len(batch))
        for trig in seed.triggers:
            await prospective.set_trigger(scope, condition=trig["condition"], task=trig["task"], write_id=args.write_id)
            progress.advance(1)
        progress.close()
    staged = f" (staged as {args.write_id}; run `symfonic-graph publish`)" if args.write_id else ""
    print(f"seeded {len(seed.skills)} skills and {len(seed.triggers)} triggers into {scope.tenant_id}{staged}")
    return 0


async def _cypher_run(args: argparse.Namespace) -> int:
    try:
        text = args.file.read_text(encoding="utf-8")
    except OSError as exc:
        raise ValidationError(str(args.file), f"cannot read: {exc.strerror}") from None
    statements = split_cypher_script(text)
    async with open_store() as store:
        for n, statement in enumerate(statements, start=1):
            try:
                records, summary, _ = await store.driver.execute_query(statement.text, database_=store.database)
            except Neo4jError as exc:
                print(f"{args.file}:{statement.line}: statement {n} of {len(statements)} failed: {exc.message}",
                      file=sys.stderr)
                print(f"ran {n - 1} statement(s) before it; later ones were not run", file=sys.stderr)
                return 1
            counters = summary.counters
            print(f"{args.file}:{statement.line}: ok ({counters.nodes_created} nodes created, "
                  f"{counters.properties_set} properties set, {len(records)} rows)")
    print(f"ran {len(statements)} statement(s)")
    return 0


def skill_json(skill: Skill) -> dict[str, Any]:
    """One skill as ``skills list --json`` prints it: every field, and the tool the gate guards with it."""
    return {**skill.model_dump(mode="json"), "precondition": skill.metadata["precondition"],
            "guards": action_tool_of(skill)}


async def _skills_list(args: argparse.Namespace) -> int:
    async with open_store() as store:
        skills = await ProceduralLayer(store).query_skills(
            scope_of(args), include_drafts=args.drafts, write_id=args.write_id
        )
    data = [skill_json(s) for s in skills]
    lines = [f"{s.id}  {s.status:<8} {s.label}  action={s.action_tool}  precondition={s.precondition}" for s in skills]
    emit(args, data, "\n".join(lines) or "(no skills)")
    return 0


async def _triggers_list(args: argparse.Namespace) -> int:
    async with open_store() as store:
        triggers = await ProspectiveLayer(store).get_pending(scope_of(args))
    data = [t.model_dump(mode="json") for t in triggers]
    emit(args, data, "\n".join(f"{t.id}  when: {t.condition}  ->  {t.task}" for t in triggers) or "(no triggers)")
    return 0


async def _triggers_resolve(args: argparse.Namespace) -> int:
    async with open_store() as store:
        await ProspectiveLayer(store).resolve_trigger(scope_of(args), args.trigger_id)
    print(f"resolved {args.trigger_id}")
    return 0


async def _marker(args: argparse.Namespace, name: str) -> int:
    async with open_store() as store:
        if name == "retract":
            await store.retract(scope_of(args), args.node_id, reason=args.reason)
        else:
            await store.restore(scope_of(args), args.node_id)
    print(f"{name}d {args.node_id}")
    return 0


async def _staged(args: argparse.Namespace, name: str) -> int:
    async with open_store() as store:
        if name == "publish":
            count = await store.publish(scope_of(args), args.write_id)
        else:
            count = await store.discard(scope_of(args), args.write_id)
    print(f"{name}ed {count} node(s) of write {args.write_id}")
    return 0
