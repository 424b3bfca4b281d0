"""Seed files, all or nothing: validate the whole file, then write it (in batches when large).

A seed file (YAML or JSON, see ``docs/seed-files.md``) holds skills and
triggers for one or more scopes::

    tenant: acme                 # optional: else --tenant
    skills: [...]
    triggers: [...]
    scopes:                      # optional: more scopes in the same file
      - tenant: globex
        namespace: user-7
        triggers: [...]

Every entry of every scope is validated before anything is written, and a
failure leaves nothing of the file behind: a file of at most ``batch_size``
entries is written in one transaction; a larger one (up to 100,000 skills and
more) is staged in transactions of ``batch_size`` entries under one write id
and then published in one small transaction, or discarded whole on a failure. Every error names the file and the entry
(``seed.yaml: triggers[2].task: must be a non-empty string``). Entries get
identities (their ``identifier``, else a hash of their content), so running
the same file twice leaves the graph as after the first run.

A live seed records, in its own transaction, one ``:SymfonicChange`` per skill
whose content or mode it creates or changes, with the caller's ``actor`` and
``reason`` (see ``change_record_seed``); ``skills history`` lists them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from symfonic_graph._store import (
    STAGE_BATCH,
    GraphMemoryStore,
    Row,
    Step,
    check_write_id,
    held_keys,
    new_id,
    positive_count,
    refuse_held_keys,
    refuse_published,
    staged_keys,
    who,
)
from symfonic_graph.errors import ScopeError, ValidationError
from symfonic_graph.memory.layers.procedural import skill_row
from symfonic_graph.memory.layers.prospective import trigger_input_row
from symfonic_graph.ops.seedfile import SeedFile
from symfonic_graph.shape._limits import refuse_over_cap
from symfonic_graph.shape._revision import rev_digest
from symfonic_graph.shape.inputs import TriggerInput
from symfonic_graph.shape.records import NODE_COLUMNS
from symfonic_graph.shape.scope import MemoryScope, describe_scope

log = logging.getLogger("symfonic_graph.seeding")

__all__ = ["SeedPlan", "SeedResult", "apply_seed", "count_changes", "plan_seed"]

_SKILL_CONTENT = ("label", "identifier", "steps", "action_tool", "context", "status", "source")
_PRECONDITION_CONTENT = ("position", "kind", *NODE_COLUMNS)
_TRIGGER_CONTENT = ("identifier", "condition", "task", "due_at", "expires_at", "recurrence", "on_tool", "same_args",
                    "where", "once", "embedding")


@dataclass(frozen=True)
class ScopeRows:
    """The validated rows of one scope of a seed file."""

    scope: MemoryScope
    skills: list[dict[str, Any]]
    triggers: list[dict[str, Any]]


@dataclass(frozen=True)
class SeedPlan:
    """A seed file, validated whole, ready to write in one transaction."""

    path: Path
    write_id: str | None
    scopes: list[ScopeRows]

    @property
    def counts(self) -> tuple[int, int]:
        """(skills, triggers) in the whole file."""
        return sum(len(s.skills) for s in self.scopes), sum(len(s.triggers) for s in self.scopes)


@dataclass(frozen=True)
class SeedResult:
    """What a seed run wrote, per scope."""

    scopes: list[tuple[MemoryScope, list[str], list[str]]]


def _scope(path: Path, where: str, block: Mapping[str, Any], default: MemoryScope | None) -> MemoryScope:
    tenant, namespace = block.get("tenant"), block.get("namespace")
    if tenant is None:
        if default is None:
            raise ValidationError(f"{path}: {where}tenant", "is required (in the file, or give --tenant)")
        if "namespace" in block:
            return _checked_scope(path, where, default.tenant_id, namespace)
        return default
    if default is not None and (tenant, namespace) != (default.tenant_id, default.namespace) and not where:
        raise ValidationError(
            f"{path}: tenant",
            f"the file names tenant {tenant!r} namespace {namespace!r} but the command line names "
            f"{default.tenant_id!r} namespace {default.namespace!r}; drop one of them",
        )
    return _checked_scope(path, where, tenant, namespace)


def _checked_scope(path: Path, where: str, tenant: object, namespace: object) -> MemoryScope:
    try:
        return MemoryScope(tenant, namespace)  # type: ignore[arg-type]
    except ScopeError as exc:
        raise ValidationError(f"{path}: {where}tenant", str(exc)) from None


def _rows(
    path: Path,
    where: str,
    entries: Sequence[Any],
    build: Callable[[int, Mapping[str, Any]], dict[str, Any]],
    kind: str,
) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    seen: dict[str, int] = {}
    for i, entry in enumerate(entries):
        field = f"{where}{kind}[{i}]"
        if not isinstance(entry, Mapping):
            raise ValidationError(f"{path}: {field}", "must be a mapping")
        try:
            row = build(i, entry)
        except ValidationError as exc:
            raise ValidationError(f"{path}: {where}{exc.field}", exc.problem) from None
        key = row["base_key"] or row["key"]
        if key in seen:
            same = "identifier" if row["identifier"] is not None else "content"
            raise ValidationError(
                f"{path}: {field}", f"has the same {same} as {where}{kind}[{seen[key]}]; each entry once per scope"
            )
        seen[key] = i
        rows.append(row)
    return rows


def plan_seed(seed: SeedFile, default: MemoryScope | None, *, write_id: str | None = None) -> SeedPlan:
    """Validate a whole seed file; nothing is written. Errors name the file and the entry."""
    path = seed.path
    wid = check_write_id(write_id)
    scopes: list[ScopeRows] = []
    owners: dict[MemoryScope, str] = {}
    for where, block in seed.blocks:
        scope = _scope(path, where, block, default)
        if scope in owners:
            raise ValidationError(f"{path}: {where or 'tenant'}",
                                  f"names the same scope as {owners[scope] or 'the top level'}; merge them")
        owners[scope] = where

        def build_skill(i: int, entry: Mapping[str, Any], scope: MemoryScope = scope) -> dict[str, Any]:
            return skill_row(scope, entry, write_id=wid, field_prefix=f"skills[{i}].", keyed_by_content=True)

        def build_trigger(i: int, entry: Mapping[str, Any], scope: MemoryScope = scope) -> dict[str, Any]:
            return trigger_input_row(scope, TriggerInput.read(entry, f"triggers[{i}]."), write_id=wid,
                                     keyed_by_content=True)

        skills = _rows(path, where, block.get("skills") or [], build_skill, "skills")
        triggers = _rows(path, where, block.get("triggers") or [], build_trigger, "triggers")
        scopes.append(ScopeRows(scope, skills, triggers))
    return SeedPlan(path, wid, scopes)


def _recorded(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What ``change_record_seed`` compares of each skill row: its key, mode, status and content digest."""
    return [{"key": r["key"], "id": r["id"], "identifier": r["identifier"], "status": r["status"],
             "enforcement": r["enforcement"], "digest": rev_digest(r["rev"])} for r in rows]


