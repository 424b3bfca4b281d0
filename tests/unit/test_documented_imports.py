"""Every import path the documentation shows imports.

README.md and docs/*.md are scanned for ``import symfonic_graph...``,
``from symfonic_graph... import ...`` and ``python -m symfonic_graph...``; each
one found is imported (a ``from`` import takes every name it lists). Paths
users are sent to without an import statement are listed in ``ALSO``: the
deprecated names' modules, the integrations, ``diagnose`` and the CLI module.
A doc that names a path that does not import fails here.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

import symfonic_graph

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
ALSO = {
    "symfonic_graph.langchain": (),
    "symfonic_graph.langgraph": (),
    "symfonic_graph.errors": (),
    "symfonic_graph.doctor": ("diagnose",),
    "symfonic_graph.models": (),
    **{module: () for module in symfonic_graph._MOVED.values()},
}
# An import statement's first line; a parenthesised one continues to its ")".
_STATEMENT = re.compile(r"^[ \t>.]*((?:from|import)[ \t]+symfonic_graph\b.*)$", re.MULTILINE)
_RUN_MODULE = re.compile(r"python3?[ \t]+-m[ \t]+(symfonic_graph[\w.]*)")


def _statements(text: str) -> list[str]:
    found = []
    for match in _STATEMENT.finditer(text):
        statement = match.group(1)
        if "(" in statement and ")" not in statement:
            rest = text[match.end():]
            statement += rest[: rest.index(")") + 1]
        found.append(statement)
    return found


def documented_imports() -> dict[str, set[str]]:
    """``{module: names imported from it}`` for every import statement in the docs."""
    paths: dict[str, set[str]] = {}
    for doc in DOCS:
        for statement in _statements(doc.read_text(encoding="utf-8")):
            tree = ast.parse(statement.strip())
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    for alias in node.names:
                        paths.setdefault(alias.name, set())
                elif isinstance(node, ast.ImportFrom) and node.module:
                    paths.setdefault(node.module, set()).update(a.name for a in node.names)
    return paths


def documented_run_modules() -> set[str]:
    return {m for doc in DOCS for m in _RUN_MODULE.findall(doc.read_text(encoding="utf-8"))}


def test_the_scan_finds_the_documented_imports() -> None:
    paths = documented_imports()
    assert {"symfonic_graph", "symfonic_graph.langgraph", "symfonic_graph.langchain"} <= set(paths)
    assert {"GraphMemoryStore", "MemoryScope", "TurnMemory", "telemetry"} <= paths["symfonic_graph"]
    assert _statements("x\n>>> from symfonic_graph import (\n    A,\n    B,\n)\n") == [
        "from symfonic_graph import (\n    A,\n    B,\n)"]


@pytest.mark.parametrize("module", sorted(set(documented_imports()) | set(ALSO)))
def test_documented_import_path_imports(module: str) -> None:
    imported = importlib.import_module(module)
    names = documented_imports().get(module, set()) | set(ALSO.get(module, ()))
    for name in sorted(names - {"*"}):
        if not hasattr(imported, name):  # ``from pkg import submodule`` imports it
            importlib.import_module(f"{module}.{name}")
        assert getattr(imported, name) is not None, f"{module}.{name}"


@pytest.mark.parametrize("module", sorted(documented_run_modules() | {"symfonic_graph.cli"}))
def test_documented_python_m_module_runs(module: str) -> None:
    spec = importlib.util.find_spec(module)
    assert spec is not None, module
    if spec.submodule_search_locations is not None:
        assert importlib.util.find_spec(f"{module}.__main__") is not None, f"python -m {module}: no __main__"
    out = subprocess.run([sys.executable, "-m", module, "--help"], capture_output=True, text=True, timeout=120,
                         cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]


def declared_public_modules() -> set[str]:
    """The modules docs/compatibility.md, *What is public*, names."""
    text = (ROOT / "docs" / "compatibility.md").read_text(encoding="utf-8")
    section = text.split("## What is public", 1)[1].split("\n## ", 1)[0]
    return set(re.findall(r"`(symfonic_graph\.[a-z]\w*)`", section))


def test_every_module_users_are_sent_to_is_declared_public() -> None:
    declared = declared_public_modules()
    sent_to = set(symfonic_graph._MOVED.values()) | set(ALSO) | set(documented_imports())
    assert not sent_to - declared - {"symfonic_graph"}, "declare them in docs/compatibility.md, What is public"


@pytest.mark.parametrize("module", sorted(declared_public_modules()))
def test_declared_public_module_exports_what_it_lists(module: str) -> None:
    imported = importlib.import_module(module)
    assert not module.rsplit(".", 1)[1].startswith("_")
    for name in getattr(imported, "__all__", ()):
        assert getattr(imported, name) is not None, f"{module}.{name}"
