"""What reads return, and the one projection from Neo4j rows to them.

Every read path builds its objects here, so no field is kept on one path and
dropped on another. Rows seeded by hand with a wrong shape are skipped (or a
bad predicate kept so that it fails closed) and logged once per node.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any, Final, Literal, TypeVar

from pydantic import BaseModel, BeforeValidator, ConfigDict, PlainSerializer, PlainValidator, model_validator
from pydantic import ValidationError as PydanticValidationError

from symfonic_graph.shape._entry import _Entry
from symfonic_graph.shape._validate import field_path
from symfonic_graph.shape.inputs import ENFORCEMENTS, dump_records
from symfonic_graph.shape.names import bare_identifier
from symfonic_graph.shape.properties import (
    PRECONDITION_PROPERTIES,
    SKILL_PROPERTIES,
    WEAKENING_SKILL_PROPERTIES,
    near_miss,
)
from symfonic_graph.shape.readings import node_problem, precondition_from_item, precondition_from_node
from symfonic_graph.shape.records import (
    KINDS,
    STATE_OPS,
    Precondition,
    UnreadablePrecondition,
    action_tool_problem,
    precondition_item,
)

log = logging.getLogger("symfonic_graph.models")

__all__ = ["STATE_OPS", "Fact", "Skill", "SkillReading", "Trigger", "as_datetime", "guarded_tool", "log_problems",
           "packed_torn", "read_skill", "read_skills", "skill_of", "unpack_skill_row"]

SKILL_STATUSES = frozenset({"approved", "draft", "rejected"})
_logged: set[tuple[str, str]] = set()
_MAX_LOGGED = 10_000


def _log_once(node_id: str, problem: str) -> None:
    key = (node_id, problem)
    if key in _logged:
        return
    if len(_logged) < _MAX_LOGGED:
        _logged.add(key)
    log.warning("malformed graph data on node %s: %s (run `symfonic-graph doctor`)", node_id, problem)


def _as_datetime(value: object) -> datetime | None:
    to_native = getattr(value, "to_native", None)
    if callable(to_native):
        native = to_native()
        return native if isinstance(native, datetime) else None
    if isinstance(value, datetime):
        return value
    if isinstance(value, str):
        try:  # Neo4j writes a zone id after the offset: 2026-01-01T00:00:00+01:00[Europe/Paris]
            return datetime.fromisoformat(value.split("[", 1)[0])
        except ValueError:
            return None
    return None


def _entries(value: object) -> tuple[Precondition, ...]:
    """A skill's precondition records: records of any registered kind, or their mappings (by ``kind``)."""
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
        raise ValueError("must be a list of precondition records")
    out: list[Any] = []
    for entry in value:
        if isinstance(entry, Mapping) and isinstance(entry.get("kind"), str) and entry["kind"] in KINDS:
            entry = KINDS[entry["kind"]].model_validate(entry)
        if not isinstance(entry, _Entry):
            raise ValueError(f"{entry!r} is not a precondition record")
        out.append(entry)
    return tuple(out)


class _Record(BaseModel):
    model_config = ConfigDict(strict=True, extra="ignore", frozen=True)

    @model_validator(mode="before")
    @classmethod
    def _nulls_are_defaults(cls, data: Any) -> Any:
        if isinstance(data, Mapping):
            return {key: value for key, value in data.items() if value is not None}
        return data


as_datetime = _as_datetime  # the lenient date reading, for a reader that builds a read skill's fields itself
_Date = Annotated[datetime | None, BeforeValidator(_as_datetime)]
"""A date property read leniently: a Neo4j temporal, a datetime or an ISO string, else None."""


