"""Release against release: a three-way verdict on the ratio of one statistic between two arms.

Interleaved A/B (duet benchmarking, Bulej et al., ICPE 2020): the identical request list is cut
into k blocks and each block is sent to both arms in turn (A then B, then B then A, ...). Each
block pair is one independent replication (Law & Kelton): ``d_j = log(stat_B_j / stat_A_j)``.
The t-interval over the k differences holds within-block sampling error, serial correlation
inside a block and machine drift from block to block without modelling any of them, since all
three only add to the spread of the d_j. A per-block p99 of a small block is biased low, but
equally in both arms, so the ratio is fair.

The verdict against a margin m (e.g. 10%) on the ratio B/A, for a lower-is-better statistic:
REGRESSION if the whole interval lies above 1+m, IMPROVEMENT if wholly below 1-m, NO CHANGE if
wholly inside (1-m, 1+m) (equivalence, two one-sided tests), INCONCLUSIVE otherwise. With a
two-sided interval at level c each of these claims is wrong at most (1-c)/2 of the time.

Error rates are counts, often 0 in a block: they are compared pooled over all blocks, with the
exact conditional binomial test on the two arms' error totals, so a baseline with no error at
all can still show a regression.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats as sps

from slo.errors import SuiteError


class Change(enum.Enum):
    REGRESSION = "REGRESSION"
    NO_CHANGE = "NO CHANGE"
    IMPROVEMENT = "IMPROVEMENT"
    INCONCLUSIVE = "INCONCLUSIVE"


@dataclass(frozen=True)
class Comparison:
    """One statistic of the candidate (B) against the baseline (A)."""

    name: str
    """E.g. ``ttft p99`` or ``error_rate``."""
    lower_is_better: bool
    baseline: float
    """The baseline's figure (geometric mean of its block statistics, or its run estimate)."""
    candidate: float
    ratio: float
    """Candidate / baseline, the point estimate."""
    lower: float
    """Bounds of the ratio's interval."""
    upper: float
    confidence: float
    margin: float
    change: Change
    method: str
    """How the interval was made, in words, e.g. ``8 interleaved block pairs``."""
    n_blocks: int = 0
    note: str = ""
    """Why INCONCLUSIVE, or what the interval cannot see."""
    sd_log: float = math.nan
    """Standard deviation of the per-pair log ratios (planning input); nan without blocks."""

    @property
    def worse_is_higher_ratio(self) -> bool:
        return self.lower_is_better

    def describe(self) -> str:
        """``ttft p99: x1.24 [1.12, 1.37] (+24%), REGRESSION past 10% (8 block pairs, 95%)``."""
        text = (
            f"{self.name}: candidate/baseline x{self.ratio:.3g} [{self.lower:.3g}, "
            f"{self.upper:.3g}] ({percent_change(self.ratio)} [{percent_change(self.lower)}, "
            f"{percent_change(self.upper)}]), {self.change.value} at margin {self.margin:.0%} "
            f"({self.method}; {self.confidence:.4g} interval)"
        )
        if self.note:
            text += f": {self.note}"
        return text

    def as_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "lower_is_better": self.lower_is_better,
            "baseline": self.baseline,
            "candidate": self.candidate,
            "ratio": self.ratio,
            "ratio_lower": self.lower,
            "ratio_upper": self.upper,
            "confidence": self.confidence,
            "margin": self.margin,
            "change": self.change.value,
            "method": self.method,
            "n_blocks": self.n_blocks,
            "note": self.note,
            "sd_log": None if math.isnan(self.sd_log) else self.sd_log,
            "message": self.describe(),
        }


def percent_change(ratio: float) -> str:
    """x1.24 -> ``+24%``; x0.32 -> ``-68%``."""
    if not math.isfinite(ratio):
        return "+inf%" if ratio > 0 else "n/a"
    return f"{(ratio - 1) * 100:+.0f}%"


def classify(lower: float, upper: float, margin: float, lower_is_better: bool) -> Change:
    """The three-way decision of a ratio interval against the margin."""
    if math.isnan(lower) or math.isnan(upper):
        return Change.INCONCLUSIVE
    hi_edge, lo_edge = 1 + margin, 1 - margin
    if lower > hi_edge:
        return Change.REGRESSION if lower_is_better else Change.IMPROVEMENT
    if upper < lo_edge:
        return Change.IMPROVEMENT if lower_is_better else Change.REGRESSION
    if lower > lo_edge and upper < hi_edge:
        return Change.NO_CHANGE
    return Change.INCONCLUSIVE


