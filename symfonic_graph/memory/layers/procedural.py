"""ProceduralLayer: skills with tool-call preconditions."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from symfonic_graph._store import (
    GraphMemoryStore,
    Step,
    Written,
    check_write_id,
    content_key,
    held_keys,
    new_id,
    owned_by,
    refuse_held_keys,
    skill_change,
    skill_key,
    staged_keys,
    tenant_token,
    within_deadline,
)
from symfonic_graph.errors import NotFoundError, SymfonicGraphError, ValidationError
from symfonic_graph.memory._isolation import keep_visible
from symfonic_graph.rules.preconditions import action_tool_of
from symfonic_graph.shape import _validate as v
from symfonic_graph.shape._limits import refuse_heavy_write, refuse_over_cap, skill_weight
from symfonic_graph.shape._revision import revision
from symfonic_graph.shape.inputs import SkillInput
from symfonic_graph.shape.models import Skill, read_skills, skill_from_row
from symfonic_graph.shape.scope import MemoryScope

_NO_LIMIT = 2**62
_TORN_READS = 3  # reads when a concurrent re-seed was caught half applied


SkillSpec = SkillInput
"""One skill to seed in bulk with ``ProceduralLayer.seed_skills``: the skill write input (``shape.inputs``)."""


class ProceduralLayer:
    """Skills in the graph: seed, query, approve and reject.

    Example:
        >>> layer = ProceduralLayer(store)
        >>> skill = await layer.seed_authored_skill(
        ...     MemoryScope("acme"), label="Deliver a report", steps=["deliver"],
        ...     source_tag="authored:reports", action_tool="deliver",
        ...     precondition=["get_integration_status"])
        >>> [s.id for s in await layer.query_skills(MemoryScope("acme"))]
        [skill.id]
    """

    def __init__(self, store: GraphMemoryStore) -> None:
        self.store = store

    async def seed_authored_skill(
        self,
        scope: MemoryScope,
        *,
        label: str,
        steps: Sequence[str],
        source_tag: str,
        action_tool: str | None = None,
        precondition: Any = None,
        context: str = "",
        identifier: str | None = None,
        write_id: str | None = None,
        enforcement: str | None = None,
    ) -> Skill:
        """Write one approved skill; re-seeding an ``identifier`` replaces it.

        ``enforcement="shadow"`` writes a rule the gate reports and never
        enforces, from its first turn (``"enforce"`` blocks; None: enforced
        when new, a re-seed keeps the skill's mode).
        """
        spec = dict(label=label, steps=steps, source_tag=source_tag, action_tool=action_tool,
                    precondition=precondition, context=context, identifier=identifier, enforcement=enforcement)
        return await self._write_one(scope, spec, "approved", check_write_id(write_id))

    async def propose_skill(
        self,
        scope: MemoryScope,
        *,
        label: str,
        steps: Sequence[str],
        source_tag: str,
        action_tool: str | None = None,
        precondition: Any = None,
        context: str = "",
        identifier: str | None = None,
        enforcement: str | None = None,
    ) -> Skill:
        """Write a draft skill, hidden from turns until ``approve``.

        ``enforcement="shadow"`` makes it a shadow rule once approved (reported,
        never blocking), as ``seed_authored_skill`` does; None or ``"enforce"``: enforced.
        """
        spec = dict(label=label, steps=steps, source_tag=source_tag, action_tool=action_tool,
                    precondition=precondition, context=context, identifier=identifier, enforcement=enforcement)
        return await self._write_one(scope, spec, "draft", None)

    @within_deadline
    async def _write_one(self, scope: MemoryScope, spec: Mapping[str, Any], status: str, write_id: str | None) -> Skill:
        row = _skill_row(scope, spec, status, write_id, field_prefix="", authored=status == "approved")
        # Read back inside the write: a publish committing just after it must not hide it from its writer.
        written = await self._write([row], scope, write_id, Step("skill_written", {"key": row["key"]}))
        skill = skill_from_row(written.one("skill_written")["skill_row"])
        if skill is None:  # written by this very transaction from validated input: only a bug gets here
            raise SymfonicGraphError(
                f"skill {row['key']!r} was written but does not read back (see the log above); "
                "this is a bug in symfonic-graph: please report it"
            )
        return skill

    async def seed_skills(
        self, scope: MemoryScope, skills: Sequence[SkillSpec | Mapping[str, Any]], *, write_id: str | None = None
    ) -> list[str]:
        """Write many approved skills in one transaction (``UNWIND``); return their ids.

        Every entry is validated before anything is written; an error names
        the entry, e.g. ``skills[3].steps[0]``.
        """
        wid = check_write_id(write_id)
        if isinstance(skills, (str, bytes, Mapping)) or not isinstance(skills, Sequence):
            raise ValidationError("skills", "must be a list of skills")
        rows = _approved_rows(scope, skills, wid)
        keys = [r["key"] for r in rows]
        if len(set(keys)) != len(keys):
            raise ValidationError("skills", "two entries share an identifier; each identifier once per batch")
        if not rows:
            return []
        return [str(i) for i in (await self._write(rows, scope, wid)).one("skills_write")["ids"]]

    def validate_skills(self, scope: MemoryScope, skills: Sequence[SkillSpec | Mapping[str, Any]]) -> None:
        """Check entries as ``seed_skills`` would, writing nothing (errors name ``skills[i].field``)."""
        _approved_rows(scope, skills, None)

    async def _write(
        self, rows: list[dict[str, Any]], scope: MemoryScope, write_id: str | None, *read_back: Step
    ) -> Written:
        """Write the rows in one transaction, then run ``read_back`` in it; ``skills_write`` holds the ids
        in row order (a re-seeded identifier keeps its id)."""
        refuse_heavy_write("skills", sum(map(skill_weight, rows)))  # before the scope's budget, checked in the write
        return await self.store.write_staged(
            scope,
            write_id,
            [
                Step("skill_keys_held", {"keys": held_keys(rows), **scope.params()}, refuse_held_keys("skill")),
                Step("skills_write", {"rows": rows}),
                *read_back,
                _cap_step(scope, write_id),
                Step("catalog_bump", {"tenant_id": scope.tenant_id}),
            ],
        )

    @within_deadline
    async def query_skills(
        self,
        scope: MemoryScope,
        query: str = "",
        top_k: int | None = None,
        include_drafts: bool = False,
        write_id: str | None = None,
        *,
        action_tool: str | None = None,
        include_retracted: bool = False,
    ) -> list[Skill]:
        """Visible skills in a stable order (created_at, then id).

        ``query`` filters by case-insensitive substring of label or context;
        ``action_tool`` keeps only the skills that guard that tool, decided by
        :func:`~symfonic_graph.preconditions.action_tool_of` (the gate's rule).
        """
        v.text("query", query, required=False)
        if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1):
            raise ValidationError("top_k", "must be a positive int or None")
        tool = v.optional_text("action_tool", action_tool)
        params = dict(
            **scope.params(),
            write_id=check_write_id(write_id),
            include_drafts=bool(include_drafts),
            include_retracted=bool(include_retracted),
            query=query,
            limit=_NO_LIMIT if tool is not None else min(top_k or _NO_LIMIT, _NO_LIMIT),
        )
        for _ in range(_TORN_READS):
            [row] = await self.store.read("skills_visible", **params)
            skills, torn = read_skills(row["skills"])
            if not torn:
                break
        skills = keep_visible(scope, skills, "skill")
        if tool is not None:
            skills = [s for s in skills if action_tool_of(s) == tool][:top_k]
        return skills

    async def get_skill(self, scope: MemoryScope, skill_id: str, *, write_id: str | None = None) -> Skill:
        """One skill by id (drafts and retracted included) if the scope sees it."""
        rows = await self.store.read(
            "skill_by_id", **scope.params(), write_id=check_write_id(write_id), skill_id=v.text("skill_id", skill_id)
        )
        skill = skill_from_row(rows[0]["skill_row"]) if rows else None
        if skill is None:
            raise NotFoundError(f"no readable skill {skill_id!r} in tenant {scope.tenant_id!r}; check the id and scope")
        return skill

    async def approve(self, scope: MemoryScope, skill_id: str, *, actor: str | None = None,
                      reason: str | None = None) -> None:
        """Approve a draft so turns see it; a draft of an existing identifier replaces that skill.

        The change is recorded in its own transaction (``actor``, ``reason``,
        old → new status; ``actor=None``: unknown), read by ``store.history``.
        Raises ``AuthorityError`` (nothing changes, nothing recorded) when a
        node of another scope holds that identifier's key.
        """
        await self._set_status(scope, skill_id, "approved", take_key=True, actor=actor, reason=reason)

    async def reject(self, scope: MemoryScope, skill_id: str, *, actor: str | None = None,
                     reason: str | None = None) -> None:
        """Reject a draft (or an approved skill): turns stop seeing it. Recorded as ``approve`` is."""
        await self._set_status(scope, skill_id, "rejected", actor=actor, reason=reason)

    async def propose_mined(self, scope: MemoryScope, proposals: Sequence[Any]) -> list[dict[str, Any]]:
        """Write mined rules (``RuleProposal``) as draft skills, keyed by (action, precondition).

        Each becomes the draft ``mined:<action>:<precondition>`` (source
        ``mined``, its evidence as the properties ``support``, ``confidence``,
        ``failures_without`` and ``examples``). Mining again updates the
        evidence of an open draft and never adds a second one; a rejected,
        approved or retracted rule of that identifier is left as it is.

        Returns:
            Per proposal, in order: ``{"identifier", "outcome", "ids", "statuses"}``
            with ``outcome`` ``"created"``, ``"updated"`` or ``"kept"``.
        """
        if isinstance(proposals, (str, bytes, Mapping)) or not isinstance(proposals, Sequence):
            raise ValidationError("proposals", "must be a list of RuleProposal")
        rows = [_mined_row(scope, p, f"proposals[{i}].") for i, p in enumerate(proposals)]
        if not rows:
            return []
        refuse_heavy_write("proposals", sum(map(skill_weight, rows)))
        written = await self.store.write(
            [Step("skill_keys_held", {"keys": held_keys(rows), **scope.params()}, refuse_held_keys("skill")),
             Step("mined_drafts_write", {"rows": rows, **scope.params()}),
             Step("skills_owned_count", scope.params(), refuse_over_cap(scope))],  # drafts count: approve ships them
        )
        by_identifier = {r["identifier"]: r for r in written["mined_drafts_write"]}
        return [dict(by_identifier[row["identifier"]]) for row in rows]

    async def _set_status(
        self, scope: MemoryScope, skill_id: str, status: str, *, take_key: bool = False,
        actor: str | None = None, reason: str | None = None,
    ) -> None:
        params = {**scope.params(), "skill_id": v.text("skill_id", skill_id)}
        change = "approve" if status == "approved" else "reject"
        steps = [skill_change(scope, skill_id, change, field="status", to=status, default_from="approved",
                              actor=actor, reason=reason),
                 Step("skill_set_status", {**params, "status": status}, owned_by(scope, skill_id))]
        if take_key:  # a draft of an identifier takes over the live skill's key, never another scope's
            steps += [Step("skill_draft_key_held", params, refuse_held_keys("skill")), Step("skill_take_key", params),
                      Step("skills_owned_count", scope.params(), refuse_over_cap(scope))]
        await self.store.write([*steps, Step("catalog_bump", {"tenant_id": scope.tenant_id})])


def _cap_step(scope: MemoryScope, write_id: str | None) -> Step:
    """The step refusing a write that takes its scope over the skill cap or the budget (``_limits``)."""
    if write_id is None:
        return Step("skills_owned_count", scope.params(), refuse_over_cap(scope))
    return Step("skills_owned_after_staging", {**scope.params(), "write_id": write_id}, refuse_over_cap(scope))


def _approved_rows(
    scope: MemoryScope, skills: Sequence[SkillSpec | Mapping[str, Any]], write_id: str | None
) -> list[dict[str, Any]]:
    rows = []
    for i, item in enumerate(skills):
        if not isinstance(item, (SkillInput, Mapping)):
            raise ValidationError(f"skills[{i}]", "must be a SkillSpec or a mapping")
        rows.append(_skill_row(scope, item, "approved", write_id, field_prefix=f"skills[{i}]."))
    return rows


def skill_row(
    scope: MemoryScope,
    spec: SkillInput | Mapping[str, Any],
    *,
    write_id: str | None = None,
    field_prefix: str = "",
    keyed_by_content: bool = False,
) -> dict[str, Any]:
    """One validated approved-skill row for ``skills_write`` (errors name ``field_prefix`` + the field).

    With ``keyed_by_content``, a skill without an identifier is keyed by the
    hash of its content, so writing it again replaces it (seed files).
    """
    return _skill_row(scope, spec, "approved", write_id, field_prefix=field_prefix, keyed_by_content=keyed_by_content)


def _skill_row(
    scope: MemoryScope,
    spec: SkillInput | Mapping[str, Any],
    status: str,
    write_id: str | None,
    *,
    field_prefix: str,
    authored: bool = True,
    keyed_by_content: bool = False,
) -> dict[str, Any]:
    data = dict(spec) if isinstance(spec, SkillInput) else spec  # read again: `authored` depends on the write
    skill = SkillInput.read(data, field_prefix, authored=authored)
    content, identifier = skill.content(), skill.identifier
    skill_id = new_id()
    if keyed_by_content and identifier is None:
        key = content_key("skill", scope, content)
    else:
        key = skill_key(scope, identifier, skill_id)
    key, base_key = staged_keys(key, write_id, stable=identifier is not None or keyed_by_content)
    if status == "draft" and identifier is not None:
        # A draft never displaces the live skill of its identifier; approve does.
        base_key, key = key, key + "\u0000draft:" + skill_id
    return {
        **content,
        "id": skill_id,
        "key": key,
        "base_key": base_key,
        "write_id": write_id,
        "tenant_id": scope.tenant_id,
        "tenant_token": tenant_token(scope.tenant_id),
        "namespace": scope.namespace,
        "identifier": identifier,
        "status": status,
        "enforcement": skill.enforcement,
        "rev": revision(new_id(), content),
    }


def _mined_row(scope: MemoryScope, proposal: Any, p: str) -> dict[str, Any]:
    """The ``mined_drafts_write`` row of one proposal (validated like any draft skill)."""
    try:
        action, pre = str(proposal.action), str(proposal.precondition)
        support, confidence = int(proposal.support), float(proposal.confidence)
        failures = None if proposal.failures_without is None else int(proposal.failures_without)
        examples = [str(e) for e in proposal.examples]
        same_args = [str(a) for a in getattr(proposal, "same_args", ())]
    except (AttributeError, TypeError, ValueError):
        raise ValidationError(p.rstrip("."), "must be a RuleProposal (action, precondition, support, "
                                             "confidence, failures_without, examples)") from None
    same = f" (same {', '.join(same_args)})" if same_args else ""
    spec = {"label": f"Call {pre}{same} before {action}", "steps": [pre, action], "source_tag": "mined",
            "action_tool": action, "precondition": [{"tool": pre, "same_args": same_args} if same_args else pre],
            "identifier": f"mined:{action}:{pre}",
            "context": f"Mined from recorded conversations: support {support}, confidence {confidence:.3f}."}
    row = _skill_row(scope, spec, "draft", None, field_prefix=p, authored=False)
    row["key"], row["base_key"] = row["base_key"], None  # one draft per identifier: it holds the key itself
    return {**row, "support": support, "confidence": confidence, "failures_without": failures,
            "examples": examples}