class Skill(BaseModel):
    """A procedural-memory skill as read from the graph.

    ``preconditions`` holds the typed entries (the gate and pre-flight read
    them); ``metadata`` is the derived mapping for duck-typed callers.
    ``enforcement`` is ``"shadow"`` for a rule that is reported, never enforced.

    Example:
        >>> skill = read_skill({"skill": {"id": "s1", "tenant_id": "acme", "status": "approved",
        ...     "action_tool": "deliver"}, "preconditions": [
        ...     {"kind": "tool", "tool": "get_integration_status", "position": 0},
        ...     {"kind": "state", "path": "channel", "op": "eq", "value": "slack", "position": 1}]}).skill
        >>> skill.metadata["precondition"]
        ['get_integration_status', {'state': {'path': 'channel', 'op': 'eq', 'value': 'slack'}}]
        >>> skill.preconditions[0].kind, skill.shadow
        ('tool', False)
    """

    model_config = ConfigDict(frozen=True)

    id: str
    tenant_id: str
    namespace: str | None
    label: str
    identifier: str | None
    steps: tuple[str, ...]
    action_tool: str | None
    context: str
    status: str
    active: bool
    source: str | None
    created_at: datetime | None
    preconditions: Annotated[tuple[Precondition, ...], PlainValidator(_entries), PlainSerializer(dump_records)] = ()
    enforcement: str | None = None
    retracted: bool = False
    staged: bool = False

    @property
    def precondition(self) -> tuple[Any, ...] | None:
        """``metadata["precondition"]`` as a tuple (None without entries): a derived view of ``preconditions``."""
        return tuple(precondition_item(p) for p in self.preconditions) or None

    @property
    def shadow(self) -> bool:
        """True for a shadow rule: evaluated and reported, never blocking."""
        return self.enforcement == "shadow"

    @property
    def metadata(self) -> dict[str, Any]:
        """The mapping the gate and pre-flight read."""
        return {
            "label": self.label,
            "steps": list(self.steps),
            "action_tool": self.action_tool,
            "context": self.context,
            "status": self.status,
            "source": self.source,
            "identifier": self.identifier,
            "precondition": None if self.precondition is None else list(self.precondition),
            "enforcement": self.enforcement,
        }


def guarded_tool(skill: Skill) -> str | None:
    """The tool a skill guards: ``action_tool`` if it names one, else ``steps[0]`` if that does."""
    action = bare_identifier(skill.action_tool)
    if action is None and skill.steps:
        action = bare_identifier(skill.steps[0])
    return action


def _metadata(skill: object) -> Mapping[str, Any]:
    meta = skill.get("metadata") if isinstance(skill, Mapping) else getattr(skill, "metadata", None)
    return meta if isinstance(meta, Mapping) else {}


def skill_of(skill: object) -> Skill:
    """Any skill the gate accepts, as the typed :class:`Skill`: the one adapter at the edge.

    A ``Skill`` is itself. Anything else is duck-typed: an object with a
    ``metadata`` mapping (or a mapping holding one) and an optional ``id``;
    its ``metadata["precondition"]`` items are read leniently, failing closed.
    Fields the metadata does not give take neutral values (no tenant).

    Example:
        >>> from types import SimpleNamespace
        >>> typed = skill_of(SimpleNamespace(id="s1", metadata={"action_tool": "deploy", "precondition": "test"}))
        >>> typed.id, guarded_tool(typed), [e.kind for e in typed.preconditions]
        ('s1', 'deploy', ['tool'])
    """
    if isinstance(skill, Skill):
        return skill
    meta = _metadata(skill)
    ident: Any = skill.get("id") if isinstance(skill, Mapping) else getattr(skill, "id", None)
    if not isinstance(ident, str):
        ident = meta.get("id")
    typed = getattr(skill, "preconditions", None)
    if isinstance(typed, tuple) and all(isinstance(e, BaseModel) for e in typed):
        entries: tuple[Any, ...] = typed
    else:
        raw = meta.get("precondition")
        items = [raw] if isinstance(raw, (str, Mapping)) else list(raw) if isinstance(raw, Sequence) else []
        entries = tuple(e for e in map(precondition_from_item, items) if e is not None)
    steps, label, enforcement = meta.get("steps"), meta.get("label"), meta.get("enforcement")
    if getattr(skill, "enforcement", None) == "shadow":
        enforcement = "shadow"
    return Skill.model_construct(  # the duck-typed values as given: the compiled rule reports what is wrong
        id=ident if isinstance(ident, str) else None, tenant_id="", namespace=None,  # type: ignore[arg-type]
        label=label if isinstance(label, str) else "", identifier=meta.get("identifier"),
        steps=tuple(steps) if isinstance(steps, Sequence) and not isinstance(steps, str) else (),
        action_tool=meta.get("action_tool"), context=meta.get("context") or "", status=meta.get("status") or "",
        active=True, source=meta.get("source"), created_at=None, preconditions=entries, enforcement=enforcement,
        retracted=False, staged=False)


