"""The cost of a run before it runs: steps, records and memory against closed forms, the memory
limit, the question above an hour, and progress lines when output is not a terminal."""

from __future__ import annotations

import math
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

import pathflow
from helpers import TINY_TOML, star
from pathflow import cost
from pathflow.batch import CHUNK_BYTES, chunks, compile_together
from pathflow.cli import app
from pathflow.compile import compile_scenario
from pathflow.scenario import ScenarioError
from pathflow.sweeps import sweep
from pathflow.units import parse_time

runner = CliRunner()
ITEM = 8  # float64
# 2 senders, 1 Gb/s, 10 us per link, 100-packet buffers, dt = 2 us, a record every 100 us, 20 ms
GRID = {"dt": "2us", "sample": "100us"}


def small(**run: str):  # type: ignore[no-untyped-def]
    return star(2, rate="1Gbps", delay="10us", buffer="100pkt", duration="20ms",
                run={**GRID, **run})


def lines(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.strip()]


def test_steps_records_and_memory_follow_the_closed_forms() -> None:
    scenario = small()
    compiled = compile_scenario(scenario)
    estimate = cost.estimate(compiled)
    steps = math.ceil(20e-3 / 2e-6)  # duration / dt
    per_record = round(100e-6 / 2e-6)
    records = math.ceil(steps / per_record)
    assert (estimate.steps, estimate.records) == (steps, records) == (10_000, 200)
    assert estimate.dt == pytest.approx(2e-6)
    assert estimate.sample_interval == pytest.approx(100e-6)

    # the longest round trip: both hops out and back (2 x 10 us, a 1500-byte packet out, a
    # 64-byte ACK back, at 1 Gb/s) plus the switch port's full 100-packet buffer
    rate = 1e9 / 8
    largest = 2 * (2 * 10e-6 + 1500 / rate + 64 / rate) + 100 * 1500 / rate
    history = math.ceil(largest / 2e-6) + 3
    assert estimate.history == history
    # 2 controllers, 4 float32 values each (stamp, mark, loss, rate)
    assert estimate.history_bytes == history * 2 * 4 * 4

    # recorded: 7 series per link (6 links + the padding link), 4 per controller plus its state,
    # the state counted with the 3 series of the retransmission timer (as the Dataset has them),
    # kept three times by the solver; the state variables are the Dataset's per-subflow series
    # beyond the rate and RTT
    ds = pathflow.simulate(scenario)
    assert ds.sizes["time"] == estimate.records
    state = sum(1 for name in ds.data_vars if ds[name].dims == ("time", "subflow")) - 2
    assert state >= 2  # the window and at least one more (DCTCP's alpha)
    recorded = records * (7 * 7 + 2 * (4 + state)) * ITEM
    assert estimate.record_bytes == 3 * recorded
    # the labelled result is about one copy of the recorded values (a few derived series more)
    assert 0.7 < ds.nbytes / recorded < 2.0
    assert estimate.memory == pytest.approx(
        estimate.record_bytes + estimate.history_bytes + estimate.other_bytes)
    # the runtime, and a few kilobytes of problem arrays and XLA temporaries: no series of
    # merged flows (each flow is a controller) and no ring re-filed (the step is fixed)
    assert 0 < estimate.other_bytes - cost._RUNTIME_BYTES < 1e5

    # time: the fitted per-step cost of 4 path-hop entries, 7 links and 2 controllers
    per_step = (cost.STEP_BASE + 4 * cost.STEP_PER_HOP + 7 * cost.STEP_PER_LINK
                + 2 * cost.STEP_PER_CONTROLLER)
    assert estimate.seconds == pytest.approx(cost.COMPILE_SECONDS + steps * per_step)

    # --check-dt adds a run at dt / 2: twice the steps and history, the same records
    checked = cost.estimate(compiled, check_dt=True)
    assert checked.steps == 3 * steps and checked.records == records
    assert checked.history_bytes == 2 * estimate.history_bytes
    assert checked.seconds > 2.5 * (estimate.seconds - cost.COMPILE_SECONDS)

    assert cost.describe(estimate) == (f"10,000 steps of 2 us, 200 records, "
                                       f"~{pathflow.units.format_bytes(estimate.memory)}, "
                                       f"~{cost.duration(estimate.seconds)} estimated")


