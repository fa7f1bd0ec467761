"""Per-request samples: the data that flows from the load runner to the statistics."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

from slo.errors import RecordError


@dataclass(frozen=True)
class RequestRecord:
    """One request as the client saw it. All times are ``time.perf_counter_ns()`` values.

    A failed request is kept (``error`` set), never dropped: it counts in every denominator.
    """

    index: int
    request_class: str
    intended_send_ns: int
    """When the arrival process wanted the request sent."""
    sent_ns: int
    """When the request was sent: handed, built, to the HTTP transport."""
    first_text_ns: int | None
    """First streamed chunk that carries generated output: content, reasoning or a tool-call
    delta (not the role-only chunk, not an empty one). Where ``ttft`` ends. In a stream whose
    counted tokens all decoded to no text, the chunk that ended the choice."""
    end_ns: int | None
    """Last chunk received (stream closed): after the usage chunk and [DONE]."""
    chunk_ns: tuple[int, ...] = field(default=(), repr=False)
    """Arrival time of every text-carrying chunk, in order."""
    prompt_tokens: int | None = None
    """From the usage chunk (the server's count)."""
    output_tokens: int | None = None
    """From the usage chunk, not from the number of chunks."""
    expected_prompt_tokens: int | None = None
    max_tokens: int | None = None
    warmup: bool = False
    error: str | None = None
    """Error kind and message, e.g. ``"APIStatusError: 503 ..."``; None when it succeeded."""
    instance: str = ""
    """The vLLM instance that served it (``[servers.NAME]``); empty with one server."""
    response_id: str | None = None
    """The id the server gave the response (its chunks' ``id``): the key to this request in the
    server's logs and traces."""
    first_chunk_ns: int | None = None
    """First chunk with a choice, whatever it carries (the chat role-only chunk, an empty
    delta): vLLM bench serve's TTFT. None in runs stored before it was kept."""
    first_content_ns: int | None = None
    """First chunk with answer text (``delta.content``; a completion's ``text``): what a user
    of a reasoning model sees first. None when the answer had no text."""
    first_tool_ns: int | None = None
    """First chunk with a ``tool_calls`` delta. None when the model called no tool."""

    @property
    def ok(self) -> bool:
        return self.error is None and self.first_text_ns is not None and self.end_ns is not None

    @property
    def ttft_s(self) -> float | None:
        if self.first_text_ns is None:
            return None
        return (self.first_text_ns - self.sent_ns) / 1e9

    def _since_sent(self, t: int | None) -> float | None:
        """Seconds from the send to ``t``, for a request that succeeded."""
        return None if t is None or not self.ok else (t - self.sent_ns) / 1e9

    @property
    def ttft_chunk_s(self) -> float | None:
        return self._since_sent(self.first_chunk_ns)

    @property
    def ttft_content_s(self) -> float | None:
        return self._since_sent(self.first_content_ns)

    @property
    def ttft_tool_s(self) -> float | None:
        return self._since_sent(self.first_tool_ns)

    @property
    def max_itl_s(self) -> float | None:
        """The longest gap between tokens of this request: its worst stall. None with fewer
        than two chunks (no gap)."""
        gaps = self.itl_s
        return max(gaps) if gaps and self.ok else None

    @property
    def last_text_ns(self) -> int | None:
        """The last chunk that carried generated text: where E2E ends, as in vLLM bench serve
        (the usage chunk and [DONE] that follow it are not generation)."""
        return self.chunk_ns[-1] if self.chunk_ns else self.end_ns

    @property
    def e2e_s(self) -> float | None:
        last = self.last_text_ns
        if last is None or not self.ok:
            return None
        return (last - self.sent_ns) / 1e9

    @property
    def tpot_s(self) -> float | None:
        """(E2E - TTFT) / (output_tokens - 1): vLLM bench serve's and MLPerf's definition."""
        if not self.ok or self.output_tokens is None or self.output_tokens < 2:
            return None
        last = self.last_text_ns
        assert last is not None and self.first_text_ns is not None
        return (last - self.first_text_ns) / 1e9 / (self.output_tokens - 1)

    @property
    def itl_s(self) -> tuple[float, ...]:
        """Gaps between consecutive text-carrying chunks."""
        c = self.chunk_ns
        return tuple((b - a) / 1e9 for a, b in itertools.pairwise(c))

    @property
    def schedule_lag_s(self) -> float:
        return (self.sent_ns - self.intended_send_ns) / 1e9


def to_row(r: RequestRecord, t0_ns: int) -> dict[str, Any]:
    """A record as a JSON row: times as integer ns since ``t0_ns`` (the run's start), so a
    stored run can be judged again exactly (``--slo-replay``)."""

    def rel(t: int | None) -> int | None:
        return None if t is None else t - t0_ns

    return {
        "index": r.index,
        "class": r.request_class,
        "warmup": r.warmup,
        "error": r.error,
        "intended_send_ns": rel(r.intended_send_ns),
        "sent_ns": rel(r.sent_ns),
        "first_text_ns": rel(r.first_text_ns),
        "end_ns": rel(r.end_ns),
        "chunk_ns": [t - t0_ns for t in r.chunk_ns],
        "prompt_tokens": r.prompt_tokens,
        "expected_prompt_tokens": r.expected_prompt_tokens,
        "output_tokens": r.output_tokens,
        "max_tokens": r.max_tokens,
        "instance": r.instance,
        "response_id": r.response_id,
        "first_chunk_ns": rel(r.first_chunk_ns),
        "first_content_ns": rel(r.first_content_ns),
        "first_tool_ns": rel(r.first_tool_ns),
        # Derived, for people reading the file; ignored when it is read back.
        "ttft_s": r.ttft_s,
        "tpot_s": r.tpot_s,
        "e2e_s": r.e2e_s,
    }


def from_row(row: object) -> RequestRecord:
    """A row written by ``to_row`` (times relative to the run's start) back as a record.

    Every field is checked: the statistics do arithmetic on these values, so a hand-edited or
    damaged row is a ``RecordError`` naming the field, not a crash later.
    """
    if not isinstance(row, dict):
        raise RecordError(
            f"request record {_shown(row)}: expected a JSON object with the keys "
            f"{', '.join(_ROW_KEYS)} (one row per line, as the suite writes records.jsonl)"
        )

    def get(key: str, kind: type, optional: bool) -> Any:
        if key not in row:
            raise RecordError(f"request record has no {key!r}: {_FIX}")
        value = row[key]
        if value is None and optional:
            return None
        # bool is an int to Python, never to a record: reject it where a number is expected.
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            what = _KIND_NAMES[kind] + (" or null" if optional else "")
            raise RecordError(f"request record {key!r} = {_shown(value)}: expected {what}. {_FIX}")
        return value

    chunks = get("chunk_ns", list, False)
    if not all(type(t) is int for t in chunks):
        raise RecordError(
            f"request record 'chunk_ns' = {_shown(chunks)}: expected a list of integers. {_FIX}"
        )
    return RequestRecord(
        index=get("index", int, False),
        request_class=get("class", str, False),
        intended_send_ns=get("intended_send_ns", int, False),
        sent_ns=get("sent_ns", int, False),
        first_text_ns=get("first_text_ns", int, True),
        end_ns=get("end_ns", int, True),
        chunk_ns=tuple(chunks),
        prompt_tokens=get("prompt_tokens", int, True),
        output_tokens=get("output_tokens", int, True),
        expected_prompt_tokens=get("expected_prompt_tokens", int, True),
        max_tokens=get("max_tokens", int, True),
        warmup=get("warmup", bool, False),
        error=get("error", str, True),
        # Absent in runs stored before multi-instance scenarios existed.
        instance=get("instance", str, False) if "instance" in row else "",
        # Absent in runs stored before the response id was kept.
        response_id=get("response_id", str, True) if "response_id" in row else None,
        # Absent in runs stored before the TTFT family was recorded: unknown, not zero.
        **{k: get(k, int, True) if k in row else None for k in _FIRST_KEYS},
    )


_ROW_KEYS = (
    "index",
    "class",
    "warmup",
    "error",
    "intended_send_ns",
    "sent_ns",
    "first_text_ns",
    "end_ns",
    "chunk_ns",
    "prompt_tokens",
    "expected_prompt_tokens",
    "output_tokens",
    "max_tokens",
)
_FIRST_KEYS = ("first_chunk_ns", "first_content_ns", "first_tool_ns")
_KIND_NAMES: dict[type, str] = {
    int: "an integer",
    str: "a string",
    bool: "true or false",
    list: "a list",
}
_FIX = "Rows are written by the suite; restore the file from the run, or delete the damaged row"


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
