"""The dev loop: the server commands from any folder, ./dev on a taken port, and the demo seed.

The demo seed writes the fixed tenants acme and globex; here it runs with
those names replaced by fresh ones (and its ids with them), so the database
the tests use keeps whatever the real demo put there, and the fresh tenants
are deleted afterwards.
"""

from __future__ import annotations

import os
import socket
import subprocess
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from symfonic_graph import GraphMemoryStore, MemoryScope, ProceduralLayer, ProspectiveLayer, TurnMemory
from symfonic_graph._store import skill_key, trigger_key
from symfonic_graph._store.cypher import cypher_root
from symfonic_graph.doctor import diagnose
from symfonic_graph.ops.demo import DEMO_SEED
from symfonic_graph.ops.seedfile import split_cypher_script
from symfonic_graph.server import LocalNeo4j, default_home
from tests._cli import run_cli

ROOT = Path(__file__).resolve().parents[2]


# -- the server commands and ./dev (no Neo4j needed) ---------------------------------


@pytest.mark.parametrize("subfolder", ["tests/integration", "symfonic_graph/server", "cypher/seeds"])
def test_server_status_works_from_any_folder_of_the_checkout(subfolder: str) -> None:
    home = default_home(ROOT)  # $SYMFONIC_GRAPH_HOME (./dev test sets it), else the checkout's .symfonic-graph
    state = LocalNeo4j(home=home).state()
    proc = run_cli("server", "status", cwd=ROOT / subfolder)
    assert f" in {home}" in proc.stdout, proc.stdout + proc.stderr
    if state is None:
        assert proc.returncode == 1 and proc.stdout.startswith("not running"), proc.stdout
    else:
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert f"at {state.uri} (pid {state.pid}, data in {home})" in proc.stdout


def _dev_is_installed() -> bool:
    venv = ROOT / ".venv"
    installed = venv / ".installed"
    return (venv / "bin" / "symfonic-graph").exists() and installed.exists() and (
        installed.stat().st_mtime >= (ROOT / "pyproject.toml").stat().st_mtime)