def statistic_of(values: Sequence[float], statistic: str) -> float:
    """``p99``, ``p50``, ``mean`` or ``max`` of per-request samples (failed requests: +inf)."""
    a = np.asarray(values, dtype=float)
    if a.size == 0:
        return math.nan
    if statistic == "mean":
        return float(a.mean())
    if statistic == "max":
        return float(a.max())
    if statistic.startswith("p") and statistic[1:].isdigit():
        q = float(statistic[1:])
        if np.isinf(a).any():
            # Interpolating towards +inf must give +inf, never nan (inf * 0).
            a = np.sort(a)
            pos = (a.size - 1) * q / 100
            lo, hi = a[math.floor(pos)], a[math.ceil(pos)]
            return float(lo if pos == math.floor(pos) or lo == hi else (hi if np.isinf(hi) else lo))
        return float(np.percentile(a, q))
    raise SuiteError(f"statistic {statistic!r}: expected p<N>, mean or max")


def compare_blocks(
    name: str,
    baseline: Sequence[float],
    candidate: Sequence[float],
    *,
    lower_is_better: bool,
    margin: float,
    confidence: float,
) -> Comparison:
    """Paired block statistics (baseline[j] and candidate[j] came from block pair j)."""
    a = np.asarray(baseline, dtype=float)
    b = np.asarray(candidate, dtype=float)
    if a.shape != b.shape:
        raise SuiteError(f"{name}: {a.size} baseline blocks but {b.size} candidate blocks")
    k = int(a.size)
    method = f"{k} interleaved block pairs"
    base_fig, cand_fig = _geomean(a), _geomean(b)

    def undecided(note: str) -> Comparison:
        ratio = cand_fig / base_fig if base_fig > 0 else math.nan
        return Comparison(
            name, lower_is_better, base_fig, cand_fig, ratio, math.nan, math.nan,
            confidence, margin, Change.INCONCLUSIVE, method, k, note,
        )  # fmt: skip

    if k < 2:
        return undecided(f"{k} block pair(s): an interval needs at least 2")
    if not (np.isfinite(a).all() and np.isfinite(b).all()):
        return undecided(
            "a block statistic is infinite (failed requests count as infinitely slow): "
            "see the error-rate comparison"
        )
    if (a <= 0).any() or (b <= 0).any():
        return undecided("a block statistic is 0, so its log ratio has no value")
    centre, lo_a, hi_a, sd_a = log_ratio_interval(np.log(b) - np.log(a), confidence)
    sd, lo, hi = float(sd_a), math.exp(float(lo_a)), math.exp(float(hi_a))
    return Comparison(
        name,
        lower_is_better,
        base_fig,
        cand_fig,
        math.exp(float(centre)),
        lo,
        hi,
        confidence,
        margin,
        classify(lo, hi, margin, lower_is_better),
        method,
        k,
        "",
        sd,
    )


