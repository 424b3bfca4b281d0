"""Operator CLI behaviour that needs no database: parsing, --version, a failed server start."""

from __future__ import annotations

import subprocess

import pytest

from symfonic_graph.cli import build_parser, main
from symfonic_graph.errors import LocalServerError
from symfonic_graph.server import LocalNeo4j


def test_a_failed_server_start_under_eval_returns_non_zero_with_a_message(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def fail(self: LocalNeo4j, **_: object) -> None:
        raise LocalServerError("port 7687 is taken")

    monkeypatch.setattr(LocalNeo4j, "state", lambda self: None)
    monkeypatch.setattr(LocalNeo4j, "start", fail)
    assert main(["server", "start"]) == 2
    out, err = capsys.readouterr()
    assert "error: port 7687 is taken" in err
    shell = subprocess.run(["bash", "-c", 'eval "$1"; echo "rc=$?"', "_", out], capture_output=True, text=True,
                           check=False)
    assert shell.stdout.strip() == "rc=1"
    assert "NEO4J_URI was not exported" in shell.stderr


def test_cypher_run_and_tenants_parse() -> None:
    parser = build_parser()
    assert parser.parse_args(["cypher", "run", "f.cypher"]).per_statement is False
    assert parser.parse_args(["cypher", "run", "--per-statement", "f.cypher"]).per_statement is True
    erase = parser.parse_args(["tenants", "erase", "--tenant", "acme", "--namespace", "u1"])
    assert (erase.tenant, erase.namespace, erase.yes) == ("acme", "u1", False)
    assert parser.parse_args(["seed", "--plan", "x.yaml"]).plan is True


def test_tenants_erase_refuses_without_yes_before_connecting(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tenants", "erase", "--tenant", "acme"]) == 2
    assert capsys.readouterr().err == (
        "error: --yes: erasing tenant acme (whole) deletes its nodes for good; add --yes to confirm\n")
