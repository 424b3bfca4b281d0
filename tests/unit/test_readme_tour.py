"""The README's tour is the runnable quickstart, line for line."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_line_of_the_readme_tour_is_in_the_quickstart() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    tour = readme.split("## The one-minute tour", 1)[1]
    [code] = re.findall(r"```python\n(.*?)```", tour, flags=re.S)[:1]
    quickstart = {line.strip() for line in (ROOT / "examples" / "quickstart.py").read_text().splitlines()}
    imports = {"import asyncio, os", "GraphMemoryStore, MemoryScope, ProceduralLayer, ProspectiveLayer,",
               "ProspectiveTriggerCapability, TurnMemory, create_precondition_gate_node,"}
    missing = [ln for ln in code.splitlines() if ln.strip() and ln.strip() not in quickstart | imports]
    assert missing == []