def test_memory_counts_the_series_of_merged_flows_and_the_refiled_ring() -> None:
    """64 exchangeable flows run as 8 controllers (`run.representatives`): the labelled Dataset
    gives each flow its series, which the estimate counts beyond the solver's (measured here
    against the Dataset, within 25 %); where the step follows the dynamics the signals in
    flight are re-filed through the host at each change of step: one ring more."""
    merged = small(representatives="4").with_updates({"traffic.flows": 64})
    compiled = compile_scenario(merged)
    assert compiled.problem.n_subflows == 8 and len(compiled.controller_of) == 64
    ds = pathflow.simulate(merged)
    per_flow = sum(v.nbytes for v in ds.data_vars.values()
                   if "time" in v.dims and {"flow", "subflow"} & set(v.dims))
    beyond = cost._expanded_bytes(compiled, cost._state_variables(compiled))
    assert beyond == pytest.approx(per_flow * (64 - 8) / 64, rel=0.25)
    assert cost.estimate(compiled).other_bytes > cost._RUNTIME_BYTES + beyond

    following = compile_scenario(small().with_updates({"run.dt": None}))
    assert following.stepping is not None
    # 2 controllers, 4 float32 values per step of the history, twice
    assert cost.estimate(following).history_bytes == 2 * following.grid.history * 2 * 4 * 4


def test_time_estimate_grows_with_the_problem() -> None:
    two = cost.estimate(compile_scenario(small()))
    sixty_four = small().with_updates({"traffic.flows": 64})
    many = cost.estimate(compile_scenario(sixty_four, exchangeable=False))
    longer = cost.estimate(compile_scenario(small(dt="1us")))
    assert many.seconds > two.seconds and many.controllers == 64
    # window-based flows may time out each at its own moment: all 64 run (models.timeouts)
    assert cost.estimate(compile_scenario(sixty_four)) == many
    assert longer.steps == 2 * two.steps
    assert longer.seconds - cost.COMPILE_SECONDS == pytest.approx(
        2 * (two.seconds - cost.COMPILE_SECONDS))
    assert cost.duration(30) == "30 s" and cost.duration(900) == "15 min"
    assert cost.duration(3 * 3600) == "3.0 h" and cost.duration(10 * 86400) == "10 days"


def test_sweep_estimate_counts_points_on_one_time_axis() -> None:
    scenario = small()
    # flows started apart are told apart: every one is a controller of its own
    points = compile_together([scenario.with_updates({"traffic.flows": n,
                                                      "traffic.start_jitter": "1ms"})
                               for n in (2, 3, 9)])
    single = cost.estimate(points[0])
    swept = cost.estimate_sweep(points)
    assert swept.points == 3 and swept.steps == single.steps
    assert swept.controllers == 9
    # three size buckets (2, 4 and 16 subflows), each compiled and run once
    assert swept.seconds > 3 * (cost.COMPILE_SECONDS + single.steps * cost.STEP_BASE)
    assert cost.describe(swept).startswith("3 points x 10,000 steps of 2 us, 200 records each, "
                                           "3 programs to compile")
    assert swept.programs == 3
    # rate-based flows started together run once per host: two controllers, one bucket
    def dcqcn(flows: int, **traffic: str):  # type: ignore[no-untyped-def]
        return star(2, rate="1Gbps", delay="10us", buffer="100pkt", duration="20ms", cc="dcqcn",
                    aqm={"kind": "dcqcn", "preset": "cx4"}, flows=flows,
                    transport={"preset": "cx4"}, traffic=traffic, run=GRID)

    apart = cost.estimate_sweep(compile_together([dcqcn(n, start_jitter="1ms")
                                                  for n in (2, 3, 9)]))
    together = cost.estimate_sweep(compile_together([dcqcn(n) for n in (2, 3, 9)]))
    assert together.controllers == 2 and together.seconds < apart.seconds