def log_ratio_interval(
    d: np.ndarray, confidence: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(mean, lower, upper, sd) of the log ratios ``d`` over the last axis (the k pairs): the
    t-interval. Vectorised over leading axes, so simulations judge many runs at once."""
    k = d.shape[-1]
    mean = d.mean(axis=-1)
    sd = d.std(axis=-1, ddof=1)
    half = float(sps.t.ppf(0.5 + confidence / 2, k - 1)) * sd / math.sqrt(k)
    return mean, mean - half, mean + half, sd


def classify_array(
    lower: np.ndarray, upper: np.ndarray, margin: float, lower_is_better: bool
) -> np.ndarray:
    """``classify`` over arrays of ratio bounds: an array of ``Change`` values' strings."""
    hi_edge, lo_edge = 1 + margin, 1 - margin
    worse, better = (Change.REGRESSION, Change.IMPROVEMENT)[:: 1 if lower_is_better else -1]
    out = np.full(np.shape(lower), Change.INCONCLUSIVE.value, dtype=object)
    out[(lower > lo_edge) & (upper < hi_edge)] = Change.NO_CHANGE.value
    out[lower > hi_edge] = worse.value
    out[upper < lo_edge] = better.value
    return out


def _geomean(a: np.ndarray) -> float:
    if a.size == 0 or not np.isfinite(a).all() or (a <= 0).any():
        return float(np.mean(a)) if a.size else math.nan
    return float(np.exp(np.log(a).mean()))


def compare_counts(
    name: str,
    baseline_events: int,
    baseline_n: int,
    candidate_events: int,
    candidate_n: int,
    *,
    margin: float,
    confidence: float,
) -> Comparison:
    """Rate of an event (a failed request) per request, lower is better, pooled over all blocks.

    Given the total events e, the candidate's share is binomial with p = n_B r / (n_A + n_B r)
    for the rate ratio r: the exact (Clopper-Pearson) interval for p gives one for r. With no
    event in the baseline and several in the candidate the lower bound is still above 1.
    """
    ea, na, eb, nb = baseline_events, baseline_n, candidate_events, candidate_n
    ra = ea / na if na else math.nan
    rb = eb / nb if nb else math.nan
    method = f"pooled counts, exact conditional binomial ({ea}/{na} against {eb}/{nb})"
    if na == 0 or nb == 0:
        return Comparison(
            name, True, ra, rb, math.nan, math.nan, math.nan, confidence, margin,
            Change.INCONCLUSIVE, method, 0, "an arm sent no request",
        )  # fmt: skip
    e = ea + eb
    if e == 0:
        # Nothing failed on either side: no ratio to estimate, and no sign of a change; the
        # rates themselves are below about 3.7/n each at 95%.
        bound = float(sps.beta.ppf(0.5 + confidence / 2, 1, max(na, nb)))
        return Comparison(
            name, True, 0.0, 0.0, 1.0, 0.0, math.inf, confidence, margin, Change.NO_CHANGE,
            method, 0, f"no request failed in either arm (each rate below {bound:.2%})",
        )  # fmt: skip
    ci = sps.binomtest(eb, e).proportion_ci(confidence, method="exact")

    def to_ratio(p: float) -> float:
        if p >= 1:
            return math.inf
        return (p / (1 - p)) * (na / nb)

    lo, hi = to_ratio(float(ci.low)), to_ratio(float(ci.high))
    point = to_ratio(eb / e)
    return Comparison(
        name, True, ra, rb, point, lo, hi, confidence, margin,
        classify(lo, hi, margin, True), method, 0,
    )  # fmt: skip


def compare_intervals(
    name: str,
    baseline: tuple[float, float, float],
    candidate: tuple[float, float, float],
    *,
    baseline_confidence: float,
    candidate_confidence: float,
    lower_is_better: bool,
    margin: float,
    confidence: float,
) -> Comparison:
    """Two separate runs, each with its own (lower, estimate, upper): their log-scale standard
    errors are read off the intervals and added in quadrature.

    Two runs measured apart cannot tell drift of the machine from a change of the release: the
    interval holds each run's sampling error only, not the run-to-run spread (5-12% on the CPU
    machine), so a NO CHANGE or REGRESSION here is weaker than one from interleaved blocks.
    """
    (a_lo, a, a_hi), (b_lo, b, b_hi) = baseline, candidate
    method = "two runs' own intervals combined on the log scale"
    note = "a baseline from another run cannot tell drift of the machine from a change"

    def undecided(why: str) -> Comparison:
        ratio = b / a if a > 0 and math.isfinite(a) and math.isfinite(b) else math.nan
        return Comparison(
            name, lower_is_better, a, b, ratio, math.nan, math.nan, confidence, margin,
            Change.INCONCLUSIVE, method, 0, f"{why}; {note}",
        )  # fmt: skip

    values = (a_lo, a, a_hi, b_lo, b, b_hi)
    if not all(math.isfinite(v) and v > 0 for v in values):
        return undecided("an estimate or bound is 0 or infinite, so no log-scale interval")
    if a_lo == a_hi or b_lo == b_hi:
        return undecided("one run gave this statistic no interval (one number per run)")
    se_a = _se_log(a_lo, a_hi, baseline_confidence)
    se_b = _se_log(b_lo, b_hi, candidate_confidence)
    se = math.hypot(se_a, se_b)
    z = float(sps.norm.ppf(0.5 + confidence / 2))
    centre = math.log(b / a)
    lo, hi = math.exp(centre - z * se), math.exp(centre + z * se)
    return Comparison(
        name, lower_is_better, a, b, b / a, lo, hi, confidence, margin,
        classify(lo, hi, margin, lower_is_better), method, 0, note,
    )  # fmt: skip


def _se_log(lower: float, upper: float, confidence: float) -> float:
    """A log-scale standard error from a two-sided interval (asymmetric ones are averaged)."""
    z = float(sps.norm.ppf(0.5 + confidence / 2))
    return (math.log(upper) - math.log(lower)) / (2 * z)


# --- sequential A/B ---------------------------------------------------------------------------


@dataclass(frozen=True)
class SequentialPlan:
    """Looks after ``min_blocks`` pairs, then every ``every`` pairs, and at ``max_blocks``. The
    error is split evenly over the looks (Bonferroni, a Pocock-like constant spending): each
    look uses ``look_confidence``, so the chance of any wrong decision over all looks stays
    within 1 - confidence (checked by simulation in benchmarks/ab_compare.py). Fewer looks
    cost less power: a look every pair splits the error finest."""

    min_blocks: int
    max_blocks: int
    confidence: float
    every: int = 1

    def __post_init__(self) -> None:
        if not 2 <= self.min_blocks <= self.max_blocks or self.every < 1:
            raise SuiteError(
                f"sequential A/B: min_blocks {self.min_blocks}, max_blocks {self.max_blocks}: "
                f"every {self.every}: need 2 <= min_blocks <= max_blocks and every >= 1"
            )

    def is_look(self, k: int) -> bool:
        return k == self.max_blocks or (
            k >= self.min_blocks and (k - self.min_blocks) % self.every == 0
        )

    @property
    def looks(self) -> int:
        return sum(self.is_look(k) for k in range(1, self.max_blocks + 1))

    @property
    def look_confidence(self) -> float:
        return 1 - (1 - self.confidence) / self.looks

    def confidence_at(self, k: int) -> float:
        """The level a look after k pairs uses; the last look of a fixed run uses the plain
        level when there is only one look."""
        return self.confidence if self.looks == 1 else self.look_confidence

    def should_stop(self, decided: Sequence[Comparison], k: int) -> bool:
        """Stop when every comparison is decided (not INCONCLUSIVE), or at the last block."""
        if k >= self.max_blocks:
            return True
        if not self.is_look(k):
            return False
        return all(c.change is not Change.INCONCLUSIVE for c in decided)


# --- planning ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Cost:
    """Requests per arm a margin needs at a given power."""

    blocks: int
    block_size: int
    margin: float
    power: float

    @property
    def requests_per_arm(self) -> int:
        return self.blocks * self.block_size

    def describe(self) -> str:
        return (
            f"detecting a {self.margin:.0%} change at {self.power:.0%} power needs about "
            f"{self.blocks} block pairs of {self.block_size} requests = "
            f"{self.requests_per_arm} requests per arm"
        )


def blocks_needed(
    sd_log: float,
    margin: float,
    *,
    confidence: float = 0.95,
    power: float = 0.80,
    max_blocks: int = 10_000,
) -> int:
    """Block pairs whose t-interval excludes 1 +- margin with the given power when the true
    change is the margin, from the per-pair log-ratio spread ``sd_log`` of a pilot run.

    One-sided at (1 - confidence) / 2, as the verdicts use it; the t quantiles are solved for k
    by iteration (Jennison & Turnbull's fixed-sample size with the t correction).
    """
    if not (sd_log > 0 and margin > 0):
        return 2
    delta = math.log(1 + margin)
    alpha = (1 - confidence) / 2
    k = 2
    for _ in range(100):
        t_a = float(sps.t.ppf(1 - alpha, k - 1))
        t_b = float(sps.t.ppf(power, k - 1))
        need = max(2, math.ceil(((t_a + t_b) * sd_log / delta) ** 2))
        if need == k:
            break
        k = min(need, max_blocks)
    return k


def cost_from_pilot(
    sd_log: float,
    block_size: int,
    margin: float,
    *,
    confidence: float = 0.95,
    power: float = 0.80,
) -> Cost:
    """The cost line the sign-off prints, from a run's own block-to-block spread."""
    k = blocks_needed(sd_log, margin, confidence=confidence, power=power)
    return Cost(k, block_size, margin, power)


def requests_per_arm_quantile(
    sigma: float, q: float, margin: float, *, alpha: float = 0.05, power: float = 0.80
) -> int:
    """Sampling error alone, independent lognormal latencies of log-sd ``sigma``: requests per
    arm that detect a ``margin`` change of the q-quantile at ``power`` (one-sided ``alpha``).

    The asymptotic variance of log x_q is sigma^2 q(1-q) / (n phi(z_q)^2); the two arms add.
    Serial correlation multiplies it (by 2-5x at the lag-1 correlations of real serving), which
    is why the suite plans from a pilot's blocks (``cost_from_pilot``) rather than this.
    """
    z_q = float(sps.norm.ppf(q))
    var1 = sigma**2 * q * (1 - q) / float(sps.norm.pdf(z_q)) ** 2
    z = float(sps.norm.ppf(1 - alpha) + sps.norm.ppf(power))
    return math.ceil(2 * var1 * (z / math.log(1 + margin)) ** 2)
