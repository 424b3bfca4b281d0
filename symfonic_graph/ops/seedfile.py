"""Seed files (YAML or JSON) and plain Cypher scripts, for operators.

A seed file holds ``skills`` (the fields of ``ProceduralLayer.seed_skills``)
and ``triggers`` (``condition``, ``task``, optional ``identifier``), for the
scope it names (``tenant``, ``namespace``) or the one given on the command
line, and optionally more scopes under ``scopes``::

    tenant: acme
    skills:
      - label: Deliver a report
        steps: [deliver]
        source_tag: authored:reports
        action_tool: deliver
        precondition: [get_integration_status]
        enforcement: shadow      # optional: reported, never blocking, from its first turn
    triggers:
      - condition: the user mentions their invoice
        task: Tell them invoice 42 is overdue.
    scopes:
      - tenant: globex
        namespace: user-7
        triggers: [...]

This module only parses; ``seeding.plan_seed`` validates every entry and
``seeding.apply_seed`` writes the whole file in one transaction.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from symfonic_graph.errors import ValidationError
from symfonic_graph.ops._input_limits import load_json_within_limits, load_yaml_within_limits, read_text_within_size

_SECTIONS = ("skills", "triggers")
_BLOCK_KEYS = frozenset({"tenant", "namespace", *_SECTIONS})


@dataclass(frozen=True)
class SeedFile:
    """A parsed seed file, not yet validated entry by entry (``seeding.plan_seed`` does that).

    ``blocks`` holds ``(where, block)`` pairs: ``""`` for the top level, then
    ``"scopes[i]."`` for each entry of ``scopes``; each block may hold
    ``tenant``, ``namespace``, ``skills`` and ``triggers``.
    """

    path: Path
    blocks: list[tuple[str, Mapping[str, Any]]]

    @property
    def skills(self) -> list[Any]:
        """Every skill entry of the file, in order."""
        return [entry for _, block in self.blocks for entry in block.get("skills") or []]

    @property
    def triggers(self) -> list[Any]:
        """Every trigger entry of the file, in order."""
        return [entry for _, block in self.blocks for entry in block.get("triggers") or []]


def _block(path: Path, where: str, data: Mapping[str, Any], allowed: frozenset[str]) -> Mapping[str, Any]:
    unknown = set(data) - allowed
    if unknown:
        raise ValidationError(f"{path}: {where}{sorted(unknown)[0]}",
                              f"unknown section; use {', '.join(sorted(allowed))}")
    for key in _SECTIONS:
        if not isinstance(data.get(key) or [], list):
            raise ValidationError(f"{path}: {where}{key}", "must be a list")
    return data


def load_seed_file(path: Path) -> SeedFile:
    """Parse ``path`` (``.json``, ``.yaml`` or ``.yml``); errors name the file.

    The file is read within ``_input_limits``' limits (size, nesting depth, values)
    and may hold no NaN or infinity anywhere.
    """
    text = read_text_within_size(path)
    if path.suffix == ".json":
        data = load_json_within_limits(text, source=str(path))
    else:
        data = load_yaml_within_limits(text, source=str(path))
    if not isinstance(data, Mapping):
        raise ValidationError(str(path), "must hold a mapping with `skills`, `triggers` and/or `scopes`")
    blocks = [("", _block(path, "", data, _BLOCK_KEYS | {"scopes"}))]
    scopes = data.get("scopes") or []
    if not isinstance(scopes, list):
        raise ValidationError(f"{path}: scopes", "must be a list")
    for i, scope in enumerate(scopes):
        if not isinstance(scope, Mapping):
            raise ValidationError(f"{path}: scopes[{i}]", "must be a mapping with `tenant`")
        blocks.append((f"scopes[{i}].", _block(path, f"scopes[{i}].", scope, _BLOCK_KEYS)))
    if not any(block.get(key) for _, block in blocks for key in _SECTIONS) and not scopes:
        blocks = blocks[:1]
    return SeedFile(path, blocks)


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