def test_a_grid_is_one_program_and_smaller_batches_take_less_memory() -> None:
    """Thresholds and seeds are values, not shapes: 8 points of one size are one program; with
    batches of one point, the same points run in 8 chunks, the estimate's peak falls, and a
    summaries-only sweep needs less than one that keeps its series."""
    points = compile_together([small().with_updates({"aqm.threshold": k, "run.seed": seed})
                               for k in ("20pkt", "30pkt", "40pkt", "50pkt") for seed in (1, 2)])
    whole = cost.estimate_sweep(points)
    assert whole.programs == 1 and len(list(chunks(points))) == 1
    alone = cost.estimate_sweep(points, chunk_bytes=1.0)  # a point per chunk, at least
    assert len(list(chunks(points, 1.0))) == 8 and alone.programs == 1  # one batch shape
    assert alone.record_bytes < whole.record_bytes / 4  # a chunk of one point, not of 8
    assert cost.estimate_sweep(points, series=False).memory < whole.memory
    # the same 8 chunks two at a time: each CPU takes the next as it is free, so the wall time
    # is at least half the work and the longest chunk (the first, which compiles) and at most
    # their sum (Graham's bound), and two chunks are in memory at once
    paired = cost.estimate_sweep(points, chunk_bytes=1.0, parallel=2)
    longest = cost.COMPILE_SECONDS + (alone.seconds - cost.COMPILE_SECONDS) / 8
    assert max(alone.seconds / 2, longest) <= paired.seconds < alone.seconds
    assert paired.seconds <= alone.seconds / 2 + longest
    assert paired.record_bytes == pytest.approx(2 * alone.record_bytes)
    assert paired.history_bytes == pytest.approx(2 * alone.history_bytes)


def test_memory_refusal_names_what_would_fit() -> None:
    estimate = cost.estimate(compile_scenario(small(dt="0.1us")))
    assert estimate.history_bytes > estimate.record_bytes
    cost.check_memory(estimate, estimate.memory)  # fits exactly: no error
    # history-bound: a run.dt that would fit (four times larger), and names the limit
    limit = estimate.other_bytes + estimate.record_bytes + estimate.history_bytes / 4
    with pytest.raises(ScenarioError, match=r"feedback history .* run\.dt of at least") as error:
        cost.check_memory(estimate, limit, "the run", "the limit")
    message = error.value.args[0]
    assert message.startswith("the run needs ~") and "is the limit" in message
    suggested = parse_time(message.split("at least ")[1].split(" would")[0].replace(" ", ""))
    assert suggested == pytest.approx(4 * estimate.dt, rel=0.01)
    estimate = cost.estimate(compile_scenario(small()))
    # record-bound (many records): a run.sample that would fit
    dense = cost.estimate(compile_scenario(small(sample="2us")))
    assert dense.records == 10_000 and dense.record_bytes > dense.history_bytes
    with pytest.raises(ScenarioError, match=r"10,000 records .* run\.sample of at least"):
        cost.check_memory(dense, dense.memory - dense.record_bytes / 2)
    # nothing fits
    with pytest.raises(ScenarioError, match="alone take"):
        cost.check_memory(estimate, 1e6)
    assert cost.available_memory() > 0


def test_cli_refuses_what_exceeds_max_memory(tmp_path: Path) -> None:
    scenario = tmp_path / "s.toml"
    scenario.write_text(TINY_TOML)
    out = tmp_path / "r.nc"
    result = runner.invoke(app, ["run", str(scenario), "--max-memory", "50MB", "-o", str(out)])
    assert result.exit_code == 2, result.output
    shown = lines(result.output)
    assert len(shown) == 1 and shown[0].startswith("error: tiny needs ~"), result.output
    assert "50 MB is the limit (--max-memory)" in shown[0]
    assert "Traceback" not in result.output and not out.exists()
    bad = runner.invoke(app, ["run", str(scenario), "--max-memory", "lots", "-q"])
    assert bad.exit_code == 2 and lines(bad.output)[0].startswith("error: --max-memory: ")


def test_cli_sweep_refuses_before_running_any_point(tmp_path: Path) -> None:
    scenario = tmp_path / "s.toml"
    scenario.write_text(TINY_TOML)
    out = tmp_path / "sw.nc"
    started = time.perf_counter()
    result = runner.invoke(app, ["sweep", str(scenario), "--flows", "2:9:7", "-o", str(out),
                                 "--max-memory", "10MB"])
    assert result.exit_code == 2, result.output
    shown = lines(result.output)
    assert len(shown) == 1 and "needs ~" in shown[0] and "--max-memory" in shown[0]
    assert not out.exists() and time.perf_counter() - started < 20


