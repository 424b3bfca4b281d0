"""The write input of each node type: one pydantic model each, every error naming its field.

Every write validates through these models before any query runs: the layers
(``seed_authored_skill``, ``seed_skills``, ``propose_skill``, ``propose_mined``,
``set_trigger``, ``add_fact``, ``add_facts``) and seed files. A field is added
to a node type by adding it to its model. An error is the library's
``ValidationError`` naming the field path, prefixed with the entry it came from
(``skills[3].steps[0]: must not be empty``); the first problem in field order wins.

Example:
    >>> skill = SkillInput.read({"label": "Deploy", "steps": ["deploy"], "source_tag": "authored:ci",
    ...                          "precondition": ["run_tests"]})
    >>> [p.kind for p in skill.precondition], skill.content()["steps"]
    (['tool'], ['deploy'])
    >>> SkillInput.read({"label": "Deploy", "steps": [""], "source_tag": "authored:ci"}, "skills[3].")
    Traceback (most recent call last):
    ...
    symfonic_graph.errors.ValidationError: skills[3].steps[0]: must not be empty
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from typing import Annotated, Any, ClassVar, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    PlainSerializer,
    PlainValidator,
    SerializationInfo,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic import ValidationError as PydanticValidationError

from symfonic_graph.errors import ValidationError
from symfonic_graph.shape import _embedding, _recurrence, _time
from symfonic_graph.shape import _validate as v
from symfonic_graph.shape._limits import MAX_KEY_PART, check_sizes
from symfonic_graph.shape.expressions import compile_expression
from symfonic_graph.shape.records import (
    Precondition,
    precondition_item,
    precondition_node,
    preconditions_from_input,
)

__all__ = ["ENFORCEMENTS", "TRIGGER_KINDS", "FactInput", "SkillInput", "TriggerInput", "WriteInput", "dump_records",
           "same_args_text"]

ENFORCEMENTS = frozenset({"enforce", "shadow"})
"""How the gate runs a rule: ``enforce`` blocks, ``shadow`` reports and never blocks."""


def dump_records(value: tuple[Any, ...], info: SerializationInfo) -> Any:
    """Precondition records of any registered kind, dumped each by its own class (no serializer warnings)."""
    dumped = [entry.model_dump(mode=info.mode) for entry in value]
    return dumped if info.mode == "json" else tuple(dumped)


def dump_inputs(value: tuple[Any, ...]) -> list[Any]:
    """Precondition records in their write-input form (``{"state": {...}}``): a dump reads back as written."""
    return [precondition_item(entry, typed=True) for entry in value]


Records = Annotated[
    tuple[Precondition, ...],
    PlainValidator(lambda value: preconditions_from_input(value)),
    PlainSerializer(dump_inputs),
]
"""A skill's preconditions on write: None, one entry or a list, each read strictly by its registered kind."""


def _problem(exc: PydanticValidationError, prefix: str) -> ValidationError:
    """The first error of a validation as our ``ValidationError``, its field path under ``prefix``."""
    first = exc.errors(include_url=False, include_input=False)[0]
    raised = (first.get("ctx") or {}).get("error")
    if isinstance(raised, ValidationError):
        return ValidationError(prefix + raised.field, raised.problem)
    where = v.field_path(first["loc"], prefix) or prefix.rstrip(".") or "input"
    return ValidationError(where, {"missing": "is required", "extra_forbidden": "unknown field",
                                   "model_type": "must be a mapping"}.get(first["type"], first["msg"]))


