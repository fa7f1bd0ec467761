"""vLLM's prefix cache and its /metrics in miniature, for the fault injector (injector.py).

A prompt seen since the last reset is a hit of all its tokens (words, as the injector counts
them); a new one a miss. That is enough to replay the case that matters: the same seed sent
twice to a long-running server is served from its cache, unless the cache was reset between.
The /metrics page is written by prometheus_client under vLLM's metric names, as vLLM's is.
"""

from __future__ import annotations

import json
import threading

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest


class PromptCache:
    def __init__(
        self, *, block_size: int = 16, reset_served: bool = True, caching: bool = True
    ) -> None:
        self.block_size = block_size
        self.reset_served = reset_served
        """False: POST /reset_prefix_cache answers 404 (vLLM without VLLM_SERVER_DEV_MODE)."""
        self.caching = caching
        """False: no lookups and no hits (enable_prefix_caching = false)."""
        self.queries = 0
        self.hits = 0
        self.resets = 0
        self._seen: set[str] = set()
        self._lock = threading.Lock()

    def prompt(self, text: str) -> None:
        """A request's prompt reached the engine."""
        if not self.caching:
            return
        n = len(text.split())
        with self._lock:
            self.queries += n
            self.hits += n if text in self._seen else 0
            self._seen.add(text)

    def route(self, method: str, path: str) -> tuple[int, str, bytes] | None:
        """(status, content type, body) for the cache's own routes; None for any other."""
        if (method, path) == ("GET", "/metrics"):
            return 200, "text/plain; version=0.0.4", self.metrics()
        if (method, path) == ("POST", "/reset_prefix_cache"):
            if not self.reset_served:
                return 404, "application/json", b'{"detail": "Not Found"}'
            with self._lock:
                self._seen.clear()
                self.resets += 1
            return 200, "application/json", json.dumps({"success": True}).encode()
        return None

    def metrics(self) -> bytes:
        registry = CollectorRegistry()
        labels = {"model_name": "m", "engine": "0"}
        ttft = Histogram(
            "vllm:time_to_first_token_seconds", "TTFT", list(labels), registry=registry
        )
        ttft.labels(**labels)
        for name, value in (("queries", self.queries), ("hits", self.hits)):
            c = Counter(f"vllm:prefix_cache_{name}", name, list(labels), registry=registry)
            c.labels(**labels).inc(value)
        config = {
            "block_size": str(self.block_size),
            "enable_prefix_caching": str(self.caching),
            "engine": "0",
        }
        info = Gauge("vllm:cache_config_info", "cache config", list(config), registry=registry)
        info.labels(**config).set(1)
        return generate_latest(registry)
