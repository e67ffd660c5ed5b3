"""The OTLP request and response messages of each signal (imported when first used)."""

from __future__ import annotations

from typing import Any

REJECTED = {"traces": "rejected_spans", "logs": "rejected_log_records", "metrics": "rejected_data_points"}


def messages(signal: str) -> tuple[Any, Any]:
    """(an empty request, an empty response) for ``traces``, ``logs`` or ``metrics``."""
    if signal == "traces":
        from opentelemetry.proto.collector.trace.v1 import trace_service_pb2 as m

        return m.ExportTraceServiceRequest(), m.ExportTraceServiceResponse()
    if signal == "logs":
        from opentelemetry.proto.collector.logs.v1 import logs_service_pb2 as lm

        return lm.ExportLogsServiceRequest(), lm.ExportLogsServiceResponse()
    from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2 as mm

    return mm.ExportMetricsServiceRequest(), mm.ExportMetricsServiceResponse()