class Trigger(_Record):
    """A stored reminder: when ``condition`` holds, offer ``task``.

    Also the read model of a trigger node (``trigger_row``): strict types,
    absent and null properties taking the defaults, unknown ones ignored, dates
    read leniently (Neo4j values or ISO strings, else None). Fields are checked
    in the order declared; :func:`trigger_from_row` skips a row that fails.
    """

    id: str
    condition: str
    task: str
    namespace: str | None = None
    tenant_id: str
    status: str = ""
    created_at: _Date = None
    resolved_at: _Date = None
    kind: str = "text"
    due_at: _Date = None
    expires_at: _Date = None
    snoozed_until: _Date = None
    resolution: str | None = None
    """How a resolved trigger ended: ``acknowledged``, ``cancelled`` or ``replaced`` (None while pending)."""
    recurrence: str | None = None
    on_tool: str | None = None
    same_args: str | None = None
    """An event trigger's argument values, as JSON text."""
    where: str | None = None
    """An event trigger's CEL expression over the call's ``result`` and ``call`` (its arguments)."""
    once: bool = False
    """Acknowledged when first offered."""
    similarity: float | None = None
    """A semantic trigger's cosine with the turn's embedding, on the reads that scored it (None elsewhere)."""


class Fact(_Record):
    """A semantic-memory fact: one sentence of text (also the read model of a fact node, as ``Trigger``)."""

    id: str
    text: str
    tenant_id: str
    namespace: str | None = None
    created_at: _Date = None


# --- the one skill read model ---------------------------------------------------
#
# Every path that reads skills (TurnMemory, query_skills, skill lookups, the CLI,
# doctor) projects them with the `skill_row` Cypher fragment and builds them
# here. Absent and null properties both take the documented default.


class _SkillRecord(_Record):
    id: str
    tenant_id: str
    namespace: str | None = None
    label: str = ""
    identifier: str | None = None
    steps: list[str] = []
    action_tool: str | None = None
    context: str = ""
    status: Literal["approved", "draft", "rejected"]
    active: bool = True
    source: str | None = None
    created_at: str | None = None
    enforcement: Any = None
    rev: str | None = None


def _problems(exc: PydanticValidationError, prefix: str = "") -> list[str]:
    out = []
    for error in exc.errors(include_url=False, include_input=False):
        loc = tuple(error["loc"])
        out.append(f"{field_path(loc, prefix) or prefix.rstrip('.') or 'skill'}: {error['msg']}")
    return out


@dataclass(frozen=True)
class SkillReading:
    """One projected skill row, read: the skill (None if skipped), what was wrong, and whether it was torn.

    Attributes:
        skill: the skill a turn receives, or None when the node is skipped.
        problems: ``"field.path: message"`` for every property the model refused.
        torn: True when a concurrent re-seed was caught half applied (read again).
    """

    node_id: str
    skill: Skill | None
    problems: tuple[str, ...] = ()
    torn: bool = False


def _is_torn(rev: str | None, stamps: Iterable[object]) -> bool:
    """True when the preconditions read (their ``rev`` stamps) are not exactly those written with the skill's."""
    if rev is None:
        return False  # seeded by hand: no revision to check against
    _, _, count = rev.rpartition("/")
    stamped = [stamp for stamp in stamps if stamp is not None]
    return any(stamp != rev for stamp in stamped) or str(len(stamped)) != count


