"""The repository stands alone: no code, test or doc points at a document it does not hold."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# Written in pieces so that this file does not match itself.
_OUTSIDE = re.compile("SP" + r"EC §|\b[Ii]ss" + r"ue #?\d+")


def test_no_reference_to_a_spec_section_or_an_issue_number() -> None:
    files = [ROOT / "README.md", ROOT / "CHANGELOG.md"]
    for folder, patterns in (("symfonic_graph", ("*.py",)), ("tests", ("*.py",)), ("bench", ("*.py",)),
                             ("docs", ("*.md",)), ("cypher", ("*.cypher",))):
        for pattern in patterns:
            files += sorted((ROOT / folder).rglob(pattern))
    found = [f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
             for path in files if path.is_file()
             for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if _OUTSIDE.search(line)]
    assert not found, "say the point in plain words instead:\n" + "\n".join(found)