@pytest.mark.skipif(not _dev_is_installed(), reason="./dev would install .venv first")
@pytest.mark.parametrize(("command", "variable"), [
    (["demo"], "SYMFONIC_NEO4J_PORT"),
    (["test", "--collect-only", "-q", "tests/unit/test_cypher_loader.py"], "SYMFONIC_TEST_NEO4J_PORT"),
])
def test_dev_stops_at_once_when_the_port_is_taken(tmp_path: Path, command: list[str], variable: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NEO4J_")}
    env["SYMFONIC_GRAPH_HOME"] = str(tmp_path / "home")  # no server recorded there: ./dev must start one
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        env[variable] = str(port)
        proc = subprocess.run(["bash", str(ROOT / "dev"), *command], env=env, capture_output=True, text=True,
                              timeout=120, check=False)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert f"error: port {port} on 127.0.0.1 is taken by another process; set {variable}=" in proc.stderr
    assert "and rerun" in proc.stderr and "--port" not in proc.stderr
    assert "did not start (the error above says how to fix it); nothing was run" in proc.stderr
    assert proc.stdout == "", "neither the demo nor pytest ran"


def _env_with_a_server_of_its_own(tmp_path: Path) -> dict[str, str]:
    """The environment of a caller of ``./dev test`` with its own NEO4J_URI: ./dev starts no server."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NEO4J_", "SYMFONIC_TEST_WORKERS"))}
    env["SYMFONIC_GRAPH_HOME"] = str(tmp_path / "home")  # no server recorded there
    env["NEO4J_URI"] = "bolt://127.0.0.1:1"  # never reached
    return env


@pytest.mark.skipif(not _dev_is_installed(), reason="./dev would install .venv first")
def test_dev_test_runs_two_workers_by_default(tmp_path: Path) -> None:
    env = _env_with_a_server_of_its_own(tmp_path)
    selected = "tests/unit/test_cypher_loader.py::test_a_fragment_may_include_another_and_never_itself"
    proc = subprocess.run(["bash", str(ROOT / "dev"), "test", "-p", "no:cacheprovider", selected], env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 passed" in proc.stdout and "created: 2/2 workers" in proc.stdout, proc.stdout


@pytest.mark.parametrize(("args", "workers"), [
    ([], ["-n", "2"]),
    (["-x"], ["-n", "2"]),
    (["-n", "0"], []),  # a -n of the caller's own wins
    (["--numprocesses=3"], []),
    (["-p", "no:xdist"], []),  # so does turning xdist off (no -n left behind for it to refuse)
    (["--pdb"], []),
    (["--trace"], []),
])
def test_dev_test_adds_two_workers_unless_told_otherwise(tmp_path: Path, args: list[str], workers: list[str]) -> None:
    """The command ``./dev test`` ends with, seen by a stand-in interpreter in a copy of the checkout."""
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "dev").write_text((ROOT / "dev").read_text())
    bin_dir = tmp_path / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "symfonic-graph").write_text("#!/bin/sh\nexit 1\n")  # `server status --uri`: no dev server
    (bin_dir / "python").write_text("#!/bin/sh\nprintf '%s\\n' \"$@\"\n")
    for stub in ("symfonic-graph", "python"):
        (bin_dir / stub).chmod(0o755)
    (tmp_path / ".venv" / ".installed").write_text("")
    os.utime(tmp_path / "pyproject.toml", (0, 0))  # installed after the last change: nothing to install
    env = _env_with_a_server_of_its_own(tmp_path)
    proc = subprocess.run(["bash", str(tmp_path / "dev"), "test", *args], env=env, capture_output=True, text=True,
                          timeout=60, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.splitlines() == ["-m", "pytest", *workers, *args]


# -- the demo seed --------------------------------------------------------------------


class Tenants:
    def __init__(self) -> None:
        base = uuid.uuid4().hex[:12]
        self.acme, self.globex = f"acme-{base}", f"globex-{base}"

    def seed_text(self) -> str:
        text = (cypher_root() / "seeds" / DEMO_SEED).read_text(encoding="utf-8")
        return text.replace("acme", self.acme).replace("globex", self.globex)


@pytest.fixture
async def tenants(store: GraphMemoryStore) -> AsyncIterator[Tenants]:
    names = Tenants()
    try:
        yield names
    finally:
        await store.driver.execute_query(
            "MATCH (n) WHERE n.tenant_id IN $tenants DETACH DELETE n",
            tenants=[names.acme, names.globex], database_=store.database)


async def _seed(store: GraphMemoryStore, text: str) -> None:
    """Seed as ``demo.seed_demo`` does: the plain-Cypher script, then the library's keys stamped."""
    for statement in split_cypher_script(text):
        await store.driver.execute_query(statement.text, database_=store.database)
    await store.stamp_keys()


async def _nodes(store: GraphMemoryStore, tenants: Tenants) -> list[dict[str, object]]:
    records, _, _ = await store.driver.execute_query(
        "MATCH (n) WHERE (n:Skill OR n:Trigger) AND n.tenant_id IN $tenants "
        "RETURN labels(n)[0] AS label, n.id AS id, n.symfonic_key AS key, n.identifier AS identifier, "
        "COUNT { (n)-[:REQUIRES]->(:Precondition) } AS preconditions ORDER BY label, key",
        tenants=[tenants.acme, tenants.globex], database_=store.database)
    return [dict(r) for r in records]


def _expected(t: Tenants) -> list[dict[str, object]]:
    acme, globex = MemoryScope(t.acme), MemoryScope(t.globex)
    return [
        {"label": "Skill", "id": f"demo-{t.acme}-deliver", "identifier": "deliver-weekly", "preconditions": 3,
         "key": skill_key(acme, "deliver-weekly", "-")},
        {"label": "Skill", "id": f"demo-{t.globex}-refund", "identifier": "refund", "preconditions": 1,
         "key": skill_key(globex, "refund", "-")},
        {"label": "Trigger", "id": f"demo-{t.acme}-invoice", "identifier": "invoice-4711", "preconditions": 0,
         "key": trigger_key(MemoryScope(t.acme, "user-7"), "invoice-4711", "-")},
        {"label": "Trigger", "id": f"demo-{t.globex}-renewal", "identifier": "renewal-discount", "preconditions": 0,
         "key": trigger_key(globex, "renewal-discount", "-")},
    ]


async def _rules(store: GraphMemoryStore, scope: MemoryScope) -> str:
    block = (await TurnMemory(store).begin(scope)).preflight({"channel": "slack"})
    return block.content if block is not None else ""


@pytest.mark.anyio
async def test_the_demo_seed_run_twice_leaves_one_node_per_key(store: GraphMemoryStore, tenants: Tenants) -> None:
    text = tenants.seed_text().replace(tenants.acme, "acme")
    assert "MERGE (s:Skill {tenant_id: 'acme', id: 'demo-acme-deliver'})" in text  # ids are per tenant
    assert 's.symfonic_key = \'["skill", "\' + s.tenant_id + \'", null, "deliver-weekly"]\'' in text  # the key
    await _seed(store, tenants.seed_text())
    first = await _nodes(store, tenants)
    await _seed(store, tenants.seed_text())
    assert await _nodes(store, tenants) == first == _expected(tenants)
    rules = await _rules(store, MemoryScope(tenants.acme, "user-7"))
    assert rules.count("(skill: Deliver the weekly report)") == 1, rules
    pending = await ProspectiveLayer(store).get_pending(MemoryScope(tenants.acme, "user-7"))
    assert [t.task for t in pending] == ["Tell the user that invoice 4711 is overdue."]
    for tenant in (tenants.acme, tenants.globex):
        assert await diagnose(store, tenant) == [], "a newcomer's doctor finds nothing in the demo's data"


@pytest.mark.anyio
async def test_the_demo_seed_and_library_writes_share_one_node(store: GraphMemoryStore, tenants: Tenants) -> None:
    """The README tour re-seeds deliver-weekly in acme; a later demo must not show the rule twice."""
    acme, user_7 = MemoryScope(tenants.acme), MemoryScope(tenants.acme, "user-7")
    await _seed(store, tenants.seed_text())
    skill = await ProceduralLayer(store).seed_authored_skill(
        acme, label="Deliver the weekly report", steps=["deliver"], source_tag="authored:reports",
        action_tool="deliver", identifier="deliver-weekly",
        precondition=["get_integration_status", {"state": {"path": "channel", "op": "eq", "value": "slack"}}])
    trigger = await ProspectiveLayer(store).set_trigger(
        user_7, condition="the user mentions invoice", task="Say invoice 4711 is overdue.", identifier="invoice-4711")
    assert (skill.id, trigger) == (f"demo-{tenants.acme}-deliver", f"demo-{tenants.acme}-invoice")
    await _seed(store, tenants.seed_text())
    assert await _nodes(store, tenants) == _expected(tenants)
    assert (await _rules(store, user_7)).count("(skill: Deliver the weekly report)") == 1
    assert [t.task for t in await ProspectiveLayer(store).get_pending(user_7)] == [
        "Tell the user that invoice 4711 is overdue."]


_OLD_DEMO_NODES = """
CREATE (s:Skill {id: $skill_id, tenant_id: $t, namespace: null, label: 'Deliver the weekly report',
                 identifier: 'deliver-weekly', steps: ['get_integration_status', 'deliver'], action_tool: 'deliver',
                 status: 'approved', active: true, source: 'authored:demo', created_at: datetime()})
CREATE (s)-[:REQUIRES {position: 0}]->(:Precondition {tenant_id: $t, kind: 'tool', tool: 'get_integration_status'})
CREATE (:Trigger {id: $trigger_id, tenant_id: $t, namespace: 'user-7', condition: 'the user mentions invoice',
                  task: 'Tell the user that invoice 4711 is overdue.', status: 'pending', created_at: datetime()})
"""


@pytest.mark.anyio
@pytest.mark.parametrize("library_holds_the_key", [False, True])
async def test_the_demo_seed_takes_over_nodes_of_its_older_keyless_version(
    store: GraphMemoryStore, tenants: Tenants, library_holds_the_key: bool
) -> None:
    """A dev database seeded before the keys: its nodes are keyed; a library node holding the key is replaced."""
    if library_holds_the_key:
        await ProceduralLayer(store).seed_authored_skill(
            MemoryScope(tenants.acme), label="Deliver the weekly report", steps=["deliver"],
            source_tag="authored:reports", action_tool="deliver", identifier="deliver-weekly")
    await store.driver.execute_query(
        _OLD_DEMO_NODES, t=tenants.acme, skill_id=f"demo-{tenants.acme}-deliver",
        trigger_id=f"demo-{tenants.acme}-invoice", database_=store.database)
    await _seed(store, tenants.seed_text())
    await _seed(store, tenants.seed_text())
    nodes = await _nodes(store, tenants)
    expected = _expected(tenants)
    assert nodes == expected  # one node per key: the demo's own (tenant_id, id), the library's copy gone
    records, _, _ = await store.driver.execute_query(
        "MATCH (p:Precondition {tenant_id: $t}) WHERE NOT (:Skill)-[:REQUIRES]->(p) RETURN count(p) AS orphans",
        t=tenants.acme, database_=store.database)
    assert records[0]["orphans"] == 0
    assert (await _rules(store, MemoryScope(tenants.acme, "user-7"))).count("(skill: Deliver the weekly report)") == 1
