"""The public import path; the implementation lives in ``symfonic_graph/ops/doctor.py``."""

from symfonic_graph.ops.doctor import (
    Finding,
    diagnose,
)

__all__ = [
    "Finding",
    "diagnose",
]
