"""tunebench.family_race on hand-made traces: each policy's order of batches, its one clock and best so far, the race's
choice of leader; and benchmarks/family_race.py's pairs of datasets, which must hold the shapes they name."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pandas as pd
import pytest

from tunebench.family_race import in_turn, policy_trace, race
from tunebench.study import open_dataset

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import family_race as benchmark  # noqa: E402


def trace(batches: list[tuple[float, list[float]]]) -> pd.DataFrame:
    """A run_search-like trace: per batch, its end on the family's own clock and its latencies (NaN: failed)."""
    rows = []
    for batch, (end_s, latencies) in enumerate(batches, start=1):
        rows += [{"eval_index": len(rows) + 1, "batch": batch, "time_s": end_s, "latency_ms": latency}
                 for latency in latencies]
    frame = pd.DataFrame(rows)
    return frame.assign(best_ms=frame["latency_ms"].fillna(math.inf).cummin())


SLOW = trace([(4.0, [3.0, math.nan]), (6.0, [2.5]), (9.0, [2.0])])  # batches of 4, 2 and 3 s
FAST = trace([(5.0, [1.5, 2.0]), (6.0, [1.0]), (10.0, [0.9])])  # batches of 5, 1 and 4 s


def test_in_turn_runs_each_search_whole_one_after_the_other_on_one_clock() -> None:
    combined = in_turn({"slow": SLOW, "fast": FAST})
    assert list(combined["family"]) == ["slow"] * 4 + ["fast"] * 4
    assert list(combined["time_s"]) == [4.0, 4.0, 6.0, 9.0, 14.0, 14.0, 15.0, 19.0]
    assert list(combined["best_ms"]) == [3.0, 3.0, 2.5, 2.0, 1.5, 1.5, 1.0, 0.9]
    assert list(combined["eval_index"]) == list(range(1, 9))
    assert list(combined["batch"]) == [1, 1, 2, 3, 4, 4, 5, 6]  # each batch's place in the combined order


def test_race_probes_each_family_then_continues_only_the_leader() -> None:
    combined = race({"slow": SLOW, "fast": FAST})
    assert list(combined["family"]) == ["slow", "slow", "fast", "fast", "fast", "fast"]
    assert list(combined["time_s"]) == [4.0, 4.0, 9.0, 9.0, 10.0, 14.0]
    assert combined["best_ms"].iloc[-1] == 0.9
    # with two batches each, the slow family's second batch is paid for too
    two = race({"slow": SLOW, "fast": FAST}, probe_batches=2)
    assert list(two["family"]) == ["slow"] * 3 + ["fast"] * 4 and two["time_s"].iloc[-1] == 16.0


def test_race_keeps_the_first_family_when_its_probe_is_faster_and_ignores_failures() -> None:
    leader_first = race({"fast": FAST, "slow": SLOW})
    assert list(leader_first["family"]) == ["fast", "fast", "slow", "slow", "fast", "fast"]
    failed = trace([(1.0, [math.nan, math.nan])])
    assert list(race({"failed": failed, "slow": SLOW})["family"]) == ["failed", "failed", "slow", "slow", "slow",
                                                                      "slow"]


def test_race_with_a_margin_keeps_searching_a_family_within_it_and_drops_one_beyond() -> None:
    close = trace([(2.0, [1.6]), (3.0, [1.55]), (4.0, [1.4])])  # batches of 2, 1 and 1 s
    # after the probes 1.6 is within 10 % of 1.5: one more batch each; then 1.55 is beyond 10 % of 1.0: dropped
    combined = race({"close": close, "fast": FAST}, margin=0.1)
    assert list(combined["family"]) == ["close", "fast", "fast", "close", "fast", "fast"]
    assert list(combined["time_s"]) == [2.0, 7.0, 7.0, 8.0, 9.0, 13.0]
    # without the margin the close family is dropped after its probe
    assert list(race({"close": close, "fast": FAST})["family"]) == ["close"] + ["fast"] * 4
    # without a margin, families tied after the probes go on in turn until one leads
    first, second = trace([(1.0, [1.0]), (2.0, [0.9])]), trace([(1.0, [1.0]), (2.0, [0.8])])
    assert list(race({"first": first, "second": second})["family"]) == ["first", "second", "first", "second"]
    # a family whose search has ended stays a contender; the other runs on to its end
    short = trace([(1.0, [1.45])])
    assert list(race({"short": short, "fast": FAST}, margin=0.1)["family"]) == ["short"] + ["fast"] * 4