def read_skill(row: Mapping[str, Any]) -> SkillReading:
    """Read one ``skill_row`` projection with the one validated model.

    Example:
        >>> row = {"skill": {"id": "s1", "tenant_id": "acme", "status": "approved",
        ...                  "action_tool": "deploy", "context": None},
        ...        "preconditions": [{"kind": "tool", "tool": "auth", "position": 0}]}
        >>> read_skill(row).skill.metadata["precondition"]
        ['auth']
    """
    props = row.get("skill")
    props = props if isinstance(props, Mapping) else {}
    raw_id = props.get("id")
    node_id = raw_id if isinstance(raw_id, str) else repr(raw_id)
    raw_preconditions = row.get("preconditions") or []
    try:
        record = _SkillRecord.model_validate(props)
    except PydanticValidationError as exc:
        return SkillReading(node_id, None, tuple(_problems(exc)))
    problems: list[str] = []
    entries: list[Precondition] = []
    for index, entry in enumerate(raw_preconditions):
        props = entry if isinstance(entry, Mapping) else {}
        item = _unless_misspelt(precondition_from_node(props), props.get("unknown"))
        position = props.get("position")
        if isinstance(position, float) and position.is_integer():
            position = int(position)  # what a JavaScript client sends for a plain number
        if not isinstance(position, int) or isinstance(position, bool):
            problems.append(f"precondition[{index}].position: {position!r} is not an integer (read in list order)")
        problem = node_problem(item)
        if problem is not None:
            problems.append(f"precondition[{index}].{problem}")
        entries.append(item)
    enforcement = record.enforcement if record.enforcement in ENFORCEMENTS else None
    if record.enforcement is not None and enforcement is None:
        problems.append(f"enforcement: unknown value {record.enforcement!r}; the rule is enforced")
    if (action_problem := action_tool_problem(record.action_tool)) is not None:
        problems.append(action_problem)
    action_tool = record.action_tool
    for name, value in _unknown_pairs(row.get("skill")):
        meant = near_miss(name, SKILL_PROPERTIES)
        if meant in WEAKENING_SKILL_PROPERTIES:  # the rule would guard another tool, or none: block instead
            if meant == "action_tool" and action_tool is None and isinstance(value, str) and bare_identifier(value):
                action_tool = value  # the tool the operator meant to guard is the one blocked
            reason = f"{name}: looks like a misspelt {meant!r}; the skill blocks its action until it is renamed"
            entries.append(UnreadablePrecondition(reason=reason))
            problems.append(f"{reason} (fails closed)")
    if row.get("foreign"):
        problems.append(f"precondition: {row['foreign']} node(s) without this skill's tenant_id were ignored")
    skill = Skill(  # validating again in pydantic-core is faster than model_construct
        id=record.id,
        tenant_id=record.tenant_id,
        namespace=record.namespace,
        label=record.label,
        identifier=record.identifier,
        steps=tuple(record.steps),
        action_tool=action_tool,
        context=record.context,
        status=record.status,
        active=record.active,
        source=record.source,
        created_at=_as_datetime(record.created_at),
        preconditions=tuple(entries),
        enforcement=enforcement,
        retracted=row.get("retracted") is True,
        staged=row.get("staged") is True,
    )
    return SkillReading(record.id, skill, tuple(problems),
                        _is_torn(record.rev, [p.get("rev") for p in raw_preconditions]))


def _unless_misspelt(entry: Precondition, unknown: object) -> Precondition:
    """``entry``, or an unreadable one when its node holds a misspelt property (``same_arg``, ``withn``).

    Read without the property it meant, the precondition would be weaker than
    written (any arguments, any turn, no ``if_missing``): it blocks instead.
    """
    if isinstance(unknown, (list, tuple)):
        for name in unknown:
            meant = near_miss(name, PRECONDITION_PROPERTIES)
            if meant is not None:
                return UnreadablePrecondition(reason=f"{name}: looks like a misspelt {meant!r}; rename it")
    return entry


def _unknown_pairs(props: object) -> list[tuple[str, object]]:
    """The undocumented ``[name, short string value or null]`` pairs the ``skill_row`` projection ships."""
    unknown = props.get("unknown") if isinstance(props, Mapping) else None
    if not isinstance(unknown, (list, tuple)):
        return []
    return [(pair[0], pair[1]) for pair in unknown
            if isinstance(pair, (list, tuple)) and len(pair) == 2 and isinstance(pair[0], str)]


_PACKED_SKILL: Final = ("id", "tenant_id", "namespace", "label", "identifier", "steps", "action_tool", "context",
                        "status", "active", "source", "enforcement", "created_at", "rev", "unknown")
_SHIPPED_PRECONDITION: Final = tuple(sorted(PRECONDITION_PROPERTIES - {"tenant_id", "namespace"}))
_FOREIGN: Final = "precondition of no tenant or another tenant (its tenant_id is not this skill's)"


