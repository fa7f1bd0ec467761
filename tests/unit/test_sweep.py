"""Sweep grid, TTFT-throughput frontier (Pareto set) and the best config meeting the SLO."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from slo.sweep import SweepPoint, SweepReport, best, frontier, grid, point_label


def pt(seqs: int, ttft: float, tput: float, ok: bool = True) -> SweepPoint:
    return SweepPoint((("max_num_seqs", seqs),), ttft, tput, ok)


def test_grid_is_every_combination_first_arg_slowest() -> None:
    assert grid({"max_num_seqs": [8, 32], "max_num_batched_tokens": [2048, 8192]}) == [
        {"max_num_seqs": 8, "max_num_batched_tokens": 2048},
        {"max_num_seqs": 8, "max_num_batched_tokens": 8192},
        {"max_num_seqs": 32, "max_num_batched_tokens": 2048},
        {"max_num_seqs": 32, "max_num_batched_tokens": 8192},
    ]
    assert grid({}) == [{}]
    assert point_label({"max_num_seqs": 8, "max_num_batched_tokens": 2048}) == (
        "max_num_seqs-8.max_num_batched_tokens-2048"
    )


def test_frontier_drops_dominated_points_and_sorts_by_ttft() -> None:
    a, b, c, d = pt(8, 0.1, 500), pt(32, 0.3, 900), pt(64, 0.4, 800), pt(128, 0.5, 1200)
    # c is beaten by b on both axes; the rest trade TTFT for throughput.
    assert frontier([d, c, b, a]) == [a, b, d]
    tie = pt(16, 0.1, 500)
    assert frontier([a, tie]) == [a, tie]  # equal points: neither dominates


def test_best_is_most_throughput_among_points_meeting_the_slo() -> None:
    fast_miss = pt(128, 0.9, 2000, ok=False)
    ok_low, ok_high = pt(8, 0.1, 500), pt(32, 0.3, 900)
    assert best([fast_miss, ok_low, ok_high]) == ok_high
    assert best([fast_miss]) is None
    # Ties on throughput go to the lower TTFT.
    assert best([pt(8, 0.2, 900), ok_high]) == pt(8, 0.2, 900)


@given(
    st.lists(
        st.tuples(
            st.floats(0, 10, allow_nan=False), st.floats(0, 1e4, allow_nan=False), st.booleans()
        ),
        min_size=1,
        max_size=12,
    )
)
def test_frontier_properties(raw: list[tuple[float, float, bool]]) -> None:
    points = [pt(i, t, x, ok) for i, (t, x, ok) in enumerate(raw)]
    front = frontier(points)
    assert front, "a non-empty set always has a non-dominated point"
    for p in points:
        assert (p in front) == (not any(q.dominates(p) for q in points))
    # The lowest TTFT and the highest throughput are always on the frontier (some point with them).
    assert min(p.ttft_s for p in front) == min(p.ttft_s for p in points)
    assert max(p.output_throughput for p in front) == max(p.output_throughput for p in points)
    b = best(points)
    if b is not None:
        assert b.meets_slo
        assert b.output_throughput == max(p.output_throughput for p in points if p.meets_slo)


def test_report_table_marks_frontier_and_best() -> None:
    r = SweepReport(
        "burst",
        "ttft p50",
        "all requests",
        (
            SweepPoint((("max_num_seqs", 8),), 1.5, 400, False, 1.5, 3.0, ("ttft p50: FAIL",)),
            SweepPoint((("max_num_seqs", 32),), 0.6, 900, True, 0.6, 1.0),
            SweepPoint((("max_num_seqs", 128),), math.inf, 0.0, False),
        ),
    )
    md = r.to_markdown()
    assert "| max_num_seqs | TTFT p50 | TTFT p99 | output tok/s | SLO |  |" in md
    assert "| 32 | 600 ms | 1000 ms | 900 | meets | best, frontier |" in md
    assert "| 8 | 1500 ms | 3000 ms | 400 | misses: ttft p50: FAIL |  |" in md
    assert "| 128 | n/a | n/a | 0 |" in md
    p90 = SweepReport("mixed", "ttft p90 class=realtime", "class=batch", r.points).to_markdown()
    assert "| max_num_seqs | ttft p90 class=realtime | TTFT p50 | TTFT p99 |" in p90
    assert "| 128 | inf | n/a | n/a | 0 |" in p90
    assert "Best config meeting the SLO: max_num_seqs-32" in md
    d = r.as_dict()
    assert d["best"] == "max_num_seqs-32" and d["frontier"] == ["max_num_seqs-32"]
