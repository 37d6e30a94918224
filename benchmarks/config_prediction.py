"""Config prediction for unseen GEMM shapes, scored by shape-grouped cross-validation, and warm-started search on the
held-out shapes; writes results/config_prediction/ (summary.md, per_shape.csv, warm_start.csv, the trained predictor).

Run: `.venv/bin/python benchmarks/config_prediction.py` (about 6 minutes on 2 cores).
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import os
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from threadpoolctl import threadpool_limits

from tunebench.measure.dataset import load_dataset
from tunebench.measure.replay import ReplayEvaluator
from tunebench.predict import (SELECTED, by_family, cross_validate, fit_predictor, load_predictor, per_shape_table,
                               read_header, save_predictor, select_ranker, summarize_efficiency, training_data)
from tunebench.predict.dispatch import (DIVISIBILITY_MISMATCH, NEIGHBOUR_WEIGHTS, SHORTLIST_NEIGHBOURS,
                                        SHORTLIST_PER_SHAPE, Shortlist)
from tunebench.predict.model import OBJECTIVES, relative_speed
from tunebench.predict.protocol import N_SPLITS, dispatch_latency_ms
from tunebench.tables import markdown_table

REPO = Path(__file__).resolve().parents[1]
DATASET = REPO / "results" / "datasets" / "matmul_bfloat16_h100_prediction.parquet"
EXHAUSTIVE = REPO / "results" / "datasets" / "matmul_bfloat16_h100.parquet"  # same GPU; 3 shapes in common
OUT = REPO / "results" / "config_prediction"
# CK Tile's published dispatcher numbers (fp16 on gfx950): mean, P10 and min efficiency over their test shapes.
CK_TILE = {"mean": 0.9936, "p10": 0.9805, "min": 0.9545}
TARGET = 0.99  # fraction of optimum the warm-start comparison counts evaluations to
SEARCH_BUDGET = 200  # unique evaluations per search run at most
TOP_K_SEEDS = 10  # model's top configs measured first by the warm start
SMALL_POPULATION = 30  # the inner strategies' initial population in the "-30" variants (default: 100)
PIPELINES = (*OBJECTIVES, SELECTED)
PLAN = "remeasure_plan.json"  # what `--remeasure` times on a GPU: per shape, the picks and the recorded top configs
REMEASURED = "remeasured.csv"
RECORDED_TOP = 5  # recorded fastest configs of each shape that are re-measured beside the picks
REMEASURE_ROUNDS = 3  # rounds over every shape; a config's re-measured latency is its median over rounds


class StopAtTarget:
    """A replay evaluator whose clock reads infinity once the target fraction of optimum is found, so that
    `run_search` (with a seconds budget) stops there: evaluations after the target change nothing we report."""

    def __init__(self, evaluator: ReplayEvaluator, target: float) -> None:
        self.evaluator = evaluator
        self.goal_ms = evaluator.optimum_ms / target
        self.reached = False

    def evaluate(self, configs: list[dict[str, Any]]) -> list:
        results = self.evaluator.evaluate(configs)
        self.reached = self.reached or any(result.ok and result.latency_ms <= self.goal_ms for result in results)
        return results

    @property
    def elapsed_s(self) -> float:
        return math.inf if self.reached else self.evaluator.elapsed_s

    def charge(self, seconds: float) -> None:
        self.evaluator.charge(seconds)


@functools.lru_cache(maxsize=1)
def _dataset(path: str):
    return load_dataset(path)


def search_run(path: str, shape: tuple[int, ...], strategy: str, variant: str, seeds: list[dict], seed: int) -> dict:
    """Evaluations until TARGET of the shape's recorded optimum (NaN if never within SEARCH_BUDGET), one run."""
    # Imported here: the search registry needs optuna, which `--remeasure` on a bare GPU machine does not.
    from tunebench.search import make_strategy
    from tunebench.search.warm_start import warm_start
    from tunebench.study import Budget, run_search

    with threadpool_limits(1):
        evaluator = StopAtTarget(ReplayEvaluator(_dataset(path), shape, seed=seed), TARGET)
        settings = {"initial_population": SMALL_POPULATION} if variant.endswith("-30") else {}
        space = evaluator.evaluator.space
        if variant.startswith("warm"):
            searcher = warm_start(strategy, space, seeds, seed=seed, **settings)
        else:
            searcher = make_strategy(strategy, space, seed=seed, **settings)
        trace = run_search(searcher, evaluator, Budget(evaluations=SEARCH_BUDGET, seconds=1e300))
    fraction = evaluator.evaluator.optimum_ms / trace["best_ms"].to_numpy()
    hit = np.flatnonzero(fraction >= TARGET)
    return {"M": shape[0], "N": shape[1], "K": shape[2], "strategy": strategy, "variant": variant, "seed": seed,
            "evals_to_target": float(hit[0] + 1) if hit.size else math.nan, "evaluations": len(trace)}


