"""The top-level surface: ``__all__`` is what the package exposes, no more and no less.

``__all__`` is compared with the package's own attributes (not with a second
hand-written list): every name in it resolves, and every public attribute is
in it, a submodule, or one of ``NOT_EXPORTED`` below. ``__version__`` is not
in ``__all__`` (a star import should not bring it), so the cap of 45 names
counts the API only.
"""

from __future__ import annotations

import importlib.metadata
import re
import subprocess
import sys
import types
import warnings

import pytest

import symfonic_graph

MAX_EXPORTED = 49
"""The cap on the top level: past it, a name belongs in its module (48 since the fact, check and limit
precondition records joined the other four: a rule author builds any of the seven from one import)."""

PRECONDITION_RECORDS = ["AnyPrecondition", "CheckPrecondition", "FactPrecondition", "LimitPrecondition",
                        "StatePrecondition", "TextPrecondition", "ToolPrecondition"]
"""Every kind of precondition record a skill holds, each exported beside the others."""

NOT_EXPORTED = {"annotations": "the `from __future__ import annotations` of __init__.py"}
"""Public attributes of the package that are neither exported nor submodules, and why."""

SPEC_NAMES = [
    "MemoryScope",
    "GraphMemoryStore",
    "ProceduralLayer",
    "ProspectiveLayer",
    "MemoryLayer",
    "RetrievalPolicy",
    "MemoryContractError",
    "PluginContribution",
    "GrantEffects",
    "create_precondition_gate_node",
    "precondition_condition",
    "filter_skills_by_state_predicates",
    "build_preflight_contribution",
    "PendingTrigger",
    "GraphPendingTriggers",
    "ProspectiveTriggerCapability",
    "TriggerSelectionSink",
    "prospective_trigger_capabilities",
    "recall_policy_for",
    "without_prospective_recall",
]
"""The product contract's names: they stay exported whatever else moves."""


def test_contract_names_are_exported() -> None:
    assert not set(SPEC_NAMES) - set(symfonic_graph.__all__)


def test_every_precondition_record_is_exported_from_its_module() -> None:
    from symfonic_graph.shape import records

    for name in PRECONDITION_RECORDS:
        assert name in symfonic_graph.__all__, name
        assert getattr(symfonic_graph, name) is getattr(records, name), name
    kinds = {name for name in records.__all__ if name.endswith("Precondition")}
    assert kinds - {"Precondition", "UnreadablePrecondition"} == set(PRECONDITION_RECORDS)  # the union, the fallback


def test_all_is_sorted_unique_capped_and_resolvable() -> None:
    names = symfonic_graph.__all__
    assert names == sorted(set(names))
    assert len(names) <= MAX_EXPORTED, f"{len(names)} names: move some to their modules"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an exported name is never a deprecated one
        for name in names:
            obj = getattr(symfonic_graph, name)
            assert not isinstance(obj, types.ModuleType), name
            # a re-export of the library's own API, not of a helper it imports
            assert obj.__module__.startswith("symfonic_graph."), name


def test_every_public_attribute_is_exported_a_submodule_or_a_documented_exception() -> None:
    unlisted = {}
    for name, obj in vars(symfonic_graph).items():
        if name.startswith("_") or name in symfonic_graph.__all__:
            continue
        if isinstance(obj, types.ModuleType) and obj.__name__ == f"symfonic_graph.{name}":
            continue  # a submodule, bound by the import system
        if name in NOT_EXPORTED:
            continue
        unlisted[name] = obj
    assert not unlisted, f"public attributes missing from __all__ (export them, or prefix with _): {unlisted}"


def test_dir_lists_the_public_names_and_version_only() -> None:
    assert dir(symfonic_graph) == sorted([*symfonic_graph.__all__, "__version__"])
    assert not set(symfonic_graph._MOVED) & set(dir(symfonic_graph))


def test_version_is_the_installed_distribution_s() -> None:
    assert symfonic_graph.__version__ == importlib.metadata.version("symfonic-graph")
    assert re.fullmatch(r"\d+\.\d+\.\d+([ab]|rc|\.dev|\.post)?\d*(\+[\w.]+)?", symfonic_graph.__version__)


def test_version_without_package_metadata_is_a_valid_unknown() -> None:
    code = (
        "import importlib.metadata as m\n"
        "def missing(name): raise m.PackageNotFoundError(name)\n"
        "m.version = missing\n"
        "import symfonic_graph; print(symfonic_graph.__version__)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.strip() == "0+unknown"


def test_errors_share_one_root_and_validation_is_value_error() -> None:
    from symfonic_graph import MemoryContractError, ScopeError, SymfonicGraphError, ValidationError

    for err in (MemoryContractError, ScopeError, ValidationError):
        assert issubclass(err, SymfonicGraphError) and issubclass(err, ValueError)


def test_internals_are_not_exported() -> None:
    internals = {"GateDecision", "SkillCheck", "SkillSpec", "DroppedSkill", "scope_of", "ToolCallRef", "owned_by"}
    assert not internals & set(symfonic_graph.__all__)


def test_unknown_names_raise_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'no_such_name'"):
        symfonic_graph.no_such_name  # type: ignore[attr-defined]  # noqa: B018


def test_every_deprecated_name_is_dated_in_the_changelog() -> None:
    from pathlib import Path

    changelog = (Path(__file__).resolve().parents[2] / "CHANGELOG.md").read_text(encoding="utf-8")
    unreleased = changelog.split("\n## ", 2)[1]
    assert unreleased.startswith("Unreleased")
    deprecated = unreleased.split("\n### Deprecated\n", 1)[1].split("\n### ", 1)[0]
    assert f"removed in {symfonic_graph._REMOVED_IN}" in deprecated
    for name, module in symfonic_graph._MOVED.items():
        line = next(line for line in deprecated.replace("\n   ", " ").splitlines() if f"`{module}`:" in line)
        assert f"`{name}`" in line, f"{name} is not listed under {module} in CHANGELOG.md, Deprecated"


def test_no_text_names_a_release_past_the_next_removal() -> None:
    """The package is at 0.1.x: a "since 0.4" in a docstring or doc is stale.

    docs/compatibility.md (which speaks of 1.0) and versions right after another
    product's name ("Neo4j since 5.26") are not this package's releases.
    """
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    files = [*sorted((root / "symfonic_graph").rglob("*.py")), root / "README.md", root / "CHANGELOG.md",
             *sorted((root / "docs").glob("*.md"))]
    release = re.compile(r"\b(?:since|until|removed in|left the top level in|release|in)\s+`?v?(\d+)\.(\d+)(?:\.\d+)?"
                         r"\b(?![\d.-])(?!`?\s*(?:ms|s|x|%|[KMG]B|µs|us|seconds|minutes|LTS)\b)")
    last = tuple(int(part) for part in symfonic_graph._REMOVED_IN.split(".")[:2])
    stale = []
    for path in files:
        if path.name == "compatibility.md":
            continue  # the policy speaks of 1.0 and later
        text = path.read_text(encoding="utf-8")
        for match in release.finditer(text):
            other_product = re.search(r"(Neo4j|Python|driver|JDK|Java|Lucene|LangChain|LangGraph)\S*\s*$",
                                      text[max(0, match.start() - 24):match.start()])
            if (int(match.group(1)), int(match.group(2))) > last and not other_product:
                stale.append(f"{path.relative_to(root)}:{text.count(chr(10), 0, match.start()) + 1}: {match.group(0)}")
    assert not stale, stale
