"""The on-the-way-out re-check drops rows outside the scope and says so at ERROR."""

from __future__ import annotations

import logging
from dataclasses import dataclass

import pytest

from symfonic_graph import MemoryScope
from symfonic_graph.memory._isolation import keep_visible


@dataclass(frozen=True)
class Row:
    id: str
    tenant_id: str
    namespace: str | None


def test_keeps_tenant_wide_and_own_namespace_drops_the_rest(caplog: pytest.LogCaptureFixture) -> None:
    rows = [Row("a", "acme", None), Row("b", "acme", "u1"), Row("c", "acme", "u2"), Row("d", "acme2", None),
            Row("e", "acm", None)]
    with caplog.at_level(logging.ERROR, logger="symfonic_graph.isolation"):
        kept = keep_visible(MemoryScope("acme", "u1"), rows, "skill")
    assert [r.id for r in kept] == ["a", "b"]
    dropped = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert len(dropped) == 3 and all("isolation bug" in m for m in dropped)
    assert "dropped skill c" in dropped[0]
