"""The ``neo4j`` marker is applied, so ``pytest -m "not neo4j"`` is the fast suite.

Checked in this process, over what this run collected (``tests/conftest.py``
keeps the whole collection, before ``-m`` deselects any), and on the marking
hook alone with stand-in tests.
"""

from __future__ import annotations

import fcntl
from collections import defaultdict
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tests.conftest import (
    COLLECTED,
    SERVER_FIXTURE,
    WORKER_FIGURES,
    RunOrder,
    needs_server,
    pytest_collection_modifyitems,
    pytest_sessionfinish,
    pytest_testnodedown,
    schema_lock_mode,
)
from tests.reliability._stats import FIGURES, summary_lines

ROOT = Path(__file__).resolve().parents[2]

# Tests that take a server through a fixture (store, driver, ...) or start one themselves.
NEED_A_SERVER = ("tests/integration/test_isolation.py", "tests/integration/test_turn_memory.py",
                 "tests/integration/test_langgraph_e2e.py", "tests/reliability/test_restart.py",
                 "tests/reliability/test_isolation_model.py")
PURE = ("tests/unit/test_gate.py", "tests/unit/test_ruleset.py", "tests/unit/test_markers_applied.py")


def _marked(item: pytest.Item) -> bool:
    return item.get_closest_marker("neo4j") is not None


def test_every_collected_test_that_reaches_the_server_is_marked(request: pytest.FixtureRequest) -> None:
    collected = request.config.stash[COLLECTED]
    assert request.node in collected
    unmarked = [item.nodeid for item in collected if needs_server(item) and not _marked(item)]
    assert unmarked == [], "these reach neo4j_settings but `-m 'not neo4j'` would run them"
    assert not any(needs_server(item) for item in request.session.items if not _marked(item))

    marked_by_file: dict[str, set[bool]] = defaultdict(set)
    for item in collected:
        marked_by_file[item.nodeid.split("::")[0]].add(_marked(item))
    for path in NEED_A_SERVER:  # checked whenever this run collected the file (the whole suite does)
        assert marked_by_file.get(path, {True}) == {True}, path
    for path in PURE:
        assert marked_by_file.get(path, {False}) == {False}, path
    for path in (*NEED_A_SERVER, *PURE):
        assert (ROOT / path).is_file(), f"{path} moved: update this list"


class _StandIn(SimpleNamespace):
    """Enough of a ``pytest.Item`` for the marking hook."""

    def __init__(self, *fixturenames: str) -> None:
        super().__init__(fixturenames=fixturenames, markers=[])

    def add_marker(self, marker: Any) -> None:
        self.markers.append(marker.name)


def test_the_hook_marks_exactly_the_tests_whose_fixtures_reach_the_server() -> None:
    through_store = _StandIn("store", "driver", SERVER_FIXTURE, "_schema", "anyio_backend")
    direct, pure, not_a_function = _StandIn(SERVER_FIXTURE), _StandIn("tmp_path", "tenant"), SimpleNamespace()
    config = SimpleNamespace(stash={})
    items: list[Any] = [through_store, direct, pure, not_a_function]
    pytest_collection_modifyitems(config, items)  # type: ignore[arg-type]
    assert (through_store.markers, direct.markers, pure.markers) == (["neo4j"], ["neo4j"], [])
    assert config.stash[COLLECTED] == items


SLOW = ("tests/reliability/test_restart.py::test_stop_and_restart_under_load",
        "tests/reliability/test_isolation_model.py::test_isolation_state_machine")


def test_slow_tests_are_marked_and_run_by_default(request: pytest.FixtureRequest) -> None:
    assert not any(arg.startswith("-m") for arg in request.config.getini("addopts")), "./dev test runs every test"
    collected = {item.nodeid: item for item in request.config.stash[COLLECTED]}
    for nodeid in SLOW:  # checked whenever this run collected the test (the whole suite does)
        assert nodeid not in collected or collected[nodeid].get_closest_marker("slow") is not None, nodeid


class _Marked(SimpleNamespace):
    def get_closest_marker(self, name: str) -> object | None:
        return name if name in self.marks else None


def test_under_xdist_slow_tests_go_first_and_schema_changes_last_each_in_their_order() -> None:
    items: list[Any] = [_Marked(n="a", marks=()), _Marked(n="s", marks=("schema_change", "neo4j")),
                        _Marked(n="b", marks=("slow",)), _Marked(n="c", marks=("neo4j",)),
                        _Marked(n="t", marks=("schema_change",)), _Marked(n="d", marks=("slow", "neo4j"))]
    RunOrder().pytest_collection_modifyitems(items)
    assert [item.n for item in items] == ["b", "d", "a", "c", "s", "t"]


def test_under_xdist_only_tests_of_the_shared_server_hold_the_schema_lock(monkeypatch: pytest.MonkeyPatch) -> None:
    def test(marks: tuple[str, ...], fixtures: tuple[str, ...]) -> Any:
        return _Marked(marks=marks, fixturenames=fixtures)

    schema_change = test(("schema_change", "neo4j"), ("store", SERVER_FIXTURE))
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw0")
    assert schema_lock_mode(schema_change) == fcntl.LOCK_EX
    assert schema_lock_mode(test(("neo4j",), ("store", SERVER_FIXTURE))) == fcntl.LOCK_SH
    assert schema_lock_mode(test((), ("tmp_path",))) is None  # a unit test: never waited for
    assert schema_lock_mode(test(("neo4j", "slow"), ("tmp_path",))) is None  # a private server (the restart test)
    monkeypatch.delenv("PYTEST_XDIST_WORKER")
    assert schema_lock_mode(schema_change) is None  # one process: nothing to share


def test_the_figures_of_every_worker_reach_the_controllers_summary() -> None:
    saved = FIGURES.copy()
    try:
        FIGURES.clear()
        FIGURES["faults.calls"] = 3
        worker = SimpleNamespace(config=SimpleNamespace(workeroutput={}))
        pytest_sessionfinish(worker)  # type: ignore[arg-type]
        FIGURES.clear()  # the controller's own, before any worker is down
        pytest_testnodedown(SimpleNamespace(workeroutput=worker.config.workeroutput), None)
        pytest_testnodedown(SimpleNamespace(workeroutput={WORKER_FIGURES: {"faults.calls": 4}}), None)
        pytest_testnodedown(SimpleNamespace(workeroutput={}), None)  # a worker that died before finishing
        assert summary_lines() == ["faults: calls against a dead or silent Neo4j: 7"]
    finally:
        FIGURES.clear()
        FIGURES.update(saved)