def test_policies_check_their_families_and_settings() -> None:
    assert policy_trace("alone", {"fast": FAST})["best_ms"].iloc[-1] == 0.9
    with pytest.raises(ValueError, match="unknown policy 'both'; allowed: alone, in turn, race"):
        policy_trace("both", {"fast": FAST})
    with pytest.raises(ValueError, match="policy 'alone' searches one family, got 2"):
        policy_trace("alone", {"fast": FAST, "slow": SLOW})
    with pytest.raises(ValueError, match="policy 'race' needs two families or more, got fast"):
        policy_trace("race", {"fast": FAST})
    with pytest.raises(ValueError, match="probe_batches must be >= 1, got 0"):
        race({"fast": FAST, "slow": SLOW}, probe_batches=0)
    with pytest.raises(ValueError, match="margin must be a fraction >= 0, got -0.1"):
        race({"fast": FAST, "slow": SLOW}, margin=-0.1)
    backwards = trace([(5.0, [1.0]), (3.0, [2.0])])
    with pytest.raises(ValueError, match="backwards: the trace's clock runs backwards"):
        in_turn({"backwards": backwards})


def test_the_benchmarks_pairs_hold_the_shapes_they_name() -> None:
    for _, pointer, tma, shapes in benchmark.PAIRS:
        for path, kernel in ((pointer, "matmul"), (tma, "matmul_tma")):
            dataset = open_dataset(Path(__file__).resolve().parents[1] / path)
            assert dataset.kernel == kernel and set(shapes) <= set(dataset.shapes())


def test_the_benchmarks_arms_report_seconds_to_the_target_and_the_family_each_ends_on() -> None:
    rows = {row["arm"]: row for row in benchmark.arm_rows({"pointer": SLOW, "TMA": FAST}, optimum_ms=0.9)}
    assert set(rows) == set(benchmark.ARMS)
    assert math.isnan(rows["pointer alone"]["seconds to target"]) and rows["pointer alone"]["ends on"] == "pointer"
    assert rows["TMA alone"]["seconds to target"] == 10.0 and rows["TMA alone"]["final fraction"] == 1.0
    assert rows["both in turn, pointer first"]["seconds to target"] == 19.0
    assert rows["race, one batch each"]["seconds to target"] == 14.0
    assert all(row["ends on"] == "TMA" for label, row in rows.items() if label != "pointer alone")


def test_the_held_out_race_setting_is_chosen_on_the_other_shapes_and_scored_on_its_own() -> None:
    one, margin = "race, one batch each", "race, on while within 10 %"
    # Shape a: one batch is quicker but misses once; shapes b and c: one batch never misses and is quicker.
    rows = [("a", one, 1.0, 1.0), ("a", one, None, None), ("a", margin, 2.0, 2.0), ("a", margin, 3.0, 3.0),
            ("b", one, 1.0, 1.0), ("b", one, 1.0, 1.0), ("b", margin, 5.0, 5.0), ("b", margin, 5.0, 5.0),
            ("c", one, 2.0, 2.0), ("c", one, None, None), ("c", margin, 4.0, 4.0), ("c", margin, 4.0, 4.0)]
    results = pd.DataFrame(rows, columns=["shape", "arm", "seconds to target", "extra s"])
    assert benchmark.choose_race(results[results["shape"] == "b"]) == one
    assert benchmark.choose_race(results[results["shape"] != "b"]) == margin  # both a and c: one batch misses
    chosen = benchmark.with_held_out_choice(results)
    held_out = chosen[chosen["arm"] == benchmark.CHOSEN].groupby("shape")["chosen"].first().to_dict()
    assert held_out == {"a": margin, "b": margin, "c": margin}  # b's own runs play no part in b's choice
    assert chosen[(chosen["arm"] == benchmark.CHOSEN) & (chosen["shape"] == "b")]["extra s"].tolist() == [5.0, 5.0]
    assert len(chosen) == len(results) + 6
    with pytest.raises(ValueError, match="no runs of a race setting"):
        benchmark.choose_race(results[results["arm"] == "TMA alone"])