def _steps(plan: SeedPlan, record: dict[str, str | None]) -> list[Step]:
    """The steps of a seed file's one transaction; scope ``i`` writes ``skills:i`` and ``triggers:i``.

    A live file records its skills' changes (``record`` is ``who(actor, reason)``) just before writing them.
    """
    steps: list[Step] = []
    for i, block in enumerate(plan.scopes):
        scope = block.scope
        if plan.write_id is not None:
            steps += [Step("catalog_lock", {"tenant_id": scope.tenant_id}, key=f"lock:{i}"),
                      Step("write_id_published", {**scope.params(), "write_id": plan.write_id},
                           refuse_published(plan.write_id, scope), key=f"published:{i}")]
        if block.skills:
            if plan.write_id is None:  # before the write and its checks: a refusal rolls the records back too
                steps.append(Step("change_record_seed", {**scope.params(), "rows": _recorded(block.skills), **record},
                                  key=f"record:{i}"))
            steps += [Step("skill_keys_held", {"keys": held_keys(block.skills), **scope.params()},
                           refuse_held_keys("skill"), key=f"skill_keys:{i}"),
                      Step("skills_write", {"rows": block.skills}, key=f"skills:{i}"),
                      Step("skills_owned_count", scope.params(), refuse_over_cap(scope), key=f"skill_cap:{i}"),
                      Step("catalog_bump", {"tenant_id": scope.tenant_id}, key=f"bump:{i}")]
        if block.triggers:
            steps += [Step("trigger_keys_held", {"keys": held_keys(block.triggers), **scope.params()},
                           refuse_held_keys("trigger"), key=f"trigger_keys:{i}"),
                      Step("triggers_write", {"rows": block.triggers}, key=f"triggers:{i}"),
                      Step("skills_owned_count", scope.params(), refuse_over_cap(scope), key=f"trigger_cap:{i}")]
    return steps


