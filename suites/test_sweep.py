"""Engine-arg sweep: each scenario with a ``[sweep]`` table runs its load once per combination of
the swept engine args, and reports the TTFT-throughput frontier and the best config that meets the
scenario's objectives (``<run>/sweeps/<scenario>.json`` and ``.md``, and printed).

Opt-in: it starts one server per point, so it runs only when asked for with ``-m sweep``.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from fixtures.selection import select
from fixtures.session import ScenarioRunner
from fixtures.settings import Settings
from reports.files import write_atomic, write_json
from slo.scenario import bundled_scenarios, load_scenario, objective_name
from slo.stats import safe_percentile, summarize
from slo.sweep import SweepPoint, SweepReport, grid, point_label
from slo.verdict import Outcome

pytestmark = pytest.mark.sweep

SWEPT = [name for name in bundled_scenarios() if load_scenario(name).sweep]


@pytest.fixture(autouse=True)
def _opt_in(request: pytest.FixtureRequest) -> None:
    if "sweep" not in (request.config.option.markexpr or ""):
        pytest.skip("a sweep starts one server per point: run it with -m sweep")


@pytest.mark.parametrize("scenario_name", SWEPT)
def test_sweep(
    scenario_name: str,
    slo_settings: Settings,
    scenario_runner: ScenarioRunner,
    record_property: Callable[[str, object], None],
    capsys: pytest.CaptureFixture[str],
) -> None:
    base = select(scenario_name, slo_settings)
    # The frontier is drawn on the scenario's own TTFT objective and throughput objective.
    ttft_obj = next((o for o in base.objectives if o.metric == "ttft" and o.quantile), None)
    q = ttft_obj.quantile if ttft_obj and ttft_obj.quantile else 0.99
    ttft_class = ttft_obj.request_class if ttft_obj else None
    tput_class = next(
        (o.request_class for o in base.objectives if o.metric == "output_throughput"), None
    )
    points = []
    for args in grid(base.scenario.sweep):
        sel = base.with_engine_args("sweep." + point_label(args), **args)
        result = scenario_runner.result(sel)
        scenario_runner.release(sel)  # one server at a time
        verdicts = [result.judge(o) for o in base.objectives]
        ttft = summarize(result.records, request_class=ttft_class).ttft
        points.append(
            SweepPoint(
                args=tuple(args.items()),
                ttft_s=safe_percentile(ttft, q * 100),
                output_throughput=summarize(
                    result.records, request_class=tput_class
                ).output_throughput,
                meets_slo=all(v.outcome is Outcome.PASS for v in verdicts),
                ttft_p50_s=safe_percentile(ttft, 50),
                ttft_p99_s=safe_percentile(ttft, 99),
                misses=tuple(
                    f"{v.objective.name}: {v.outcome.name}"
                    for v in verdicts
                    if v.outcome is not Outcome.PASS
                ),
            )
        )
    report = SweepReport(
        scenario=scenario_name,
        ttft_statistic=objective_name("ttft", f"p{round(q * 100)}", ttft_class),
        throughput_of=f"class={tput_class}" if tput_class else "all requests",
        points=tuple(points),
    )
    folder = slo_settings.run_dir / "sweeps"
    write_json(folder / f"{scenario_name}.json", report.as_dict())
    write_atomic(folder / f"{scenario_name}.md", report.to_markdown().encode())
    with capsys.disabled():
        print("\n" + report.to_markdown())
    best = report.best
    record_property("sweep.best", best.label if best else None)
    record_property("sweep.frontier", [p.label for p in report.frontier])
    # Every point ran the whole load: a point with no successful request is a broken run.
    broken = [p.label for p in points if p.output_throughput <= 0]
    assert not broken, f"sweep points with no completed request: {broken}"
