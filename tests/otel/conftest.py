"""A real OpenTelemetry SDK behind procflow's tracing, recording spans in memory.

The API allows one global tracer provider per process; these tests install theirs for one test
and then put the API's globals back as they were (the way OpenTelemetry's own test utilities
reset them), so no other test of the session records spans.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.util._once import Once


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """The exporter every span procflow makes during the test ends up in."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    saved = trace._TRACER_PROVIDER, trace._TRACER_PROVIDER_SET_ONCE
    trace._TRACER_PROVIDER_SET_ONCE = Once()
    trace.set_tracer_provider(provider)
    try:
        yield exporter
    finally:
        trace._TRACER_PROVIDER, trace._TRACER_PROVIDER_SET_ONCE = saved
        provider.shutdown()
