"""The public import path; the implementation lives in ``symfonic_graph/memory/composition.py``."""

from symfonic_graph.memory.composition import (
    ComposedPrompt,
    PromptingCapability,
    compose_prompt,
    render_contribution,
)

__all__ = [
    "ComposedPrompt",
    "PromptingCapability",
    "compose_prompt",
    "render_contribution",
]
