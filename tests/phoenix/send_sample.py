"""Sends a small trace to Phoenix over OTLP (see tests/phoenix/README.md).

A root span `workflow.run` with two children (`llm.call` carrying gen_ai.* attributes, and
`tool.call` ending in an error), exported with the OpenTelemetry Python SDK's OTLP exporter.
Prints the trace id and span ids (hex, as OTLP carries them) as JSON.

    python send_sample.py --protocol http --endpoint http://127.0.0.1:46006 --project chronicle-test
    python send_sample.py --protocol grpc --endpoint http://127.0.0.1:44317 --project chronicle-test

--project sets the resource attribute `openinference.project.name` (what Phoenix files the spans
under); --service-only sends `service.name` alone instead. --twice exports the same spans again
with the name and an attribute changed (to see what Phoenix does with a span id it already has).
Needs opentelemetry-sdk and opentelemetry-exporter-otlp-proto-http (and -grpc for --protocol grpc).
"""

import argparse
import json
import time

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Status, StatusCode


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--protocol", choices=["http", "grpc"], default="http")
    ap.add_argument("--endpoint", required=True, help="HTTP base URL, or the gRPC host:port URL")
    ap.add_argument("--project", default="chronicle-test")
    ap.add_argument("--service-only", action="store_true")
    ap.add_argument("--twice", action="store_true")
    args = ap.parse_args()

    attrs = {"service.name": "chronicle"}
    if not args.service_only:
        attrs = {"service.name": "chronicle", "openinference.project.name": args.project}
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create(attrs))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("chronicle.phoenix-sample")

    with tracer.start_as_current_span("workflow.run", attributes={"chronicle.run_id": "r-1"}):
        with tracer.start_as_current_span(
            "llm.call",
            attributes={
                "gen_ai.system": "openai",
                "gen_ai.request.model": "gpt-4o-mini",
                "gen_ai.usage.input_tokens": 42,
                "gen_ai.usage.output_tokens": 7,
            },
        ):
            time.sleep(0.01)
        with tracer.start_as_current_span("tool.call", attributes={"tool.name": "search"}) as s:
            s.set_status(Status(StatusCode.ERROR, "tool failed"))
    spans: list[ReadableSpan] = list(memory.get_finished_spans())

    if args.protocol == "http":
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        exporter = OTLPSpanExporter(endpoint=args.endpoint.rstrip("/") + "/v1/traces")
    else:
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        exporter = OTLPSpanExporter(endpoint=args.endpoint, insecure=True)
    results = [exporter.export(spans).name]
    if args.twice:
        again = [
            ReadableSpan(
                name=s.name + ".again",
                context=s.context,
                parent=s.parent,
                resource=s.resource,
                attributes={**(s.attributes or {}), "sent": "second"},
                events=s.events,
                links=s.links,
                kind=s.kind,
                status=s.status,
                start_time=s.start_time,
                end_time=s.end_time,
                instrumentation_scope=s.instrumentation_scope,
            )
            for s in spans
        ]
        results.append(exporter.export(again).name)
    exporter.shutdown()
    print(
        json.dumps(
            {
                "export": results,
                "trace_id": format(spans[0].context.trace_id, "032x"),
                "spans": {s.name: format(s.context.span_id, "016x") for s in spans},
            }
        )
    )


if __name__ == "__main__":
    main()