async def apply_seed(store: GraphMemoryStore, plan: SeedPlan, *, batch_size: int = STAGE_BATCH,
                     actor: str | None = None, reason: str | None = None) -> SeedResult:
    """Write a validated seed file: all of it, or (on any error) nothing.

    A file of at most ``batch_size`` entries (skills and triggers) is one
    transaction. A larger one is staged in transactions of at most
    ``batch_size`` entries under one write id, invisible to readers, then
    published in one small transaction (every scope of the file at once); a
    failure in any batch discards what the earlier batches staged. With the
    plan's own ``write_id`` the file stays staged for ``publish``.

    A live file of at most ``batch_size`` entries records each skill it
    creates, replaces or changes the mode of (``actor``, ``reason``; None is
    unknown) in its transaction; a larger one records its publish, under the
    write id it was staged as.

    Example:
        >>> await apply_seed(store, plan_seed(load_seed_file(path), MemoryScope("acme")), actor="ana")
    """
    size = positive_count("batch_size", batch_size, most=100_000)
    record = who(actor, reason)
    if sum(plan.counts) > size:
        return await _apply_in_batches(store, plan, size, record)
    steps = _steps(plan, record)
    if not steps:
        return SeedResult([(b.scope, [], []) for b in plan.scopes])
    try:
        written = await store.write(steps)
    except ValidationError as exc:
        raise ValidationError(f"{plan.path}: {exc.field}", exc.problem) from None
    out = []
    for i, block in enumerate(plan.scopes):
        skills = [str(s) for s in written.one(f"skills:{i}")["ids"]] if block.skills else []
        triggers = [str(t) for t in written.one(f"triggers:{i}")["ids"]] if block.triggers else []
        out.append((block.scope, skills, triggers))
    return SeedResult(out)


def _staged(rows: list[dict[str, Any]], write_id: str) -> list[dict[str, Any]]:
    """Rows of a file written live, restaged under ``write_id`` (each waits beside its live node)."""
    out = []
    for row in rows:
        key = row["base_key"] or row["key"]
        staged, base = staged_keys(key, write_id, stable=True)
        out.append({**row, "write_id": write_id, "key": staged, "base_key": base})
    return out


def _batches(plan: SeedPlan, write_id: str, size: int) -> list[tuple[int, list[Step]]]:
    """The staging transactions of a large file: (scope index, steps), at most ``size`` entries each."""
    out: list[tuple[int, list[Step]]] = []
    for i, block in enumerate(plan.scopes):
        scope = block.scope
        guard = [Step("catalog_lock", {"tenant_id": scope.tenant_id}, key="lock"),
                 Step("write_id_published", {**scope.params(), "write_id": write_id},
                      refuse_published(write_id, scope), key="published")]
        skills = block.skills if plan.write_id is not None else _staged(block.skills, write_id)
        triggers = block.triggers if plan.write_id is not None else _staged(block.triggers, write_id)
        for start in range(0, len(skills), size):
            rows = skills[start:start + size]
            out.append((i, [*guard,
                            Step("skill_keys_held", {"keys": held_keys(rows), **scope.params()},
                                 refuse_held_keys("skill"), key="skill_keys"),
                            Step("skills_write", {"rows": rows}, key="skills"),
                            Step("skills_owned_after_staging", {**scope.params(), "write_id": write_id},
                                 refuse_over_cap(scope), key="skill_cap")]))
        for start in range(0, len(triggers), size):
            rows = triggers[start:start + size]
            out.append((i, [*guard,
                            Step("trigger_keys_held", {"keys": held_keys(rows), **scope.params()},
                                 refuse_held_keys("trigger"), key="trigger_keys"),
                            Step("triggers_write", {"rows": rows}, key="triggers"),
                            Step("skills_owned_after_staging", {**scope.params(), "write_id": write_id},
                                 refuse_over_cap(scope), key="trigger_cap")]))
    return out