def baselines(data, folds) -> dict[str, np.ndarray]:
    """Scores of two model-free baselines, out of fold: one config for every shape (the highest mean relative speed
    over the training shapes), and the measured best config of the nearest training shape (dispatcher distance)."""
    count = len(data.candidates)
    relative = relative_speed(data.latency_ms, data.group).reshape(len(data.shapes), count)
    single, nearest = np.zeros((len(data.shapes), count)), np.zeros((len(data.shapes), count))
    for train, test in folds:
        single[test, np.argmax(relative[train].mean(axis=0))] = 1.0
        shortlist = Shortlist(np.log2(data.shapes[train].astype(float)), data.shapes[train, 1:] % 16 == 0,
                              np.argmax(relative[train], axis=1)[:, None])
        for index in test:
            distance_order = _nearest(shortlist, data.shapes[index])
            nearest[index, shortlist.top[distance_order, 0]] = 1.0
    return {"one config for all shapes": single, "best config of the nearest training shape": nearest}


def _nearest(shortlist: Shortlist, shape: np.ndarray) -> int:
    shape = shape.astype(float)
    distance = (np.abs(shortlist.log2_shapes - np.log2(shape)) @ NEIGHBOUR_WEIGHTS
                + DIVISIBILITY_MISMATCH * (shortlist.aligned != (shape[1:] % 16 == 0)).any(axis=1))
    return int(np.argmin(distance))


def retest(dataset, other_path: Path) -> pd.DataFrame:
    """For the shapes measured in both datasets: efficiency, in `dataset`, of the config that is fastest in the other
    dataset among the configs both recorded, i.e. what a perfect predictor judged by an independent measurement
    scores here."""
    other = load_dataset(other_path, kernel=dataset.kernel)
    names = list(dataset.parameter_names)
    rows = []
    for shape in sorted(set(dataset.shapes()) & set(other.shapes())):
        here = dataset.task(shape).set_index(names)["latency_ms"]
        there = other.task(shape).set_index(names)["latency_ms"].reindex(here.index)
        pick = there.idxmin()
        rows.append({"M": shape[0], "N": shape[1], "K": shape[2], "common configs": int(there.notna().sum()),
                     "efficiency here of the other dataset's best": percent(here.min() / here[pick])})
    return pd.DataFrame(rows)


def remeasure_plan(data, picks: dict[str, np.ndarray], top_selected: np.ndarray) -> dict[str, Any]:
    """Per shape: the configs to re-measure head to head (the recorded top RECORDED_TOP, the `selected` model's top 5
    and every pick) and which config each role picked."""
    latency = data.latency_ms.reshape(len(data.shapes), -1)
    shapes = []
    for index, shape in enumerate(data.shapes.tolist()):
        recorded = np.argsort(latency[index], kind="stable")[:RECORDED_TOP]
        roles = {"recorded best": int(recorded[0]), **{role: int(chosen[index]) for role, chosen in picks.items()}}
        chosen = sorted({*map(int, recorded), *map(int, top_selected[index]), *roles.values()})
        shapes.append({"shape": shape, "configs": [data.candidates[i].tolist() for i in chosen],
                       "roles": {role: data.candidates[i].tolist() for role, i in roles.items()}})
    return {"names": list(data.space.names), "dtype": data.dtype, "gpu": data.gpu, "shapes": shapes}


