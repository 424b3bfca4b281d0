"""One write input per node type: the model is the only place a field is checked, and reads go through models.

Every write path (the model itself, ``seed_skills``' row builder, a seed file)
gives the same error text for the same bad value, under its own prefix; a
field added to ``TriggerInput`` is validated and written with no other change;
trigger and fact rows are read by their pydantic models, leniently.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import field_validator

from symfonic_graph.errors import ValidationError
from symfonic_graph.memory.layers.procedural import skill_row
from symfonic_graph.memory.layers.prospective import trigger_input_row, trigger_row
from symfonic_graph.ops.seedfile import load_seed_file
from symfonic_graph.ops.seeding import plan_seed
from symfonic_graph.shape.inputs import FactInput, SkillInput, TriggerInput
from symfonic_graph.shape.models import Fact, Trigger, fact_from_row, trigger_from_row
from symfonic_graph.shape.scope import MemoryScope

SCOPE = MemoryScope("acme", "u1")
GOOD_SKILL: dict[str, Any] = {"label": "Deploy", "steps": ["run_tests", "deploy"], "source_tag": "authored:ci",
                              "action_tool": "deploy", "precondition": ["run_tests"], "context": "CI."}
BAD = st.one_of(st.none(), st.integers(), st.booleans(), st.just(""), st.just("   "), st.just("a b"),
                st.just("Apologise."), st.just("x" * 9000), st.just("\ud800"), st.just([]), st.just([""]),
                st.lists(st.sampled_from(["a", "a b", "", 3]), max_size=3), st.just({"tool": "a b"}),
                st.just({"state": {"path": "p", "op": "gt", "value": 1}}), st.just(["x"] * 300), st.text(max_size=5))


def _error(call: Any) -> tuple[str, str] | None:
    try:
        call()
    except ValidationError as exc:
        return exc.field, exc.problem
    return None


def _seed_error(tmp: Path, section: str, entry: dict[str, Any]) -> tuple[str, str] | None:
    path = tmp / "seed.json"
    path.write_text(json.dumps({section: [entry]}), encoding="utf-8")
    try:
        plan_seed(load_seed_file(path), SCOPE)
    except ValidationError as exc:
        prefix = f"{path}: "
        assert exc.field.startswith(prefix), exc.field
        return exc.field.removeprefix(prefix), exc.problem
    return None


def _json_safe(value: object) -> bool:
    try:
        json.dumps(value).encode("utf-8")
    except (TypeError, ValueError, UnicodeEncodeError):
        return False
    return True


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(field=st.sampled_from([*sorted(SkillInput.model_fields), "stray"]), value=BAD)
def test_one_bad_skill_value_reads_the_same_through_every_path(tmp_path: Path, field: str, value: Any) -> None:
    entry = {**GOOD_SKILL, field: value}
    expected = _error(lambda: SkillInput.read(entry, "skills[0].", authored=True))
    assert _error(lambda: skill_row(SCOPE, entry, field_prefix="skills[0].")) == expected
    if _json_safe(entry):
        assert _seed_error(tmp_path, "skills", entry) == expected
    if expected is not None:
        assert expected[0].startswith("skills[0].")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(field=st.sampled_from(["condition", "task", "identifier", "kind", "due_at", "due_in", "expires_at", "recurrence",
                                "on_tool", "same_args", "stray"]), value=BAD)
def test_one_bad_trigger_value_reads_the_same_through_every_path(tmp_path: Path, field: str, value: Any) -> None:
    entry = {"condition": "the user mentions the invoice", "task": "Say it is overdue.", field: value}
    expected = _error(lambda: TriggerInput.read(entry, "triggers[0]."))
    if field != "stray":
        assert _error(lambda: trigger_row(SCOPE, field_prefix="triggers[0].", **entry)) == expected
    if _json_safe(entry):
        assert _seed_error(tmp_path, "triggers", entry) == expected


def test_a_skill_input_is_what_seed_skills_takes_and_authored_depends_on_the_write() -> None:
    skill = SkillInput(**{**GOOD_SKILL, "source_tag": "mined"})  # a draft's source: the model alone accepts it
    with pytest.raises(ValidationError, match=r'^skills\[2\]\.source_tag: must start with "authored:"'):
        skill_row(SCOPE, skill, field_prefix="skills[2].")
    row = skill_row(SCOPE, SkillInput(**GOOD_SKILL))
    assert row["steps"] == ["run_tests", "deploy"] and [p["tool"] for p in row["preconditions"]] == ["run_tests"]


def test_facts_name_their_own_field() -> None:
    assert FactInput.of("Invoices are due on the 5th.").text == "Invoices are due on the 5th."
    with pytest.raises(ValidationError, match=r"^texts\[4\]: must be a string, got int$"):
        FactInput.of(5, "texts[4]")
    with pytest.raises(ValidationError, match=r"^text: is 9000 bytes; at most 8192"):
        FactInput.of("x" * 9000)


class _Prioritised(TriggerInput):
    """A trigger with one more (made-up) field: the only change adding it takes on the Python side."""

    priority: int | None = None

    @field_validator("priority", mode="plain")
    @classmethod
    def _priority(cls, value: object) -> int | None:
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 9):
            raise ValidationError("priority", f"must be an int from 0 to 9, got {value!r}")
        return value


def test_a_trigger_field_is_one_model_change() -> None:
    trigger = _Prioritised.read({"condition": "c", "task": "t", "priority": 3}, "triggers[1].")
    row = trigger_input_row(SCOPE, trigger, keyed_by_content=True)
    assert (row["condition"], row["task"], row["priority"]) == ("c", "t", 3)  # written, and part of the content key
    assert row["key"] != trigger_input_row(SCOPE, TriggerInput.read({"condition": "c", "task": "t"}))["key"]
    with pytest.raises(ValidationError, match=r"^triggers\[1\]\.priority: must be an int from 0 to 9, got 'high'$"):
        _Prioritised.read({"condition": "c", "task": "t", "priority": "high"}, "triggers[1].")
    with pytest.raises(ValidationError, match=r"^triggers\[1\]\.priority: unknown field$"):
        TriggerInput.read({"condition": "c", "task": "t", "priority": 3}, "triggers[1].")  # the base model never had it


# --- reads: trigger and fact rows through their models --------------------------------------

_ANY = st.one_of(st.none(), st.text(max_size=4), st.integers(), st.booleans(),
                 st.lists(st.text(max_size=2), max_size=2), st.just("2026-01-01T00:00:00+01:00[Europe/Paris]"))


def _readable(row: dict[str, Any], text_fields: tuple[str, ...]) -> bool:
    return (all(isinstance(row.get(k), str) for k in ("id", "tenant_id", *text_fields))
            and all(row.get(k) is None or isinstance(row[k], str) for k in ("namespace", "status")))


@settings(max_examples=300, deadline=None)
@given(row=st.fixed_dictionaries({}, optional={k: _ANY for k in (
    "id", "tenant_id", "namespace", "condition", "task", "status", "created_at", "resolved_at", "stray")}))
def test_a_trigger_row_is_read_when_its_fields_are_strings_else_skipped_and_logged(row: dict[str, Any]) -> None:
    trigger = trigger_from_row(row)  # never raises, whatever a hand-seeded node holds
    assert (trigger is not None) == _readable(row, ("condition", "task")), row
    if trigger is not None:
        assert (trigger.id, trigger.condition, trigger.task, trigger.namespace, trigger.status) == (
            row["id"], row["condition"], row["task"], row.get("namespace"), row.get("status") or "")
        assert trigger.created_at is None or trigger.created_at.year == 2026


@settings(max_examples=200, deadline=None)
@given(row=st.fixed_dictionaries({}, optional={k: _ANY for k in ("id", "tenant_id", "namespace", "text",
                                                                 "created_at")}))
def test_a_fact_row_is_read_when_its_fields_are_strings_else_skipped(row: dict[str, Any]) -> None:
    fact = fact_from_row(row)
    assert (fact is not None) == _readable({**row, "status": None}, ("text",)), row
    if fact is not None:
        assert (fact.id, fact.text, fact.namespace) == (row["id"], row["text"], row.get("namespace"))


def test_a_malformed_trigger_is_logged_once_naming_its_node_and_field(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="symfonic_graph.models")
    row = {"id": "t-odd-7", "tenant_id": "acme", "condition": "c", "task": 5, "namespace": 3}
    assert trigger_from_row(row) is None and trigger_from_row(row) is None
    [logged] = [r.getMessage() for r in caplog.records if "t-odd-7" in r.getMessage()]
    assert "trigger `task` is not a string" in logged  # the first field in check order: id, condition, task, ...
    assert trigger_from_row({**row, "task": "t", "namespace": None, "status": None}) == Trigger(
        id="t-odd-7", tenant_id="acme", condition="c", task="t", status="")
    assert fact_from_row({"id": "f", "tenant_id": "acme", "text": "x", "created_at": "not a date"}) == Fact(
        id="f", tenant_id="acme", text="x")


def test_a_skill_input_reads_its_own_dump_back() -> None:
    """A dump is write input again (a state predicate's record holds `has_value`, which input refuses)."""
    from symfonic_graph.shape.inputs import SkillInput

    skill = SkillInput.read({"label": "Deploy", "steps": ["deploy"], "source_tag": "authored:ci", "precondition": [
        "auth", {"state": {"path": "channel", "op": "in", "value": ["web"]}}, {"state": {"path": "x", "op": "exists"}},
        {"tool": "lookup", "same_args": ["id"], "within": "user_turn"}, {"any": ["a", "b"]}, "Be kind."]})
    assert SkillInput.read(skill.model_dump()) == skill
    assert SkillInput.read(skill.model_dump(mode="json")) == skill
