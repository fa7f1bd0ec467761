"""How late the event loop wakes while some work runs on it: the wait a chunk that arrives then
has before the client timestamps it (the client's own share of a TTFT or ITL sample)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable
from typing import TypeVar

T = TypeVar("T")


async def loop_lateness(work: Awaitable[T], tick_s: float = 0.001) -> tuple[T, list[float]]:
    """``work``'s result, and how late (s) each ``tick_s`` sleep of a ticker beside it woke."""
    late: list[float] = []

    async def ticker() -> None:
        while True:
            t = time.perf_counter()
            await asyncio.sleep(tick_s)
            late.append(time.perf_counter() - t - tick_s)

    task = asyncio.create_task(ticker())
    try:
        return await work, late
    finally:
        task.cancel()
