"""A streaming server that costs almost nothing per chunk: what a load generator is measured on.

It answers ``POST /v1/chat/completions`` and ``/v1/completions`` with ``max_tokens`` text chunks
of OpenAI-style SSE, pre-encoded as HTTP/1.1 chunked frames, on keep-alive connections. The
first text chunk goes out at once; the rest either all at once (``interval_s`` 0: the client's
top speed) or one per stream every ``interval_s`` from one ticker, as a GPU's decode steps send
one token to every running sequence at a time. It runs in its own process (spawn), pinned to
its own CPUs, on uvloop when that is installed.
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import os
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from multiprocessing.connection import Connection
from typing import Any

_LENGTH = re.compile(rb"(?i)\r\ncontent-length:\s*(\d+)")
_HEAD = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n"
    b"transfer-encoding: chunked\r\n\r\n"
)


def _frame(obj: Any) -> bytes:
    data = b"data: " + (obj if isinstance(obj, bytes) else json.dumps(obj).encode()) + b"\n\n"
    return b"%x\r\n%b\r\n" % (len(data), data)


class _Frames:
    """Every byte a response sends, encoded once per (api, length)."""

    def __init__(self, chat: bool, n: int) -> None:
        base: dict[str, Any] = {
            "id": "x",
            "object": "chat.completion.chunk" if chat else "text_completion",
        }
        base |= {"created": 0, "model": "m"}

        def choice(text: str | None, finish: str | None = None) -> dict[str, Any]:
            if chat:
                delta = {"content": text} if text is not None else {}
                return {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
            return {"index": 0, "text": text or "", "logprobs": None, "finish_reason": finish}

        text = _frame({**base, "choices": [choice(" tok")]})
        role = _frame({**base, "choices": [{"index": 0, "delta": {"role": "assistant"}}]})
        self.first = _HEAD + (role if chat else b"") + text
        self.text = text
        usage = {"prompt_tokens": 8, "completion_tokens": n, "total_tokens": 8 + n}
        self.tail = (
            _frame({**base, "choices": [choice(None, "length")]})
            + _frame({**base, "choices": [], "usage": usage})
            + _frame(b"[DONE]")
            + b"0\r\n\r\n"
        )


class _Server:
    def __init__(self, interval_s: float) -> None:
        self.interval_s = interval_s
        self.frames: dict[tuple[bool, int], _Frames] = {}
        self.streams: list[list[Any]] = []  # [transport, frames, text chunks left]

    def respond(self, transport: asyncio.Transport, path: bytes, body: bytes) -> None:
        req = json.loads(body)
        chat = path.endswith(b"/chat/completions")
        n = int(req.get("max_tokens") or req.get("max_completion_tokens") or 16)
        f = self.frames.get((chat, n)) or self.frames.setdefault((chat, n), _Frames(chat, n))
        if self.interval_s <= 0:
            transport.write(f.first + f.text * (n - 1) + f.tail)
        else:
            transport.write(f.first)
            self.streams.append([transport, f, n - 1])

    async def tick(self) -> None:
        next_t = time.monotonic()
        while True:
            next_t += self.interval_s
            await asyncio.sleep(max(0.0, next_t - time.monotonic()))
            keep = []
            for s in self.streams:
                t, f, left = s
                if t.is_closing():
                    continue
                if left > 0:
                    t.write(f.text)
                    s[2] = left - 1
                    keep.append(s)
                else:
                    t.write(f.tail)
            self.streams = keep


class _Conn(asyncio.Protocol):
    def __init__(self, server: _Server) -> None:
        self.server = server
        self.buf = b""
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's is no subclass

    def data_received(self, data: bytes) -> None:
        self.buf += data
        while (end := self.buf.find(b"\r\n\r\n")) >= 0:
            head = self.buf[:end]
            m = _LENGTH.search(head)
            size = int(m.group(1)) if m else 0
            if len(self.buf) < end + 4 + size:
                return
            body, self.buf = self.buf[end + 4 : end + 4 + size], self.buf[end + 4 + size :]
            assert self.transport is not None
            self.server.respond(self.transport, head.split(b" ", 2)[1], body)


def _serve(conn: Connection, cpus: tuple[int, ...], interval_s: float) -> None:
    if cpus:
        os.sched_setaffinity(0, cpus)
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass

    async def main() -> None:
        server = _Server(interval_s)
        loop = asyncio.get_running_loop()
        srv = await loop.create_server(lambda: _Conn(server), "127.0.0.1", 0, backlog=4096)
        conn.send(srv.sockets[0].getsockname()[1])
        ticker = asyncio.create_task(server.tick()) if interval_s > 0 else None
        await loop.run_in_executor(None, conn.recv)  # until the parent says stop (or exits)
        if ticker:
            ticker.cancel()
        srv.close()

    asyncio.run(main())


@contextmanager
def minimal_server(cpus: tuple[int, ...] = (), interval_s: float = 0.0) -> Iterator[str]:
    """The server's base URL while the block runs; the process is stopped after it."""
    ctx = multiprocessing.get_context("spawn")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=_serve, args=(child, cpus, interval_s), daemon=True)
    proc.start()
    try:
        if not parent.poll(30):
            raise RuntimeError("the minimal server did not start within 30 s")
        yield f"http://127.0.0.1:{parent.recv()}"
    finally:
        parent.send("stop")
        proc.join(5)
        if proc.is_alive():
            proc.kill()
            proc.join()