def test_cli_sweep_runs_side_by_side_only_what_fits_in_memory() -> None:
    """Two chunks on two CPUs need the memory of both: under a limit that holds one but not
    two, the sweep runs them one at a time (its cost line then says so) rather than refusing."""
    from pathflow.cli.sweep import _side_by_side

    points = compile_together([small().with_updates({"traffic.flows": n}) for n in (2, 9)])
    one, two = (cost.estimate_sweep(points, False, parallel=n) for n in (1, 2))
    assert len(list(chunks(points))) == 2 and two.memory > one.memory
    between = f"{(one.memory + two.memory) / 2 / 1e6:.3f}MB"
    assert _side_by_side(points, False, CHUNK_BYTES, 2, between) == (one, 1)
    assert _side_by_side(points, False, CHUNK_BYTES, 2, f"{two.memory / 1e6 + 1:.3f}MB") == (two, 2)
    assert _side_by_side(points, False, CHUNK_BYTES, 1, "1000GB") == (one, 1)


def test_above_an_hour_without_a_terminal_needs_yes(tmp_path: Path) -> None:
    """1 ns steps over 1 s: 10^9 steps (about 1.5 h estimated) fits in memory; without --yes and
    without a terminal to ask on, it is refused at once, before anything runs."""
    scenario = tmp_path / "slow.toml"
    scenario.write_text(TINY_TOML.replace('duration = "20ms"', 'duration = "1s"\ndt = "1ns"'))
    started = time.perf_counter()
    result = runner.invoke(app, ["run", str(scenario), "-o", str(tmp_path / "r.nc")])
    assert time.perf_counter() - started < 30  # the run itself would take an hour or more
    assert result.exit_code == 2, result.output
    shown = lines(result.output)
    assert len(shown) == 1, result.output
    assert shown[0].startswith("error: tiny: 1,000,000,000 steps of 1 ns")
    assert "above an hour" in shown[0] and "pass --yes" in shown[0]
    assert not (tmp_path / "r.nc").exists()


def test_question_above_an_hour(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With the threshold at zero, the 20 ms run counts as long: at a terminal the answer 'n'
    stops it, --yes runs it without asking, and no terminal without --yes refuses it."""
    scenario = tmp_path / "s.toml"
    scenario.write_text(TINY_TOML)
    monkeypatch.setattr(cost, "CONFIRM_SECONDS", 0.0)
    monkeypatch.setattr("pathflow.cli.progress._interactive", lambda: True)
    declined = runner.invoke(app, ["run", str(scenario), "-q"], input="n\n")
    assert declined.exit_code == 2, declined.output
    assert "Start it?" in declined.output and "error: not started" in declined.output
    assert "Jain" not in declined.output  # nothing ran
    accepted = runner.invoke(app, ["run", str(scenario), "-q", "--yes"])
    assert accepted.exit_code == 0 and "Start it?" not in accepted.output
    assert "Jain" in accepted.output
    monkeypatch.setattr("pathflow.cli.progress._interactive", lambda: False)
    refused = runner.invoke(app, ["run", str(scenario), "-q"])
    assert refused.exit_code == 2 and "pass --yes" in refused.output


def test_progress_lines_when_not_a_terminal(tmp_path: Path) -> None:
    scenario = tmp_path / "s.toml"
    scenario.write_text(TINY_TOML)
    result = runner.invoke(app, ["run", str(scenario)])
    assert result.exit_code == 0, result.output
    shown = lines(result.output)
    cost_line = next(i for i, line in enumerate(shown) if line.endswith("estimated"))
    assert shown[cost_line].startswith("tiny: ") and " steps of " in shown[cost_line]
    progress = [line for line in shown if line.startswith("simulating tiny: ")]
    percents = [int(line.split(": ")[1].split(" %")[0]) for line in progress]
    assert len(percents) == 10 and percents[-1] == 100, progress  # a line per tenth
    assert all(10 * k <= p < 10 * (k + 1) for k, p in enumerate(percents[:-1], start=1))
    assert "elapsed" in progress[0] and "left)" in progress[0]
    assert shown.index(progress[0]) > cost_line  # the cost comes first
    quiet = runner.invoke(app, ["run", str(scenario), "-q"])
    assert "estimated" not in quiet.output and " % (elapsed" not in quiet.output


def test_sweep_hook_sees_every_point_before_running() -> None:
    seen: list[int] = []

    def refuse(points: list) -> None:  # type: ignore[type-arg]
        seen.extend(len(p.routes.flows) for p in points)
        raise ScenarioError("refused")

    with pytest.raises(ScenarioError, match="refused"):
        sweep(small(), [2, 3], before_run=refuse)
    assert seen == [2, 3]