def remeasure(plan_path: Path, out_path: Path, rounds: int, seed: int = 0) -> None:
    """On a GPU: time every planned config of every shape in `rounds` rounds, shapes and configs in a fresh random
    order each round, with the project's timing method (`GpuBench`); one CSV row per (shape, config, round)."""
    from tunebench.measure.live import GpuBench

    plan = json.loads(plan_path.read_text())
    names = plan["names"]
    rng = np.random.default_rng(seed)
    rows = []
    with GpuBench("matmul", plan["dtype"]) as bench:
        out_path.with_suffix(".json").write_text(json.dumps(bench.provenance(sys.argv), indent=1))
        for round_index in range(rounds):
            for position in rng.permutation(len(plan["shapes"])):
                entry = plan["shapes"][position]
                configs = [dict(zip(names, values)) for values in entry["configs"]]
                order = rng.permutation(len(configs))
                results = bench.measure([configs[i] for i in order], tuple(entry["shape"]))
                for result in results:
                    rows.append({"M": entry["shape"][0], "N": entry["shape"][1], "K": entry["shape"][2],
                                 "config": ",".join(str(result.config[name]) for name in names), "round": round_index,
                                 "status": result.status.value, "latency_ms": result.latency_ms,
                                 "spread": (max(result.repeats_ms) - min(result.repeats_ms))
                                 / statistics.median(result.repeats_ms) if result.ok else math.nan})
            pd.DataFrame(rows).to_csv(out_path, index=False)  # after every round: a cut-short run keeps its rounds
            print(f"round {round_index + 1} of {rounds} done", flush=True)


def remeasured_efficiency(plan: dict[str, Any], frame: pd.DataFrame) -> pd.DataFrame | None:
    """Per role, efficiency from the re-measurement: best median-over-rounds latency among the shape's re-measured
    configs / the role's pick's. None when the re-measurement does not cover the plan (stale)."""
    latency = frame.groupby(["M", "N", "K", "config"])["latency_ms"].median()
    per_role: dict[str, list[float]] = {}
    for entry in plan["shapes"]:
        shape = tuple(entry["shape"])
        keys = [",".join(map(str, values)) for values in entry["configs"]]
        if any((*shape, key) not in latency.index for key in keys):
            return None
        measured = latency.loc[[(*shape, key) for key in keys]]
        for role, values in entry["roles"].items():
            per_role.setdefault(role, []).append(measured.min() / latency.loc[(*shape, ",".join(map(str, values)))])
    rows = []
    for role, values in per_role.items():
        values = np.array(values)
        rows.append({"pick": role, "mean": percent(values.mean()), "P10": percent(np.percentile(values, 10)),
                     "min": percent(values.min()), "median": percent(np.median(values)),
                     "shapes >= 99 %": f"{np.mean(values >= 0.99):.0%}"})
    return pd.DataFrame(rows)


def one_hot(indices: np.ndarray, count: int) -> np.ndarray:
    scores = np.zeros((len(indices), count))
    scores[np.arange(len(indices)), indices] = 1.0
    return scores


def percent(value: float) -> str:
    return f"{100 * value:.2f} %"


