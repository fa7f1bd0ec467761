"""A fault injector: a loopback HTTP server that streams OpenAI-style SSE and fails on demand.

Real vLLM cannot be made to send a malformed SSE line, answer 503 or stall mid-stream when a test
asks for it. This server stands in for those faults only (plus a plain good stream to compare
with); it is not a model server and the suite's measurements never run against it.

It speaks just enough of ``POST /v1/chat/completions`` and ``POST /v1/completions`` with
``stream: true``: OpenAI chunk objects as ``data: {...}`` events, one token per text chunk, a usage
chunk when ``stream_options.include_usage`` is set, then ``data: [DONE]``. Each request's fault is
chosen by its prompt text (``faults``), else ``default``::

    with FaultInjector({"p1": Fault("status", status=503)}) as inj:
        run_plan(plan, Target(inj.url, "m"))

Bounded: it listens on 127.0.0.1 only, on a port the OS picks, in a daemon thread with its own
event loop, and leaving the ``with`` block always stops it (open connections are cancelled).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import struct
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Literal, Self

from tests.faults.prompt_cache import PromptCache

Mode = Literal["ok", "slow", "cut", "malformed", "status", "hang", "drop", "raw"]

_PATHS = ("/v1/chat/completions", "/v1/completions")
_REASONS = {
    400: "Bad Request",
    404: "Not Found",
    422: "Unprocessable Entity",
    429: "Too Many Requests",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
}
_ERROR_TYPES = {
    429: "RateLimitError",
    500: "InternalServerError",
    503: "ServiceUnavailableError",
}


@dataclass(frozen=True)
class Fault:
    """What the server does with one request.

    - ``ok``: a complete stream of ``chunks`` text chunks (default: the request's max_tokens).
    - ``slow``: as ``ok``, waiting ``delay_s`` before each chunk after the role chunk (which
      comes at once, so it must not count as the first token).
    - ``cut``: ``chunks`` text chunks, then the connection closes without [DONE] or the end of
      the HTTP body (FIN; RST when ``reset``).
    - ``malformed``: ``chunks`` text chunks, then each of ``lines`` as an event of its own
      (default ``data: {not json``), then the rest of a normal stream.
    - ``status``: HTTP ``status`` with an OpenAI-style JSON error body, no stream.
    - ``hang``: reads the request, never answers (until the client leaves or the server stops).
    - ``drop``: reads the request, closes the connection without a response.
    - ``raw``: response headers, then ``lines`` verbatim (each followed by a newline), then the
      end of the body; with ``cut_body`` the connection closes instead, as in ``cut``.

    The shape of a chat stream (any streaming mode), in this order after the role chunk:
    ``empty`` chunks with an empty ``content`` delta (a token that decoded to no text yet),
    ``reasoning`` chunks of ``reasoning_content``, ``tool_calls`` chunks of one tool call's
    deltas, then the text chunks. ``stall_s`` is waited once, before text chunk ``stall_at``.
    """

    mode: Mode = "ok"
    chunks: int | None = None
    delay_s: float = 0.0
    status: int = 503
    lines: tuple[bytes, ...] = ()
    reset: bool = False
    cut_body: bool = False
    empty: int = 0
    reasoning: int = 0
    tool_calls: int = 0
    stall_at: int | None = None
    stall_s: float = 0.0


@dataclass(frozen=True)
class Seen:
    """One request as the injector received it."""

    path: str
    prompt: str
    body: dict[str, Any]


class FaultInjector:
    def __init__(
        self,
        faults: Mapping[str, Fault] | None = None,
        *,
        default: Fault = Fault(),
        hang_cap_s: float = 60.0,
        reject_fields: frozenset[str] = frozenset(),
        usage: bool = True,
        cache: PromptCache | None = None,
    ) -> None:
        self.faults: dict[str, Fault] = dict(faults or {})
        self.cache = cache
        """Serves /metrics and /reset_prefix_cache and counts each prompt (prompt_cache.py)."""
        self.reject_fields = reject_fields
        """Request fields answered with HTTP 422, as a server without vLLM's extensions does."""
        self.usage = usage
        """False: never a usage chunk, whatever stream_options asks (an engine without one)."""
        """Fault by prompt text; may be changed between runs."""
        self.default = default
        self.hang_cap_s = hang_cap_s
        self.seen: list[Seen] = []
        self.errors: list[str] = []
        """The injector's own failures (a bug in it, not a fault it was asked for)."""
        self.address: tuple[str, int] = ("", 0)
        """(host, port) the server socket is bound to, once started."""
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping: asyncio.Event | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._ready = threading.Event()
        self._thread: threading.Thread | None = None
        self._start_error: BaseException | None = None

    @property
    def port(self) -> int:
        return self.address[1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def count(self, prompt: str) -> int:
        """How many requests carried this prompt (the runner must never retry)."""
        return sum(1 for s in list(self.seen) if s.prompt == prompt)

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="fault-injector", daemon=True)
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("the fault injector did not start within 10 s")
        if self._start_error is not None:
            raise RuntimeError("the fault injector did not start") from self._start_error

    def stop(self) -> None:
        loop, stopping, thread = self._loop, self._stopping, self._thread
        if loop is not None and stopping is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop closed in between
                loop.call_soon_threadsafe(stopping.set)
        if thread is not None:
            thread.join(timeout=10)
            if thread.is_alive():
                raise RuntimeError("the fault injector did not stop within 10 s")

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._serve())
        except BaseException as e:
            self._start_error = e
        finally:
            self._ready.set()
            loop.close()

    async def _serve(self) -> None:
        self._stopping = asyncio.Event()
        server = await asyncio.start_server(self._connection, "127.0.0.1", 0)
        host, port = server.sockets[0].getsockname()[:2]
        self.address = (host, port)
        self._ready.set()
        try:
            await self._stopping.wait()
        finally:
            server.close()
            for task in list(self._tasks):
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)
            await server.wait_closed()

    # -- one connection, one request -------------------------------------------------------------

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            await self._request(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass  # the client left (e.g. it gave up on a bad stream): nothing to answer
        except asyncio.CancelledError:
            # The server is stopping. Returning (not re-raising) keeps Python 3.11's asyncio from
            # logging the cancelled connection task as an error.
            pass
        except Exception as e:
            self.errors.append(f"{type(e).__name__}: {e}")
        finally:
            self._tasks.discard(task)
            if not writer.is_closing():
                writer.close()

    async def _request(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:  # noqa: C901  (a test double: every route and fault in one place)
        head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
        method, path, _ = head[0].split(" ", 2)
        headers = {}
        for line in head[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        body = await reader.readexactly(int(headers.get("content-length", "0")))
        if self.cache is not None and (answer := self.cache.route(method, path.split("?")[0])):
            await _plain(writer, *answer)
            return
        if method != "POST" or path not in _PATHS:
            await _error(writer, 404, f"no route {method} {path} in the fault injector")
            return
        req = json.loads(body)
        chat = path == "/v1/chat/completions"
        prompt = str(req["messages"][-1]["content"] if chat else req["prompt"])
        self.seen.append(Seen(path, prompt, req))
        if self.cache is not None:
            self.cache.prompt(prompt)
        fault = self.faults.get(prompt, self.default)
        if unexpected := sorted(self.reject_fields & req.keys()):
            await _error(writer, 422, f"Unexpected fields in the request: {unexpected}")
            return
        if not req.get("stream"):
            await _error(writer, 400, "the fault injector only streams (stream: true)")
            return

        if fault.mode == "status":
            await _error(writer, fault.status, f"fault injector: HTTP {fault.status} as asked")
        elif fault.mode == "hang":
            # Never answer; return when the client closes (it timed out) or the server stops.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.hang_cap_s):
                    while await reader.read(65536):
                        pass
        elif fault.mode == "drop":
            writer.close()
        elif fault.mode == "raw":
            await _sse_head(writer)
            for raw in fault.lines:
                await _chunk(writer, raw + b"\n")
            await (_close(writer, fault.reset) if fault.cut_body else _end(writer))
        else:
            await self._stream(writer, req, chat, prompt, fault)

    async def _stream(
        self, writer: asyncio.StreamWriter, req: dict[str, Any], chat: bool, prompt: str, f: Fault
    ) -> None:
        n = f.chunks if f.chunks is not None else int(req.get("max_tokens") or 16)
        usage = self.usage and bool((req.get("stream_options") or {}).get("include_usage"))
        c = _Chunks(str(req.get("model", "")), chat, usage)
        await _sse_head(writer)
        if chat:
            await _event(writer, c.role())
            for delta in _before_text(f):
                await _pause(f)
                await _event(writer, c.delta(delta))
        for i in range(n):
            await _pause(f)
            if i == f.stall_at:
                await asyncio.sleep(f.stall_s)
            await _event(writer, c.text(f" tok{i}"))
        if f.mode == "cut":
            await _close(writer, f.reset)
            return
        if f.mode == "malformed":
            for raw in f.lines or (b"data: {not json",):
                await _chunk(writer, raw + b"\n\n")
        await _event(writer, c.finish())
        if usage:
            await _event(writer, c.usage(len(prompt.split()), n))
        await _chunk(writer, b"data: [DONE]\n\n")
        await _end(writer)


class _Chunks:
    """OpenAI streaming chunk objects (chat.completion.chunk / text_completion)."""

    def __init__(self, model: str, chat: bool, usage: bool) -> None:
        self.chat = chat
        self.base: dict[str, Any] = {
            "id": ("chatcmpl-" if chat else "cmpl-") + "fault-injector",
            "object": "chat.completion.chunk" if chat else "text_completion",
            "created": int(time.time()),
            "model": model,
        }
        if usage:
            self.base["usage"] = None

    def _choice(self, text: str, finish: str | None, role: bool = False) -> dict[str, Any]:
        if not self.chat:
            return {"index": 0, "text": text, "logprobs": None, "finish_reason": finish}
        delta: dict[str, Any] = {"role": "assistant", "content": ""} if role else {}
        if text:
            delta["content"] = text
        return {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}

    def delta(self, delta: dict[str, Any]) -> dict[str, Any]:
        """A chat chunk with this delta as it is (reasoning, a tool call, empty content)."""
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": None}
        return {**self.base, "choices": [choice]}

    def role(self) -> dict[str, Any]:
        return {**self.base, "choices": [self._choice("", None, role=True)]}

    def text(self, text: str) -> dict[str, Any]:
        return {**self.base, "choices": [self._choice(text, None)]}

    def finish(self) -> dict[str, Any]:
        return {**self.base, "choices": [self._choice("", "length")]}

    def usage(self, prompt_tokens: int, completion_tokens: int) -> dict[str, Any]:
        u = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        }
        return {**self.base, "choices": [], "usage": u}


def _before_text(f: Fault) -> list[dict[str, Any]]:
    """The deltas a chat stream sends between its role chunk and its first content."""
    deltas: list[dict[str, Any]] = [{"content": ""} for _ in range(f.empty)]
    deltas += [{"reasoning_content": f" think{i}"} for i in range(f.reasoning)]
    for i in range(f.tool_calls):
        # The first delta names the call, the rest stream its arguments, as OpenAI does.
        call: dict[str, Any] = {"index": 0, "function": {"arguments": f'"a{i}"'}}
        if i == 0:
            call = {"index": 0, "id": "call_0", "type": "function", "function": {"name": "f"}}
        deltas.append({"tool_calls": [call]})
    return deltas


async def _pause(f: Fault) -> None:
    if f.mode == "slow":
        await asyncio.sleep(f.delay_s)


async def _sse_head(writer: asyncio.StreamWriter) -> None:
    writer.write(
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
        b"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
    )
    await writer.drain()


async def _chunk(writer: asyncio.StreamWriter, data: bytes) -> None:
    """One HTTP/1.1 body chunk, sent at once."""
    writer.write(b"%x\r\n%b\r\n" % (len(data), data))
    await writer.drain()


async def _event(writer: asyncio.StreamWriter, obj: dict[str, Any]) -> None:
    await _chunk(writer, b"data: " + json.dumps(obj).encode() + b"\n\n")


async def _end(writer: asyncio.StreamWriter) -> None:
    writer.write(b"0\r\n\r\n")
    await writer.drain()
    writer.close()
    await writer.wait_closed()


async def _close(writer: asyncio.StreamWriter, reset: bool) -> None:
    """Close mid-body: FIN, or RST (SO_LINGER 0) when ``reset``."""
    if reset:
        sock = writer.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        writer.transport.abort()
    else:
        writer.close()


async def _plain(writer: asyncio.StreamWriter, status: int, content_type: str, body: bytes) -> None:
    reason = "OK" if status == 200 else _REASONS.get(status, "Error")
    writer.write(
        f"HTTP/1.1 {status} {reason}\r\nContent-Type: {content_type}\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
        + body
    )
    await writer.drain()
    writer.close()


async def _error(writer: asyncio.StreamWriter, status: int, message: str) -> None:
    body = json.dumps(
        {
            "error": {
                "message": message,
                "type": _ERROR_TYPES.get(status, "BadRequestError"),
                "param": None,
                "code": status,
            }
        }
    ).encode()
    extra = b"Retry-After: 1\r\n" if status in (429, 503) else b""
    writer.write(
        b"HTTP/1.1 %d %b\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
        b"%bConnection: close\r\n\r\n%b"
        % (status, _REASONS.get(status, "Error").encode(), len(body), extra, body)
    )
    await writer.drain()
    writer.close()
    await writer.wait_closed()
