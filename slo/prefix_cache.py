"""Prefix-cache hygiene: what a scenario declares about vLLM's prefix cache, what its own prompts
can hit, and whether the measured hit rate contradicts the declaration (INVALID).

A fixed seed against a long-running server benchmarks its prefix cache: the second run of the
same prompts is served from it. So a scenario says which cache it measures (``[workload]
prefix_cache``), the suite puts the server in that state, and vLLM's own counters
(``vllm:prefix_cache_queries`` and ``vllm:prefix_cache_hits``, in prompt tokens) are read
before and after the measured requests. The counters are compared with a forecast from the
prompts themselves, computed the way vLLM hashes its cache: chains of full blocks of token ids.

- ``cold``: the cache is emptied after the warm-up, so the measured requests can hit only what
  they share among themselves (the forecast's ``cold_ceiling``).
- ``warm``: the cache is emptied before the warm-up; the warm-up's prompts are then cached and
  the measured requests should hit them (the forecast's ``warm_floor``).
- ``off``: the server runs with ``enable_prefix_caching = false``; no hit is possible.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

PrefixCacheMode = Literal["cold", "warm", "off"]
PREFIX_CACHE_MODES: tuple[PrefixCacheMode, ...] = ("cold", "warm", "off")
DEFAULT_PREFIX_CACHE: PrefixCacheMode = "cold"
"""Figures that do not depend on what the server served before (docs/scenarios.md)."""

COLD_SLACK = 0.02
"""A cold run is INVALID when its hits exceed the forecast's ceiling by more than this share of
the queried tokens (room for a server that tokenizes a little differently)."""
WARM_SHARE = 0.5
"""A warm run is INVALID when it hit less than this share of what its warm-up should have
cached: the cache evicted it, or the server does not cache prefixes."""


@dataclass(frozen=True)
class CacheCounters:
    """vLLM's prefix-cache counters, in prompt tokens (cumulative, or the difference of two
    readings)."""

    queries: float
    hits: float

    def minus(self, before: CacheCounters) -> CacheCounters:
        return CacheCounters(self.queries - before.queries, self.hits - before.hits)

    def plus(self, other: CacheCounters) -> CacheCounters:
        return CacheCounters(self.queries + other.queries, self.hits + other.hits)

    @property
    def hit_rate(self) -> float | None:
        """Hits per queried token; None when nothing was queried (caching off)."""
        return self.hits / self.queries if self.queries > 0 else None


@dataclass(frozen=True)
class PromptBlocks:
    """One prompt as the prefix cache sees it: its token count and the chained hashes of its
    full blocks (a block's hash covers every token before it, as vLLM's does)."""

    tokens: int
    block_size: int
    hashes: tuple[int, ...]

    @property
    def usable(self) -> int:
        """Blocks a hit can cover: vLLM always computes the prompt's last token."""
        return min(len(self.hashes), max(self.tokens - 1, 0) // self.block_size)

    def leading(self, cached: Callable[[int], bool]) -> int:
        """Tokens of the longest run of leading blocks for which ``cached`` holds."""
        n = 0
        for h in self.hashes[: self.usable]:
            if not cached(h):
                break
            n += 1
        return n * self.block_size


def prompt_blocks(ids: Sequence[int], block_size: int, server: str = "") -> PromptBlocks:
    """``ids`` cut into full blocks of ``block_size``; ``server`` keeps the blocks of two
    servers apart (a prompt sent to one cannot hit the other's cache)."""
    if block_size < 1:
        raise ValueError(f"block_size {block_size}: must be >= 1")
    parent = hash(("prefix-cache", server, block_size))
    hashes = []
    for start in range(0, len(ids) - block_size + 1, block_size):
        parent = hash((parent, tuple(ids[start : start + block_size])))
        hashes.append(parent)
    return PromptBlocks(len(ids), block_size, tuple(hashes))


@dataclass(frozen=True)
class CacheForecast:
    """What the measured prompts can hit, from their token ids alone."""

    block_sizes: tuple[int, ...]
    prompt_tokens: int
    """Tokens of the measured prompts, as the server counts them."""
    cold_ceiling: int
    """Most tokens they can hit when the cache is empty before the first of them: each
    request's leading blocks that another measured request shares, in any send order."""
    warm_floor: int
    """Tokens they hit on blocks the warm-up cached, when nothing is evicted."""

    def share(self, tokens: int) -> float:
        return tokens / self.prompt_tokens if self.prompt_tokens else 0.0


def forecast(warmup: Sequence[PromptBlocks], measured: Sequence[PromptBlocks]) -> CacheForecast:
    """The ceiling of a cold window and the floor of a warm one."""
    # A request's chained hashes are distinct, so this counts the requests holding each block.
    holders = Counter(h for p in measured for h in p.hashes)
    warm = {h for p in warmup for h in p.hashes}
    return CacheForecast(
        block_sizes=tuple(sorted({p.block_size for p in (*warmup, *measured)})),
        prompt_tokens=sum(p.tokens for p in measured),
        cold_ceiling=sum(p.leading(lambda h: holders[h] >= 2) for p in measured),
        warm_floor=sum(p.leading(warm.__contains__) for p in measured),
    )


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.1%}"


