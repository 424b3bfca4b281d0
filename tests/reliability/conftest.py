"""Reliability suite: print the collected figures at the end of the run."""

from __future__ import annotations

import pytest

from tests.reliability._stats import summary_lines


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    lines = summary_lines()
    if lines:
        terminalreporter.section("symfonic-graph reliability figures")
        for line in lines:
            terminalreporter.write_line(line)