async def _apply_in_batches(store: GraphMemoryStore, plan: SeedPlan, size: int,
                            record: dict[str, str | None]) -> SeedResult:
    """Stage a large file batch by batch under one write id, then publish it in one flip (or discard it)."""
    write_id = plan.write_id or f"seed-file:{new_id()}"
    scopes = [block.scope for block in plan.scopes]
    if plan.write_id is not None:
        for scope in scopes:  # a failure discards the write id: it must hold nothing else
            rows = await store.read("write_staged_count", **scope.params(), write_id=write_id)
            if rows and rows[0]["staged"]:
                raise ValidationError(
                    f"{plan.path}: write_id",
                    f"{write_id!r} already holds {rows[0]['staged']} staged node(s) in {describe_scope(scope)}; "
                    f"a file of more than {size} entries is staged under a write id of its own")
    ids: list[tuple[list[str], list[str]]] = [([], []) for _ in scopes]
    try:
        for i, steps in _batches(plan, write_id, size):
            written = await store.write(steps)
            kind = 0 if "skills" in written else 1
            ids[i][kind].extend(str(x) for x in written.one("skills" if kind == 0 else "triggers")["ids"])
        if plan.write_id is None:
            await store.publish_scopes(scopes, write_id, batch_size=size, **record)
    except Exception as exc:
        await _discard_quietly(store, scopes, write_id)
        if isinstance(exc, ValidationError):
            raise ValidationError(f"{plan.path}: {exc.field}", exc.problem) from None
        raise
    return SeedResult([(scope, s, t) for scope, (s, t) in zip(scopes, ids, strict=True)])


async def _discard_quietly(store: GraphMemoryStore, scopes: list[MemoryScope], write_id: str) -> None:
    """Discard a failed large seed; a discard that fails too is logged with the command that finishes it."""
    for scope in scopes:
        try:
            await store.discard(scope, write_id)
        except Exception:  # the original failure is what the caller must see
            log.warning("could not discard the failed seed's staged write %r in %s; run `symfonic-graph discard "
                        "%s` for that scope", write_id, describe_scope(scope), write_id, exc_info=True)


def _skill_content(row: Row) -> tuple[object, ...]:
    pres = tuple(tuple(p.get(k) for k in _PRECONDITION_CONTENT) for p in row["preconditions"])
    return (*(row.get(k) for k in _SKILL_CONTENT), pres, row["tenant_id"], row["namespace"])


def _hand_edited(old: Row, row: Row) -> bool:
    """The library last wrote ``row``'s content to ``old``, which now differs: edited by hand since."""
    written = rev_digest(old.get("rev"))
    return written is not None and written == rev_digest(row.get("rev"))


def _same_mode(kind: str, old: Row, row: Row) -> bool:
    """A skill entry that names its ``enforcement`` sets it; one that names none keeps the skill's."""
    given = row.get("enforcement") if kind == "skills" else None
    return given is None or given == (old.get("enforcement") or "enforce")


def _trigger_content(row: Row) -> tuple[object, ...]:
    """A trigger entry's or node's content; a write row leaves the default kind out."""
    return (*(row.get(k) for k in _TRIGGER_CONTENT), row.get("kind") or "text", row["tenant_id"], row["namespace"])


async def count_changes(store: GraphMemoryStore, plan: SeedPlan) -> list[dict[str, dict[str, int]]]:
    """What writing ``plan`` would change, per scope of the file (in its order) and kind.

    Read-only (``seed --plan`` prints it without writing; ``seed`` prints it
    for the write that follows). Each entry is compared with the live node of
    its key (its identifier, or its content): none is *created*; one with the
    same content, live (not retracted, active, pending), is *unchanged* (a
    skill entry naming an ``enforcement`` the skill lacks is *updated*); one
    the library last wrote with the file's content but edited by hand since
    (its ``symfonic_rev`` digest) is *reverted* (the key is present only when
    one is); any other is *updated*.

    Example:
        >>> await count_changes(store, plan_seed(load_seed_file(path), MemoryScope("acme")))
        [{'skills': {'created': 1, 'updated': 0, 'unchanged': 2}, 'triggers': {...}}]
    """
    kinds = (("skills", "seed_existing_skills", _skill_content),
             ("triggers", "seed_existing_triggers", _trigger_content))
    out: list[dict[str, dict[str, int]]] = [{} for _ in plan.scopes]
    for kind, name, content in kinds:
        keys = [row["base_key"] or row["key"] for block in plan.scopes for row in getattr(block, kind)]
        existing = {r["key"]: r for r in await store.read(name, keys=keys)} if keys else {}
        for block, counts_of in zip(plan.scopes, out, strict=True):
            counts = {"created": 0, "updated": 0, "unchanged": 0}
            for row in getattr(block, kind):
                old = existing.get(row["base_key"] or row["key"])
                if old is None:
                    counts["created"] += 1
                elif old["live"] and content(old) == content(row):
                    counts["unchanged" if _same_mode(kind, old, row) else "updated"] += 1
                elif old["live"] and kind == "skills" and _hand_edited(old, row):
                    counts["reverted"] = counts.get("reverted", 0) + 1  # the file's content, edited by hand since
                else:
                    counts["updated"] += 1
            counts_of[kind] = counts
    return out
