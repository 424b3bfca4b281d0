"""An OpenTelemetry SDK provider that exports to memory, installed for one test only."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import Sampler

from symfonic_graph import telemetry


@contextmanager
def recording_spans(sampler: Sampler | None = None) -> Iterator[InMemorySpanExporter]:
    """Route symfonic-graph's spans to a fresh in-memory exporter (the global provider is left alone)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider(sampler=sampler)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    telemetry.set_tracer_provider(provider)
    try:
        yield exporter
    finally:
        telemetry.set_tracer_provider(None)
        provider.shutdown()