def test_the_report_table_has_an_arm_per_row_and_a_strategy_per_column(tmp_path: Path) -> None:
    from tunebench.gemm_kernels import race_table

    runs = pd.DataFrame({"shape": ["a"] * 4, "seed": [0, 0, 1, 1], "faster family": ["TMA"] * 4,
                         "arm": ["pointer alone", "race", "pointer alone", "race"],
                         "extra s": [math.nan, 2.0, math.nan, 4.0], "ends on": ["pointer", "TMA", "pointer", "pointer"]})
    runs.to_csv(tmp_path / "per_run_lfbo.csv", index=False)
    table = race_table(tmp_path).set_index("arm")
    assert list(table.columns) == ["lfbo"]
    assert table.loc["pointer alone", "lfbo"] == "never (0%)" and table.loc["race", "lfbo"] == "+3.0 s (50%)"


def test_stepping_the_searches_gives_the_race_and_the_turns_that_reordering_their_traces_gives() -> None:
    from tunebench.family_race import in_turn_searches, race_searches
    from tunebench.measure.replay import ReplayEvaluator
    from tunebench.search import make_strategy
    from tunebench.study import Budget, Search, run_search

    root = Path(__file__).resolve().parents[1]
    _, pointer, tma, shapes = benchmark.PAIRS[0]
    datasets = {"pointer": open_dataset(root / pointer), "TMA": open_dataset(root / tma)}

    def searches(seed: int) -> dict[str, Search]:
        evaluators = {family: ReplayEvaluator(dataset, shapes[0]) for family, dataset in datasets.items()}
        return {family: Search(make_strategy("lfbo_quick", evaluator.space, seed=seed), evaluator, Budget(seconds=60))
                for family, evaluator in evaluators.items()}

    traces = {family: run_search(search.strategy, search.evaluator, search.budget)
              for family, search in searches(0).items()}
    for recorded, stepped in ((race(traces, margin=0.1), race_searches(searches(0), margin=0.1)),
                              (in_turn(traces), in_turn_searches(searches(0)))):
        assert list(stepped["family"]) == list(recorded["family"])
        assert list(stepped["config_key"]) == list(recorded["config_key"])
        assert stepped["best_ms"].iloc[-1] == recorded["best_ms"].iloc[-1]
        # the clocks differ only by the strategies' own CPU time, measured anew
        assert stepped["time_s"].iloc[-1] == pytest.approx(recorded["time_s"].iloc[-1], rel=0.1)
    raced = searches(0)
    combined = race_searches(raced)
    for family, search in raced.items():  # a dropped family's search is stepped no further than the race ran it
        assert search.evaluations == int((combined["family"] == family).sum())


@pytest.mark.parametrize("arguments, message", [
    (["--strategy", "nope"], "unknown strategies ['nope']"),
    (["--seeds", "0"], "--seeds and --workers must be >= 1 and --seconds > 0, got 0, 2 and 300.0"),
])
def test_the_benchmark_refuses_bad_arguments_before_replaying(arguments, message, capsys, tmp_path) -> None:
    with pytest.raises(SystemExit) as exit_info:
        benchmark.main([*arguments, "--out", str(tmp_path)])
    assert exit_info.value.code == 2 and message in capsys.readouterr().err
    assert not any(tmp_path.iterdir())
