"""The docstring examples of the pure modules run as doctests, so they cannot rot."""

from __future__ import annotations

import doctest
import importlib

import pytest

PURE_MODULES = [
    "symfonic_graph.rules._messages",
    "symfonic_graph.rules.gate",
    "symfonic_graph.shape.models",
    "symfonic_graph.rules.preconditions",
    "symfonic_graph.rules.preflight",
    "symfonic_graph.shape.scope",
    "symfonic_graph.shape.records",
    "symfonic_graph.shape.readings",
    "symfonic_graph._store.failures",
    "symfonic_graph._store.keys",
    "symfonic_graph._store.packed",
    "symfonic_graph._store.steps",
    "symfonic_graph.integrations._shared",
    "symfonic_graph.memory.turn_scope",
    "symfonic_graph.ops.doctor",
]


@pytest.mark.parametrize("name", PURE_MODULES)
def test_docstring_examples_run(name: str) -> None:
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0, f"{name} has no examples"
    assert result.failed == 0
