"""Seed files (YAML or JSON) and plain Cypher scripts, for operators.

A seed file holds ``skills`` (the fields of ``ProceduralLayer.seed_skills``)
and ``triggers`` (``condition`` and ``task``)::

    skills:
      - label: Deliver a report
        steps: [deliver]
        source_tag: authored:reports
        action_tool: deliver
        precondition: [get_integration_status]
    triggers:
      - condition: the user mentions their invoice
        task: Tell them invoice 42 is overdue.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from symfonic_graph.errors import ValidationError


@dataclass(frozen=True)
class SeedFile:
    """A parsed seed file, not yet validated entry by entry (the layers do that)."""

    path: Path
    skills: list[Any]
    triggers: list[Any]


def load_seed_file(path: Path) -> SeedFile:
    """Parse ``path`` (``.json``, ``.yaml`` or ``.yml``); errors name the file."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ValidationError(str(path), f"cannot read: {exc.strerror}") from None
    try:
        data = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        raise ValidationError(str(path), f"not valid {'JSON' if path.suffix == '.json' else 'YAML'}: {exc}") from None
    if not isinstance(data, Mapping):
        raise ValidationError(str(path), "must hold a mapping with `skills` and/or `triggers`")
    unknown = set(data) - {"skills", "triggers"}
    if unknown:
        raise ValidationError(f"{path}: {sorted(unknown)[0]}", "unknown section; use `skills` and `triggers`")
    sections = {}
    for key in ("skills", "triggers"):
        value = data.get(key) or []
        if not isinstance(value, list):
            raise ValidationError(f"{path}: {key}", "must be a list")
        sections[key] = value
    return SeedFile(path, sections["skills"], sections["triggers"])


@dataclass(frozen=True)
class CypherStatement:
    """One statement of a Cypher script, with the line it starts on."""

    line: int
    text: str


_END = re.compile(r";\s*(//.*)?$")


def split_cypher_script(text: str) -> list[CypherStatement]:
    """Split a script into statements that end with ``;`` at the end of a line.

    Comment-only lines are kept inside a statement (Cypher accepts them) but a
    statement made only of comments is dropped.
    """
    statements: list[CypherStatement] = []
    buffer: list[str] = []
    start = 1
    for number, line in enumerate(text.splitlines(), start=1):
        if not buffer:
            start = number
        buffer.append(line)
        if _END.search(line):
            _flush(statements, buffer, start)
            buffer = []
    _flush(statements, buffer, start)
    return statements


def _flush(statements: list[CypherStatement], buffer: list[str], start: int) -> None:
    code = [ln for ln in buffer if ln.strip() and not ln.strip().startswith("//")]
    if not code:
        return
    first = next(i for i, ln in enumerate(buffer) if ln.strip() and not ln.strip().startswith("//"))
    body = "\n".join(buffer[first:]).rstrip()
    body = _END.sub("", body).rstrip() if _END.search(body.splitlines()[-1]) else body
    statements.append(CypherStatement(start + first, body))