class WriteInput(BaseModel):
    """What every write input shares: unknown fields refused first, then required ones, then each field in order.

    ``read(data, prefix, **context)`` validates a mapping (errors named under
    ``prefix``); constructing the model directly raises pydantic's error wrapping the same one.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    required: ClassVar[tuple[str, ...]] = ()
    """Fields refused as ``is required`` when absent (before any value is checked)."""
    absent: ClassVar[Mapping[str, Any]] = {}
    """Fields that read an absent key as this value (then checked like a given one)."""

    @classmethod
    def read(cls, data: object, prefix: str = "", **context: Any) -> Self:
        """``data`` validated; a ``ValidationError`` naming ``prefix`` + the field otherwise."""
        try:
            return cls.model_validate(data, context=context)
        except PydanticValidationError as exc:
            raise _problem(exc, prefix) from None

    @model_validator(mode="before")
    @classmethod
    def _fields_first(cls, data: Any) -> Any:
        if not isinstance(data, Mapping):
            return data
        unknown = set(data) - set(cls.model_fields)
        if unknown:
            raise ValidationError(str(sorted(unknown, key=str)[0]), "unknown field")
        for name in cls.required:
            if name not in data:
                raise ValidationError(name, "is required")
        return {**cls.absent, **data}


class SkillInput(WriteInput):
    """One skill to write (``ProceduralLayer.seed_skills``, a seed file's ``skills`` entry).

    Read with ``authored=True`` (approved skills), ``source_tag`` must start
    with ``authored:``. ``precondition`` takes None, one entry or a list.
    ``enforcement`` (``"enforce"`` or ``"shadow"``) sets how the gate runs the
    rule from its first turn; absent (None), a new skill is enforced and a
    re-seeded one keeps its mode. It is not part of the content (the key of a
    skill without an identifier, its revision digest).
    """

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    required: ClassVar[tuple[str, ...]] = ("label", "steps", "source_tag")

    source_tag: str
    identifier: str | None = None
    precondition: Records = ()
    label: str
    steps: tuple[str, ...]
    action_tool: str | None = None
    context: str = ""
    enforcement: str | None = None

    @field_validator("source_tag", mode="plain")
    @classmethod
    def _source_tag(cls, value: object, info: ValidationInfo) -> str:
        source = v.text("source_tag", value)
        if (info.context or {}).get("authored") and not source.startswith("authored:"):
            raise ValidationError("source_tag", 'must start with "authored:", e.g. "authored:billing"')
        return source

    @field_validator("identifier", mode="plain")
    @classmethod
    def _identifier(cls, value: object) -> str | None:
        return _identifier(value)

    @field_validator("label", mode="plain")
    @classmethod
    def _label(cls, value: object) -> str:
        return v.within_property_bytes("label", v.text("label", value))

    @field_validator("steps", mode="plain")
    @classmethod
    def _steps(cls, value: object) -> tuple[str, ...]:
        return tuple(v.string_list("steps", value))

    @field_validator("action_tool", mode="plain")
    @classmethod
    def _action_tool(cls, value: object) -> str | None:
        return v.action_tool_input("action_tool", value)

    @field_validator("context", mode="plain")
    @classmethod
    def _context(cls, value: object) -> str:
        return v.within_property_bytes("context", v.text("context", value, required=False))

    @field_validator("enforcement", mode="plain")
    @classmethod
    def _enforcement(cls, value: object) -> str | None:
        if value is None or (isinstance(value, str) and value in ENFORCEMENTS):
            return value
        raise ValidationError("enforcement", 'must be "enforce" or "shadow" (or absent: enforced)')

    @model_validator(mode="after")
    def _sizes(self) -> Self:
        check_sizes("action_tool", self.action_tool)
        for i, node in enumerate(self.nodes()):  # every string at most MAX_PROPERTY_BYTES, every list MAX_LIST_ITEMS
            check_sizes(f"precondition[{i}]", {k: node[k] for k in ("tool", "tools", "path", "value", "text")})
        return self

    def nodes(self) -> list[dict[str, Any]]:
        """The ``:Precondition`` node properties of ``precondition``, in order."""
        return [precondition_node(entry, i) for i, entry in enumerate(self.precondition)]

    def content(self) -> dict[str, Any]:
        """What a write stores of this skill (keyed and stamped by the layer)."""
        return {"label": self.label, "steps": list(self.steps), "action_tool": self.action_tool,
                "context": self.context, "source": self.source_tag, "preconditions": self.nodes()}


TRIGGER_KINDS = ("text", "time", "event", "semantic")
"""The kinds of reminder a trigger can be: matched by the caller's evaluator, due at a time, on a tool call,
or by meaning (the turn's embedding near its condition's)."""


_TRIGGER_DEFAULTS: Mapping[str, Any] = {"kind": "text", "due_at": None, "due_in": None, "expires_at": None,
                                         "recurrence": None, "on_tool": None, "same_args": None, "where": None,
                                         "once": False, "embedding": None}


class TriggerInput(WriteInput):
    """One reminder to write (``ProspectiveLayer.set_trigger``, a seed file's ``triggers`` entry).

    ``kind`` is ``"text"`` (a ``condition`` the caller's evaluator matches,
    as ever) or ``"time"`` (offered on every turn at or after ``due_at`` until
    acknowledged; ``due_in``, a duration, is resolved to ``due_at`` when
    written). Absent, it is ``"time"`` when a due time is given, else
    ``"text"``. ``expires_at`` (any kind): never offered at or after it.
    ``recurrence`` (a time trigger): one RRULE (``FREQ=WEEKLY;BYDAY=MO``)
    whose start is the first due time; acknowledging an occurrence makes the
    next one. ``"event"``: offered once the conversation holds a successful
    call of ``on_tool`` whose arguments include ``same_args`` (a mapping of
    argument name to value, stored as JSON text); absent, ``kind`` is
    ``"event"`` when ``on_tool`` is given. ``where`` (an event trigger): a
    CEL expression over ``result`` (the call's parsed result) and ``call``
    (its arguments) that must hold too; compiled when written. ``once``:
    acknowledged when first offered (default False: selection is not
    acknowledgement). ``"semantic"``: offered on a turn whose embedding
    (the wiring's ``embeddings`` of what was said) reaches the wiring's
    cosine ``similarity`` with ``embedding``, the embedding of
    ``condition`` (``ProspectiveLayer(store, embeddings=...)`` computes it
    when it is not given).
    Instants take an aware datetime, epoch seconds or an ISO 8601 string with
    an offset (``symfonic_graph.shape._time``).

    Example:
        >>> TriggerInput.read({"task": "Call the bank.", "due_in": "2h"}).kind
        'time'
        >>> TriggerInput.read({"task": "Call the bank.", "kind": "time"}, "triggers[0].")
        Traceback (most recent call last):
        ...
        symfonic_graph.errors.ValidationError: triggers[0].due_at: a time trigger needs due_at or due_in
    """

    absent: ClassVar[Mapping[str, Any]] = {"condition": None, "task": None}

    identifier: str | None = None
    kind: str = "text"
    condition: str
    task: str
    due_at: datetime | None = None
    due_in: float | None = None
    expires_at: datetime | None = None
    recurrence: str | None = None
    on_tool: str | None = None
    same_args: str | None = None
    where: str | None = None
    once: bool = False
    embedding: tuple[float, ...] | None = None

    @model_validator(mode="before")
    @classmethod
    def _kind_of_due(cls, data: Any) -> Any:
        if isinstance(data, Mapping) and data.get("kind") is None and (
            data.get("due_at") is not None or data.get("due_in") is not None
        ):
            return {**data, "kind": "time"}
        if isinstance(data, Mapping) and data.get("kind") is None and data.get("on_tool") is not None:
            return {**data, "kind": "event"}
        if isinstance(data, Mapping) and data.get("kind") is None and data.get("embedding") is not None:
            return {**data, "kind": "semantic"}
        if isinstance(data, Mapping) and "kind" in data and data["kind"] is None:
            return {**data, "kind": "text"}
        return data

    @field_validator("identifier", mode="plain")
    @classmethod
    def _identifier(cls, value: object) -> str | None:
        return _identifier(value)

    @field_validator("kind", mode="plain")
    @classmethod
    def _kind(cls, value: object) -> str:
        if isinstance(value, str) and value in TRIGGER_KINDS:
            return value
        raise ValidationError("kind", f"must be one of {', '.join(map(repr, TRIGGER_KINDS))}, got {value!r}")

    @field_validator("condition", mode="plain")
    @classmethod
    def _condition(cls, value: object, info: ValidationInfo) -> str:
        kind = info.data.get("kind", "text")
        if kind not in ("text", "semantic") and value is None:
            return ""  # a time or event trigger needs no condition
        if kind == "semantic" and value is None:
            raise ValidationError("condition", "a semantic trigger needs its condition: the text its embedding "
                                               "is of (on the command line, --condition)")
        return v.text("condition", value)

    @field_validator("task", mode="plain")
    @classmethod
    def _task(cls, value: object) -> str:
        return v.text("task", value)

    @field_validator("due_at", "expires_at", mode="plain")
    @classmethod
    def _instant(cls, value: object, info: ValidationInfo) -> datetime | None:
        return None if value is None else _time.instant(str(info.field_name), value)

    @field_validator("due_in", mode="plain")
    @classmethod
    def _due_in(cls, value: object) -> float | None:
        return None if value is None else _time.seconds("due_in", value)

    @field_validator("recurrence", mode="plain")
    @classmethod
    def _recurrence(cls, value: object, info: ValidationInfo) -> str | None:
        return None if value is None else _recurrence.rule("recurrence", value, info.data.get("due_at"))

    @field_validator("on_tool", mode="plain")
    @classmethod
    def _on_tool(cls, value: object) -> str | None:
        return None if value is None else v.tool_name("on_tool", value)

    @field_validator("same_args", mode="plain")
    @classmethod
    def _same_args(cls, value: object) -> str | None:
        return None if value is None else same_args_text("same_args", value)

    @field_validator("where", mode="plain")
    @classmethod
    def _where(cls, value: object) -> str | None:
        return None if value is None else compile_expression(value, "where").text

    @field_validator("once", mode="plain")
    @classmethod
    def _once(cls, value: object) -> bool:
        if isinstance(value, bool):
            return value
        raise ValidationError("once", f"must be true or false, got {value!r}")

    @field_validator("embedding", mode="plain")
    @classmethod
    def _embedding(cls, value: object) -> tuple[float, ...] | None:
        return None if value is None else _embedding.vector("embedding", value)

    @model_validator(mode="after")
    def _sizes(self) -> Self:
        if self.kind == "semantic" and self.embedding is None:
            raise ValidationError("embedding", "a semantic trigger needs the embedding of its condition: give "
                                               "`embedding` (on the command line, --embedding '[...]'), or "
                                               "write it with ProspectiveLayer(store, embeddings=...)")
        if self.kind != "semantic" and self.embedding is not None:
            raise ValidationError("embedding", f'only a semantic trigger has an embedding (kind "semantic", '
                                               f"not {self.kind!r})")
        for name in ("condition", "task", "same_args", "where"):  # every turn of the scope ships them
            check_sizes(name, getattr(self, name))
        if self.kind == "time":
            if self.due_at is None and self.due_in is None:
                raise ValidationError("due_at", "a time trigger needs due_at or due_in")
            if self.due_at is not None and self.due_in is not None:
                raise ValidationError("due_in", "give due_at or due_in, not both")
        elif self.due_at is not None or self.due_in is not None:
            raise ValidationError("due_at" if self.due_at is not None else "due_in",
                                  f'only a time trigger has a due time (kind "time", not {self.kind!r})')
        if self.kind == "event" and self.on_tool is None:
            raise ValidationError("on_tool", "an event trigger needs the tool whose call fires it")
        if self.kind != "event" and self.on_tool is not None:
            raise ValidationError("on_tool", f'only an event trigger has a tool (kind "event", not {self.kind!r})')
        if self.same_args is not None and self.on_tool is None:
            raise ValidationError("same_args", "needs on_tool: the arguments are those of its call")
        if self.where is not None and self.on_tool is None:
            raise ValidationError("where", "needs on_tool: it reads that tool's call (`result`, `call`)")
        if self.recurrence is not None and self.kind != "time":
            raise ValidationError("recurrence", "only a time trigger recurs (its first due time starts the rule)")
        if self.expires_at is not None and self.due_at is not None and self.expires_at <= self.due_at:
            raise ValidationError("expires_at", "must be after due_at (it would never be offered)")
        return self

    def content(self) -> dict[str, Any]:
        """What a write stores of this trigger: every field but ``identifier`` (which keys it, in the layer).

        Instants are epoch milliseconds; ``due_in`` stays a duration (``due_at`` of the write row resolves it).
        The kind and lifecycle fields are left out at their defaults, so a text trigger's content (the key of
        a seed file's entry without an identifier) is what it was before they existed.
        """
        return {name: _time.epoch_millis(value) if isinstance(value, datetime)
                else list(value) if isinstance(value, tuple) else value
                for name, value in self.model_dump(exclude={"identifier"}).items()
                if not (name in _TRIGGER_DEFAULTS and value == _TRIGGER_DEFAULTS[name])}


class FactInput(WriteInput):
    """One fact to write (``SemanticLayer.add_fact``): a non-empty text of at most ``MAX_PROPERTY_BYTES``."""

    text: str

    @field_validator("text", mode="plain")
    @classmethod
    def _text(cls, value: object) -> str:
        return v.text("text", value)

    @model_validator(mode="after")
    def _sizes(self) -> Self:
        check_sizes("text", self.text)
        return self

    @classmethod
    def of(cls, text: object, field: str = "text") -> FactInput:
        """The fact of ``text``; an error names ``field`` (``texts[4]``) instead of ``text``.

        Example:
            >>> FactInput.of("", "texts[4]")
            Traceback (most recent call last):
            ...
            symfonic_graph.errors.ValidationError: texts[4]: must not be empty
        """
        try:
            return cls.read({"text": text})
        except ValidationError as exc:
            raise ValidationError(field + exc.field.removeprefix("text"), exc.problem) from None


def same_args_text(field: str, value: object) -> str:
    """An event trigger's ``same_args`` (a mapping of argument name to a JSON scalar, or its JSON text) as JSON text.

    Example:
        >>> same_args_text("same_args", {"order_id": "A-17"})
        '{"order_id": "A-17"}'
    """
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            raise ValidationError(field, "must be a mapping of argument name to value, or its JSON text") from None
    if not isinstance(value, Mapping) or not value:
        raise ValidationError(field, "must be a non-empty mapping of argument name to value, e.g. {order_id: A-17}")
    for name, item in value.items():
        if not isinstance(name, str) or not name:
            raise ValidationError(field, f"argument names must be non-empty strings, got {name!r}")
        if item is not None and not isinstance(item, (str, int, float, bool)):
            raise ValidationError(f"{field}.{name}",
                                  f"must be a string, number, bool or null, got {type(item).__name__}")
    return json.dumps(dict(value), sort_keys=True, ensure_ascii=False)


def _identifier(value: object) -> str | None:
    ident = v.optional_text("identifier", value)
    if ident is not None and len(ident) > MAX_KEY_PART:
        raise ValidationError("identifier", f"must be at most {MAX_KEY_PART} characters")
    return ident
