"""A deterministic LangChain ``Embeddings`` for tests and benches: texts on one topic point the same way.

Each topic is one axis; a text's vector counts its words of each topic, plus
a faint component per other word (so no text is all zeros). Texts sharing a
topic have a cosine near 1; texts on different topics near 0.

Example:
    >>> e = TopicEmbeddings()
    >>> round(cosine(e.embed_query("booking a flight abroad"), e.embed_query("travelling abroad")), 2) > 0.9
    True
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence

from langchain_core.embeddings import Embeddings

TOPICS = {
    "travel": {"trip", "travel", "travelling", "abroad", "flight", "flights", "vacation", "passport", "booking"},
    "billing": {"invoice", "invoices", "bill", "billing", "payment", "charge", "refund"},
    "health": {"doctor", "medicine", "sick", "appointment", "pharmacy"},
    "pets": {"dog", "cat", "vet", "puppy", "pet"},
}
DIMENSIONS = 32


class TopicEmbeddings(Embeddings):
    """Topic axes first, then hashed buckets for every other word (weight 0.05)."""

    def __init__(self) -> None:
        self.calls = 0

    def _one(self, text: str) -> list[float]:
        vector = [0.0] * DIMENSIONS
        for word in text.lower().replace(",", " ").replace(".", " ").split():
            for axis, words in enumerate(TOPICS.values()):
                if word in words:
                    vector[axis] += 1.0
                    break
            else:
                bucket = len(TOPICS) + int(hashlib.sha256(word.encode()).hexdigest(), 16) % (DIMENSIONS - len(TOPICS))
                vector[bucket] += 0.05
        if not any(vector):
            vector[-1] = 0.05
        return vector

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.calls += len(texts)
        return [self._one(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        self.calls += 1
        return self._one(text)


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    return dot / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))