@dataclass(frozen=True)
class PrefixCacheRun:
    """One run's prefix cache: what was declared, done and measured."""

    mode: PrefixCacheMode
    counters: CacheCounters | None
    """Over the measured requests (all instances); None when /metrics could not say."""
    forecast: CacheForecast | None
    """None when the block size was unknown (no vLLM /metrics)."""
    reset: str = ""
    """What the suite did to the cache, e.g. "reset before the measured requests"."""
    unmeasured: str = ""
    """Why there are no counters or no forecast."""

    @property
    def hit_rate(self) -> float | None:
        return None if self.counters is None else self.counters.hit_rate

    def contradiction(self) -> str | None:
        """The INVALID reason when the measured hits contradict the declared mode, else None
        (also when there is nothing to compare: the report says why)."""
        c, f = self.counters, self.forecast
        if c is None:
            return None
        measured = f"{c.hits:.0f} of {c.queries:.0f} prompt tokens ({_pct(c.hit_rate)})"
        if self.mode == "off":
            if c.hits > 0:
                return (
                    f'prefix cache declared "off", but vLLM served {measured} from it: start '
                    "the server with enable_prefix_caching = false, or declare "
                    'prefix_cache = "cold"'
                )
            return None
        if f is None:
            return None
        if self.mode == "cold" and c.hits > f.cold_ceiling + COLD_SLACK * c.queries:
            return (
                f'prefix cache declared "cold", but {measured} hit it, more than the '
                f"{_pct(f.share(f.cold_ceiling))} the measured prompts share among themselves: "
                "the cache held them from earlier traffic (same seed again without a reset?); "
                "let the suite reset it (VLLM_SERVER_DEV_MODE=1 serves POST "
                "/reset_prefix_cache), change [workload] seed, or declare "
                'prefix_cache = "warm"'
            )
        if self.mode == "warm" and f.warm_floor > 0 and c.hits < WARM_SHARE * f.warm_floor:
            return (
                f'prefix cache declared "warm", but only {measured} hit it, under half of '
                f"the {_pct(f.share(f.warm_floor))} the warm-up cached: the cache evicted "
                "them (too little KV cache) or the server does not cache prefixes "
                "(enable_prefix_caching)"
            )
        return None

    def describe(self) -> str:
        """One line for the reports."""
        head = f"prefix cache {self.mode}" + (f" ({self.reset})" if self.reset else "")
        if self.counters is None:
            return f"{head}; hit rate not measured: {self.unmeasured or 'no counters'}"
        c = self.counters
        line = f"{head}; hit rate {_pct(c.hit_rate)} ({c.hits:.0f} of {c.queries:.0f} tokens)"
        if c.queries == 0:
            line += ": vLLM queried no prefix (caching off)"
        f = self.forecast
        if f is not None:
            line += (
                f"; the prompts allow at most {_pct(f.share(f.cold_ceiling))} cold, "
                f"{_pct(f.share(f.warm_floor))} from the warm-up"
            )
        elif self.unmeasured:
            line += f"; no forecast: {self.unmeasured}"
        return line

    def properties(self) -> dict[str, str]:
        """Flat ``prefix_cache.*`` entries for JUnit properties; a figure not measured is
        absent (the ``prefix_cache`` line says why)."""
        props: dict[str, str] = {"prefix_cache.mode": self.mode}
        if self.counters is not None:
            props["prefix_cache.queries"] = f"{self.counters.queries:.0f}"
            props["prefix_cache.hits"] = f"{self.counters.hits:.0f}"
            if self.hit_rate is not None:
                props["prefix_cache.hit_rate"] = f"{self.hit_rate:.4f}"
        if self.forecast is not None:
            f = self.forecast
            props["prefix_cache.cold_ceiling"] = f"{f.share(f.cold_ceiling):.4f}"
            props["prefix_cache.warm_floor"] = f"{f.share(f.warm_floor):.4f}"
        props["prefix_cache"] = self.describe()
        return props

    def as_dict(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "hit_rate": self.hit_rate,
            "queries": None if self.counters is None else self.counters.queries,
            "hits": None if self.counters is None else self.counters.hits,
            "forecast": None if self.forecast is None else asdict(self.forecast),
            "reset": self.reset,
            "unmeasured": self.unmeasured,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> PrefixCacheRun:
        """The inverse of ``as_dict`` (a stored summary.json); ValueError on a bad field."""
        mode = d.get("mode")
        if mode not in PREFIX_CACHE_MODES:
            raise ValueError(f"prefix_cache.mode {mode!r}: expected one of {PREFIX_CACHE_MODES}")
        counters = None
        if d.get("queries") is not None and d.get("hits") is not None:
            counters = CacheCounters(float(d["queries"]), float(d["hits"]))
        f = d.get("forecast")
        fc = None
        if isinstance(f, Mapping):
            fc = CacheForecast(
                tuple(int(b) for b in f["block_sizes"]),
                int(f["prompt_tokens"]),
                int(f["cold_ceiling"]),
                int(f["warm_floor"]),
            )
        return cls(mode, counters, fc, str(d.get("reset", "")), str(d.get("unmeasured", "")))
