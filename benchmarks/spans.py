"""vLLM's own TTFT for each request, from its OpenTelemetry request spans.

vLLM started with ``--otlp-traces-endpoint URL`` (and ``OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=
http/protobuf``) posts one span per finished request. Its ``gen_ai.latency.time_to_first_token``
is the very value vLLM observes into ``vllm:time_to_first_token_seconds``, and its
``gen_ai.request.id`` is the id the response carries (``cmpl-X`` in the chunks, ``cmpl-X-0`` in
the span). So client TTFT minus span TTFT is each request's own overhead, exactly, at any
concurrency; the histogram only gives it per bucket.

``SpanSink`` is the receiving end: a loopback HTTP server in a thread that only keeps the bodies;
they are decoded on ``ttft_by_id``, after the run, so receiving costs the measured client almost
nothing while it measures.
"""

from __future__ import annotations

import gzip
import threading
import time
from collections.abc import Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType

TTFT_ATTR = "gen_ai.latency.time_to_first_token"
ID_ATTR = "gen_ai.request.id"
# vLLM exports in batches; a short delay lets a run's spans arrive soon after it ends.
SERVER_ENV = {
    "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf",
    "OTEL_BSP_SCHEDULE_DELAY": "200",
}


def request_key(span_id: str) -> str:
    """The id a response's chunks carry, from its span's: vLLM adds ``-<prompt index>``."""
    return span_id.rsplit("-", 1)[0]


class SpanSink:
    def __init__(self) -> None:
        self._bodies: list[bytes] = []
        self._lock = threading.Lock()
        self._ttft: dict[str, float] = {}
        self._decoded = 0  # bodies decoded into _ttft so far
        sink = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                with sink._lock:
                    sink._bodies.append(body)
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/v1/traces"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> SpanSink:
        self._thread.start()
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._server.shutdown()
        self._server.server_close()

    def ttft_by_id(self) -> dict[str, float]:
        """Every span received so far: the response id (``request_key``) to vLLM's TTFT in s
        (bodies are decoded once, the first time this sees them)."""
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceRequest,
        )

        with self._lock:
            bodies = self._bodies[self._decoded :]
        self._decoded += len(bodies)
        for body in bodies:
            req = ExportTraceServiceRequest()
            req.ParseFromString(body)
            for rs in req.resource_spans:
                for ss in rs.scope_spans:
                    for span in ss.spans:
                        attrs = {kv.key: kv.value for kv in span.attributes}
                        if TTFT_ATTR in attrs and ID_ATTR in attrs:
                            key = request_key(attrs[ID_ATTR].string_value)
                            self._ttft[key] = attrs[TTFT_ATTR].double_value
        return self._ttft

    def wait_for(self, keys: Iterable[str], timeout_s: float = 15.0) -> dict[str, float]:
        """The spans of ``keys``, waiting for vLLM's exporter to send them (at most
        ``timeout_s``); a key still missing then is left out."""
        want = set(keys)
        deadline = time.monotonic() + timeout_s
        while True:
            got = self.ttft_by_id()
            if want <= got.keys() or time.monotonic() > deadline:
                return {k: got[k] for k in want if k in got}
            time.sleep(0.2)