def efficiency_row(name: str, summary: dict[str, float]) -> dict[str, str]:
    return {"predictor": name, "mean": percent(summary["mean"]), "P10": percent(summary["p10"]),
            "min": percent(summary["min"]), "median": percent(summary["median"]),
            "top-1 hit rate": f"{summary['top1_hit_rate']:.2f}", "top-5 hit rate": f"{summary['top5_hit_rate']:.2f}"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", type=Path, default=DATASET)
    parser.add_argument("--workers", type=int, default=2, help="processes (each single-threaded)")
    parser.add_argument("--lfbo-seeds", type=int, default=1, help="search seeds per held-out shape for LFBO")
    parser.add_argument("--pattern-seeds", type=int, default=5, help="search seeds per held-out shape for pattern")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--remeasure", type=Path, metavar="CSV",
                        help=f"on a GPU: time the configs of <out>/{PLAN} head to head into CSV, and stop")
    parser.add_argument("--rounds", type=int, default=REMEASURE_ROUNDS, help="re-measurement rounds")
    args = parser.parse_args()
    if args.remeasure is not None:
        remeasure(args.out / PLAN, args.remeasure, args.rounds)
        return 0
    command = " ".join([".venv/bin/python", os.path.relpath(os.path.abspath(sys.argv[0]), REPO), *sys.argv[1:]])
    args.out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()

    dataset = load_dataset(args.dataset, kernel="matmul")
    data = training_data(dataset)
    latency = data.latency_ms.reshape(len(data.shapes), -1)
    count = len(data.candidates)
    cv = cross_validate(data, workers=args.workers)
    cv_s = time.perf_counter() - started

    # -- prediction quality, out of fold ---------------------------------------------------------------------
    tables = {pipeline: per_shape_table(data.shapes, cv.scores(pipeline), latency) for pipeline in PIPELINES}
    dispatch_tables = {pipeline: per_shape_table(data.shapes, one_hot(cv.dispatched(pipeline), count), latency)
                       for pipeline in PIPELINES}
    baseline_tables = {name: per_shape_table(data.shapes, scores, latency)
                       for name, scores in baselines(data, cv.folds).items()}
    names = {"throughput": "HGB on log1p(TFLOPS), full ranking",
             "relative": "HGB on latency_best / latency (weighted), full ranking",
             SELECTED: "objective chosen per fold on the inner split, full ranking"}
    rows = [efficiency_row(names[p], summarize_efficiency(tables[p])) for p in PIPELINES]
    rows.append(efficiency_row("dispatcher best_config (selected; shortlist + compiled trees)",
                               summarize_efficiency(dispatch_tables[SELECTED])))
    rows += [efficiency_row(f"baseline: {name}", summarize_efficiency(table)) for name, table in baseline_tables.items()]
    overall = pd.DataFrame(rows)
    ck = pd.DataFrame([{"predictor": "CK Tile dispatcher (published; fp16, gfx950; their protocol)",
                        "mean": percent(CK_TILE["mean"]), "P10": percent(CK_TILE["p10"]), "min": percent(CK_TILE["min"]),
                        "median": "n/a", "top-1 hit rate": "n/a", "top-5 hit rate": "n/a"}])
    overall = pd.concat([overall, ck], ignore_index=True)
    family_tables = {p: by_family(tables[p]) for p in PIPELINES}
    for table in family_tables.values():
        for column in ("mean", "p10", "min", "median"):
            table[column] = table[column].map(percent)
        for column in ("top1_hit_rate", "top5_hit_rate"):
            table[column] = table[column].map(lambda v: f"{v:.2f}")
        table.columns = ["family", "shapes", "mean", "P10", "min", "median", "top-1 hit rate", "top-5 hit rate"]
    chosen = pd.DataFrame([{"fold": o.fold, "objective": o.objective, "max_leaf_nodes": o.settings.max_leaf_nodes,
                            "iterations": o.settings.max_iter, "inner validation mean efficiency":
                            percent(o.inner_efficiency), "test shapes": len(o.test_shapes)}
                           for o in cv.outcomes[SELECTED]])
    trees = [outcome.settings.max_iter for outcome in cv.outcomes[SELECTED]]
    agreement = float(np.mean(cv.dispatched(SELECTED) == np.argmax(cv.scores(SELECTED), axis=1)))

    # -- the deployed predictor: trained on every shape, objective and settings chosen on an inner split ------
    fit_started = time.perf_counter()
    with threadpool_limits(1):
        candidates = [select_ranker(data, np.arange(len(data.shapes)), objective) for objective in OBJECTIVES]
        settings, tuning = max(candidates, key=lambda c: max(t["inner_mean_efficiency"] for t in c[1]["tried"]))
        selected_summary = summarize_efficiency(tables[SELECTED])
        predictor = fit_predictor(data, settings, header={"metrics": {
            "protocol": f"GroupKFold({N_SPLITS}) by shape; objective, tree size and iterations chosen on an inner "
                        "25 % shape split of each fold's training shapes", **selected_summary}})
    fit_s = time.perf_counter() - fit_started
    path = args.out / f"{data.kernel}_{data.dtype}_h100.predictor"
    save_predictor(predictor, path)
    loaded = load_predictor(path, kernel=data.kernel, gpu=data.gpu)
    shapes = [tuple(int(v) for v in shape) for shape in data.shapes]
    with threadpool_limits(1):
        assert all(loaded.best_config(s) == predictor.best_config(s) for s in shapes), "reloaded predictor differs"
        latencies = np.array([dispatch_latency_ms(loaded, s) for s in shapes])
        shortlist_sizes = [len(loaded.shortlist.for_shape(s)) for s in shapes]
    size_kib = path.stat().st_size / 1024

    # -- warm start on held-out shapes: each shape seeded by the model of its own fold (never trained on it) ----
    selected_scores = cv.scores(SELECTED)
    jobs = []
    for index, shape in enumerate(shapes):
        seeds = [dict(zip(data.space.names, map(int, data.candidates[i])))
                 for i in np.argsort(-selected_scores[index], kind="stable")[:TOP_K_SEEDS]]
        for strategy, seed_count in (("lfbo", args.lfbo_seeds), ("pattern", args.pattern_seeds)):
            for variant in ("cold", "warm", "cold-30", "warm-30"):
                for seed in range(seed_count):
                    jobs.append((str(args.dataset), shape, strategy, variant, seeds, seed))
    search_started = time.perf_counter()
    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        runs = pd.DataFrame(list(pool.map(search_run, *zip(*jobs), chunksize=4)))
    search_s = time.perf_counter() - search_started
    runs.to_csv(args.out / "warm_start.csv", index=False)
    warm_rows = []
    for (strategy, variant), group in runs.groupby(["strategy", "variant"], sort=False):
        values = group["evals_to_target"].to_numpy()
        per_shape = group.groupby(["M", "N", "K"])["evals_to_target"].median()
        warm_rows.append({
            "strategy": strategy, "variant": variant,
            "runs (shapes x seeds)": f"{len(group)} ({group[['M', 'N', 'K']].drop_duplicates().shape[0]} x "
                                     f"{group['seed'].nunique()})",
            f"median evals to {TARGET}": f"{np.median(np.where(np.isnan(values), np.inf, values)):.0f}",
            "P75": f"{np.percentile(np.where(np.isnan(values), np.inf, values), 75):.0f}",
            f"reached within {SEARCH_BUDGET} (or before the search ended)": f"{np.mean(~np.isnan(values)):.0%}",
            "reached within 20": f"{np.mean(values <= 20):.0%}",
            "median over shapes of per-shape medians": f"{np.median(np.where(np.isnan(per_shape), np.inf, per_shape)):.0f}"})
    warm_table = pd.DataFrame(warm_rows)

    # -- per-shape CSV -------------------------------------------------------------------------------------
    per_shape = tables[SELECTED][["M", "N", "K", "family"]].copy()
    for pipeline in PIPELINES:
        per_shape[f"{pipeline}_efficiency"] = tables[pipeline]["efficiency"]
        per_shape[f"{pipeline}_top1_hit"] = tables[pipeline]["top1_hit"]
        per_shape[f"{pipeline}_top5_hit"] = tables[pipeline]["top5_hit"]
    per_shape["dispatcher_efficiency"] = dispatch_tables[SELECTED]["efficiency"]
    per_shape["predicted_config"] = [",".join(map(str, data.candidates[i])) for i in tables[SELECTED]["predicted"]]
    per_shape["best_config"] = [",".join(map(str, data.candidates[i])) for i in tables[SELECTED]["best"]]
    per_shape["predicted_ms"] = tables[SELECTED]["predicted_ms"]
    per_shape["best_ms"] = tables[SELECTED]["best_ms"]
    per_shape["predicted_row_spread"] = data.spread.reshape(len(shapes), -1)[np.arange(len(shapes)),
                                                                               tables[SELECTED]["predicted"]]
    per_shape["rank_all_ms"] = cv.rank_ms(SELECTED)
    per_shape["dispatch_ms_deployed"] = latencies
    for (strategy, variant), group in runs.groupby(["strategy", "variant"], sort=False):
        medians = group.groupby(["M", "N", "K"])["evals_to_target"].median()
        per_shape[f"{strategy}_{variant}_evals_to_{TARGET}"] = [medians.get(s, math.nan) for s in shapes]
    per_shape.to_csv(args.out / "per_shape.csv", index=False)

    retested = retest(dataset, EXHAUSTIVE)
    picks = {pipeline: np.argmax(cv.scores(pipeline), axis=1) for pipeline in PIPELINES}
    picks["dispatcher"] = cv.dispatched(SELECTED)
    picks.update({f"baseline: {name}": table["predicted"].to_numpy() for name, table in baseline_tables.items()})
    plan = remeasure_plan(data, picks, np.argsort(-selected_scores, axis=1, kind="stable")[:, :5])
    (args.out / PLAN).write_text(json.dumps(plan))
    remeasured = None
    if (args.out / REMEASURED).exists():
        remeasured = remeasured_efficiency(plan, pd.read_csv(args.out / REMEASURED))
    if remeasured is None:
        remeasured_text = (f"Not available: `{os.path.relpath(args.out / REMEASURED, REPO)}` is missing or does not "
                           f"cover this run's picks. On a GPU: `PYTHONPATH=lib python3 "
                           f"benchmarks/config_prediction.py --remeasure {os.path.relpath(args.out / REMEASURED, REPO)}`"
                           ", then run this script again.")
    else:
        remeasure_info = json.loads((args.out / REMEASURED).with_suffix(".json").read_text())
        remeasured_rounds = pd.read_csv(args.out / REMEASURED)["round"].nunique()
        remeasured_text = f"""Every pick of every pipeline (out of fold), the `selected` model's top 5 and the recorded top
{RECORDED_TOP} of each shape, re-timed on {remeasure_info['gpu_name']} ({remeasure_info['date']}; driver
{remeasure_info['driver']}, torch {remeasure_info['torch']}, Triton {remeasure_info['triton']}) with the project's timing
method, in {remeasured_rounds} rounds (shapes and configs in a fresh random order each round), median over rounds. Efficiency
= best re-measured latency among the shape's re-measured configs / the pick's re-measured latency. The best of all
{count} under re-measurement is approximated by the best of this set (it holds the recorded top {RECORDED_TOP}).
Command: `PYTHONPATH=lib python3 benchmarks/config_prediction.py --remeasure
{os.path.relpath(args.out / REMEASURED, REPO)}` (file `{os.path.relpath(args.out / REMEASURED, REPO)}`).

{markdown_table(remeasured)}

`recorded best` is the config that was fastest in the recorded dataset: its row is the noise floor of the recorded
ground truth (how often, re-timed, it is still the fastest of the set). The gap between it and the model's picks is
model error; the gap between these numbers and the recorded-data table above is timing noise in the record. The
re-timed set holds only the configs listed, so a config missed by both the record and the models stays unseen."""

    # -- summary ------------------------------------------------------------------------------------------
    header = read_header(path)
    low_rows = per_shape[per_shape[f"{SELECTED}_efficiency"] < 0.9]
    disturbed = int((low_rows["predicted_row_spread"] > 0.5).sum())
    total_s = time.perf_counter() - started
    text = f"""# Config prediction for unseen GEMM shapes (bf16, H100)

Command: `{command}` ({total_s:.0f} s on this machine: cross-validation {cv_s:.0f} s, deployed model {fit_s:.0f} s,
search replays {search_s:.0f} s; {args.workers} single-threaded worker processes).

Data: `{os.path.relpath(args.dataset, REPO)}`, {len(shapes)} shapes x {count} candidate configs, all valid, measured
on {data.gpu} ({data.hardware.sm_count} SMs; {dataset.provenance.get('date', '?')}). The model picks among the
{count} candidates; efficiency is judged against the best of them.

## Protocol

- **Outer**: GroupKFold({N_SPLITS}) over shapes. Every number below is out of fold: the model that scores a shape
  never saw any measurement of that shape. A test checks that no shape is in both the training and test shapes of
  a fold.
- **Inner**: in each fold, a 25 % shape split of the training shapes (GroupShuffleSplit) chooses the tree size
  (max_leaf_nodes 15 or 63), the number of boosting iterations (25 to 300, read off staged predictions) and, for the
  `selected` pipeline, the objective, by the mean efficiency of the picks on the inner validation shapes. No early
  stopping or tuning ever looks at the fold being scored. The chosen settings per fold are listed below.
- **Training rows**: rows whose repeats spread over more than half their median ((max - min) / median > 0.5, 9 % of
  the rows: disturbed timings) get weight 0 in training. **Scoring uses every recorded row, unfiltered.**
- **Efficiency** of a shape = measured latency of the best of the {count} candidates / measured latency of the
  predicted config (the model's argmax). Mean, P10 (numpy's linear-interpolation 10th percentile over shapes) and
  min over the {len(shapes)} shapes. **Top-1 hit rate**: share of shapes whose predicted config is the measured
  best; **top-5 hit rate**: share whose measured best is among the model's 5 highest-ranked (these are hit rates,
  not NDCG).
- **Families** (one definition, `tunebench.predict.evaluation.FAMILIES`): M < 8, 8 <= M < 128, 128 <= M < 1024,
  M >= 1024.
- **Features** (`tunebench.predict.features`, {len(data.feature_names)} columns, one batch code path): problem (M, N,
  K, their log2, arithmetic intensity, aspect ratios, divisibility of N and K by 16), the config space's encoding,
  and interactions (tiles per dimension, programs, last-tile fill, waves on {data.hardware.sm_count} SMs, last-wave
  fraction, K iterations per split, shared memory from the kernel's resource model, programs per SM from shared
  memory and warps, waves at that occupancy, padding waste, tile intensity, split-K workspace traffic).

## Efficiency on held-out shapes

{markdown_table(overall)}

CK Tile's numbers are theirs, on another GPU, dtype, kernel family and candidate set, under a protocol that early-
stops on the scored fold; they are placed here for orientation, not as a like-for-like comparison. The table above
judges picks by the recorded timings, which include disturbed measurements; the same picks re-timed head to head are
under "Re-measured head to head" below.

### Per family

`selected` pipeline (the one deployed):

{markdown_table(family_tables[SELECTED])}

`throughput` (log1p TFLOPS regression):

{markdown_table(family_tables['throughput'])}

`relative` (the ranking-style challenger):

{markdown_table(family_tables['relative'])}

### What the inner split chose (`selected`)

{markdown_table(chosen)}

### Why the tail is low

Of the {len(low_rows)} shapes below 90 % (selected), {disturbed} have a predicted config whose recorded timing is
disturbed (repeats spread > 0.5 of the median): the measurement, not necessarily the pick, is slow. The shapes
measured in both recorded datasets (`{os.path.relpath(EXHAUSTIVE, REPO)}`, same GPU, another sitting) show how
far an independent measurement's best scores under this metric, i.e. the ceiling of a perfect predictor:

{markdown_table(retested)}

A perfect predictor is therefore capped below 100 % on this data; the re-measurement below separates model error
from timing noise.

### Re-measured head to head

{remeasured_text}

## Ranking time and dispatcher

| what | measured (ms) |
| --- | --- |
| rank all {count} candidates: features + sklearn predict, median over held-out shapes | {np.median(cv.rank_ms(SELECTED)):.2f} |
| deployed `best_config(shape)`, median over the {len(shapes)} shapes of each shape's median of 21 calls | {np.median(latencies):.3f} |
| the same, 90th percentile / max over shapes | {np.percentile(latencies, 90):.3f} / {latencies.max():.3f} |

sklearn's HistGradientBoostingRegressor.predict pays a fixed cost per tree per call, whatever the number of rows (the
fold models have {min(trees)} to {max(trees)} trees), so ranking all {count} candidates takes
~{np.median(cv.rank_ms(SELECTED)):.0f} ms here, over the 1 ms target. `best_config` instead scores a shortlist (the model's top {SHORTLIST_PER_SHAPE} configs of each of the {SHORTLIST_NEIGHBOURS} nearest
training shapes; median
{int(np.median(shortlist_sizes))} candidates) with the same trees compiled to flat numpy arrays (identical
predictions, tested). Out of fold, the shortlist dispatcher returned the full ranking's argmax on
{agreement:.0%} of shapes; its efficiency is in the table above. Timings are wall clock on this shared 2-core machine
with one thread.

Deployed predictor: `{os.path.relpath(path, REPO)}` ({size_kib:.0f} KiB: magic line, JSON header with the feature
schema, kernel `{header['kernel']}`, dtype `{header['dtype']}`, GPU `{header['gpu']}`, candidates, settings
({header['settings']['objective']}, max_leaf_nodes {header['settings']['max_leaf_nodes']},
{header['settings']['max_iter']} iterations), training shapes and dataset provenance, the CV metrics; then the
pickled model). Loading checks the kernel, GPU, payload checksum and feature schema.

## Warm start on held-out shapes

Each held-out shape's search is seeded with the top {TOP_K_SEEDS} configs of the `selected` model of its own fold.
`WarmStart` (`tunebench.search.warm_start`) measures them first, then runs the inner strategy with the seeds placed
in its initial population (told their results, never re-measured). Replay on the {count} recorded configs of the
shape, deterministic; evaluations counted until the best found is >= {TARGET} of the recorded optimum; budget
{SEARCH_BUDGET} unique evaluations or until the strategy stops (pattern search and LFBO stop when their copies
converge; a run that stops short counts as never reaching it). `-30`: initial population {SMALL_POPULATION} instead
of the default 100 (with warm start: {TOP_K_SEEDS} seeds + {SMALL_POPULATION - TOP_K_SEEDS} random); cold `-30` is
the ablation that separates the seeds from the smaller population.

{markdown_table(warm_table)}

## Transfer across GPUs

Not measured: only H100 data exists. The features take the SM count from the dataset's provenance, and a saved
predictor refuses another GPU at load; a second GPU's dataset is needed to train or test transfer.
"""
    temporary = args.out / "summary.md.tmp"
    temporary.write_text(text)
    os.replace(temporary, args.out / "summary.md")
    print(text)
    print(json.dumps({"selected": summarize_efficiency(tables[SELECTED])}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
