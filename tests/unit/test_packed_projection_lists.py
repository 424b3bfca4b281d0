"""The packed projection of a turn's cold read lists the same documented properties as skill_row."""

from __future__ import annotations

import re
from pathlib import Path

from symfonic_graph.shape.properties import PRECONDITION_PROPERTIES, SKILL_PROPERTIES

PROJECTION = Path(__file__).resolve().parents[2] / "cypher" / "queries" / "skill_projection.cypher"


def _packed_lists() -> list[frozenset[str]]:
    text = PROJECTION.read_text(encoding="utf-8")
    block = text[text.index("// fragment: skill_packed"):]
    return [frozenset(re.findall(r"'([a-z_]+)'", found)) for found in re.findall(r"IN\s*\[([^\]]*)\]", block)]


def test_the_packed_projection_lists_the_documented_properties() -> None:
    assert _packed_lists() == [PRECONDITION_PROPERTIES, SKILL_PROPERTIES]