def unpack_skill_row(packed: Sequence[Any]) -> dict[str, Any]:
    """The ``skill_row`` map of one ``skill_packed`` list (the turn's cold read ships lists, not maps).

    Example:
        >>> row = unpack_skill_row(["s1", "acme", None, "Deploy", None, ["deploy"], "deploy", "", "approved",
        ...                         None, None, None, None, None, [], False, False,
        ...                         [[0, None, [["kind", "tool"], ["tool", "auth"], "same_arg"]]]])
        >>> row["preconditions"][0]["tool"], row["preconditions"][0]["unknown"], row["skill"]["label"]
        ('auth', ['same_arg'], 'Deploy')
    """
    preconditions: list[dict[str, Any] | None] = []
    for entry in packed[17]:
        if len(entry) == 1:  # not the skill's tenant: only its position left the database
            preconditions.append({"kind": _FOREIGN, "position": entry[0]})
            continue
        shipped = dict.fromkeys(_SHIPPED_PRECONDITION)
        unknown = []
        for item in entry[2]:
            if type(item) is list:
                shipped[item[0]] = item[1]
            else:
                unknown.append(item)
        shipped["position"], shipped["rev"], shipped["unknown"] = entry[0], entry[1], unknown
        preconditions.append(shipped)
    return {"skill": dict(zip(_PACKED_SKILL, packed[:15], strict=True)), "retracted": packed[15], "staged": packed[16],
            "preconditions": preconditions}


def packed_torn(packed: Sequence[Any]) -> bool:
    """``read_skill``'s torn verdict for a ``skill_packed`` list whose skill reads (its rev a string or null)."""
    rev = packed[13]
    return _is_torn(rev if isinstance(rev, str) else None, [e[1] for e in packed[17] if len(e) == 3])


def log_problems(node_id: str, problems: Sequence[str]) -> None:
    """Log a node's problems, each once per node (as ``read_skills`` does)."""
    for problem in problems:
        _log_once(node_id, problem)


def skill_from_row(row: Mapping[str, Any]) -> Skill | None:
    """The skill of one ``skill_row`` projection, or None if skipped; problems are logged once per node."""
    skills, _ = read_skills([row])
    return skills[0] if skills else None


def read_skills(rows: Sequence[Mapping[str, Any]]) -> tuple[list[Skill], bool]:
    """The skills of ``skill_row`` projections (skipped ones left out, problems logged once per node),
    and whether any was torn by a concurrent re-seed (the caller reads again)."""
    skills: list[Skill] = []
    torn = False
    for row in rows:
        reading = read_skill(row)
        log_problems(reading.node_id, reading.problems)
        torn = torn or reading.torn
        if reading.skill is not None:
            skills.append(reading.skill)
    return skills, torn


_N = TypeVar("_N", bound=_Record)


def _read_node(model: type[_N], props: Mapping[str, Any], problem: Callable[[str, object], tuple[str, str]]
               ) -> _N | None:
    """``props`` read by ``model``, or None, logging ``problem(field, id)`` (node, text) once per node
    for the first field (in declared order) that failed."""
    try:
        return model.model_validate(props)
    except PydanticValidationError as exc:
        failed = {error["loc"][0] for error in exc.errors(include_url=False) if error["loc"]}
        _log_once(*problem(next((f for f in model.model_fields if f in failed), "id"), props.get("id")))
        return None


def trigger_from_row(props: Mapping[str, Any]) -> Trigger | None:
    """The Trigger of a node's properties (``trigger_row``), or None if malformed (logged once per node).

    Example:
        >>> trigger_from_row({"id": "t1", "tenant_id": "acme", "condition": "c", "task": 5}) is None
        True
    """
    return _read_node(Trigger, props, lambda field, node: (
        (repr(node), "trigger without a string `id`") if field == "id"
        else (str(node), f"trigger `{field}` is not a string")))


def fact_from_row(props: Mapping[str, Any]) -> Fact | None:
    """The Fact of a node's properties (``fact_row``), or None if malformed (logged once per node)."""
    return _read_node(Fact, props, lambda field, node: (
        repr(node), "fact without a string `id` and `text`" if field in ("id", "text")
        else f"fact `{field}` is not a string"))
