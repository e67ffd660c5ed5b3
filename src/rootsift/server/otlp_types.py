"""The OTLP request and response messages of each signal (imported when first used)."""

from __future__ import annotations

import functools
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


LAZY_FIELDS = {
    "Span": ("attributes", "events", "links", "status"),
    "LogRecord": ("attributes",),
}
"""Fields the lazy messages keep as their encoded bytes (the wire types match: a message
field and a bytes field are both length-delimited)."""


@functools.cache
def lazy_request(signal: str) -> Any:
    """The class of a ``traces`` or ``logs`` request whose items keep their attributes (and a
    span its events, links and status) as encoded bytes, decoded by the caller only when an
    encoding is new: the same attribute repeats over most of a batch, and decoding it once
    is most of what converting a span costs. Parse only bodies the real message accepted."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    if signal == "traces":
        from opentelemetry.proto.trace.v1 import trace_pb2 as items
    else:
        from opentelemetry.proto.logs.v1 import logs_pb2 as items  # type: ignore[no-redef]
    real = items.DESCRIPTOR.package
    lazy = f"rootsift.lazy.{signal}"
    file = descriptor_pb2.FileDescriptorProto()
    items.DESCRIPTOR.CopyToProto(file)
    file.name, file.package = lazy.replace(".", "/") + ".proto", lazy
    for message in file.message_type:
        for field in message.field:
            if field.type_name.startswith(f".{real}."):
                field.type_name = f".{lazy}." + field.type_name[len(real) + 2 :]
            if field.name in LAZY_FIELDS.get(message.name, ()):
                field.type = descriptor_pb2.FieldDescriptorProto.TYPE_BYTES
                field.ClearField("type_name")
    top = "ResourceSpans" if signal == "traces" else "ResourceLogs"
    request = file.message_type.add(name="Request")
    request.field.add(
        name=f"resource_{signal if signal == 'logs' else 'spans'}",
        number=1,
        label=descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED,
        type=descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE,
        type_name=f".{lazy}.{top}",
    )
    pool = descriptor_pool.Default()
    pool.Add(file)
    found = pool.FindFileByName(file.name)
    return message_factory.GetMessageClass(found.message_types_by_name["Request"])
