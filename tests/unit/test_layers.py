"""The house's plan, checked: each folder is a layer, and a module imports only from its own layer or below.

Every import of every module (at the top, inside functions, under
``TYPE_CHECKING``) is read with ``ast``. The top-level modules besides
``errors`` and ``telemetry`` are the public import paths kept for users: each
only re-exports one implementation module, and no module of the library
imports one. No module is over ``MAX_LINES`` lines.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "symfonic_graph"

LAYERS: tuple[tuple[str, ...], ...] = (
    ("errors",),  # the error tree: every layer raises it
    ("shape",),  # records of each node type, the scope, bounds
    ("telemetry",),  # span names and helpers, read by the gate and the turn
    ("_store",),  # the driver side
    ("rules",),  # the pure enforcement core
    ("memory",),  # a turn's read, triggers, recall, the write layers
    ("learning",),  # traces, mining, replay
    ("integrations",),  # LangChain, LangGraph
    ("ops", "server"),  # doctor, seeding, the demo; the local Neo4j
    ("cli",),  # the symfonic-graph command
)
"""Bottom to top. A module may import from its own layer and the layers before it, never from one after."""

FACADES = frozenset({"composition", "decisions", "doctor", "gate", "langchain", "langgraph", "layers", "models",
                     "preconditions", "recall", "skill_source", "triggers", "turn_scope"})
"""Public import paths at the top level (docs/compatibility.md, *What is public*), each a re-export."""

MAX_LINES = 600

RANK = {name: rank for rank, names in enumerate(LAYERS) for name in names}


def modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def dotted(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def top_of(module: str) -> str | None:
    """The top-level entry (folder or module) of ``symfonic_graph.X...``; None for the package face itself."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


def imported(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every import of the library in ``path``; ``from symfonic_graph import X`` names X."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.split(".")[0] == "symfonic_graph"]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == "symfonic_graph":
                for alias in node.names:
                    sub = PACKAGE / alias.name
                    is_module = sub.is_dir() or sub.with_suffix(".py").exists()
                    found.append((node.lineno, f"symfonic_graph.{alias.name}" if is_module else "symfonic_graph"))
            elif node.module.split(".")[0] == "symfonic_graph":
                found.append((node.lineno, node.module))
    return found


def layer_of(path: Path) -> str | None:
    return top_of(dotted(path))


def test_every_module_sits_in_a_declared_layer_or_is_a_facade() -> None:
    loose = sorted({layer_of(p) for p in modules()} - set(RANK) - FACADES - {None})
    assert loose == [], f"declare these in LAYERS (or, for a public path, FACADES): {loose}"


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_module_imports_from_a_layer_above_it(path: Path) -> None:
    layer = layer_of(path)
    if layer is None or layer in FACADES:
        return  # the package face and the public paths sit on top of everything
    upward = []
    for line, module in imported(path):
        target = top_of(module)
        if target is None:
            upward.append(f"line {line}: the package face `symfonic_graph` (import the module that holds the name)")
        elif target in FACADES:
            upward.append(f"line {line}: the public path {module} (import its implementation)")
        elif RANK[target] > RANK[layer]:
            upward.append(f"line {line}: {module} ({target} is above {layer})")
    assert upward == [], f"{path.relative_to(PACKAGE)} imports from above its layer"


@pytest.mark.parametrize("name", sorted(FACADES))
def test_a_public_path_only_re_exports_its_implementation(name: str) -> None:
    path = PACKAGE / f"{name}.py"
    tree = ast.parse(path.read_text(encoding="utf-8"))
    body = [n for n in tree.body if not (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant))]
    sources = {n.module for n in body if isinstance(n, ast.ImportFrom)}
    assert len(sources) == 1, sources
    assert all(isinstance(n, (ast.ImportFrom, ast.Assign)) for n in body), "a facade defines nothing"
    (source,) = sources
    assert source is not None and top_of(source) in RANK
    exported = next(n for n in body if isinstance(n, ast.Assign))
    names = {a.asname or a.name for n in body if isinstance(n, ast.ImportFrom) for a in n.names}
    assert set(ast.literal_eval(exported.value)) == names


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_module_is_over_the_line_cap(path: Path) -> None:
    lines = len(path.read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_LINES, f"{path.relative_to(PACKAGE)} has {lines} lines: split it by concern"
