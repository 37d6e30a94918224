"""Config prediction for unseen GEMM shapes, scored by shape-grouped cross-validation, and warm-started search on the
held-out shapes; writes results/config_prediction/ (summary.md, per_shape.csv, warm_start.csv, the trained predictor).

Run: `.venv/bin/python benchmarks/config_prediction.py` (about 100 minutes on 2 cores).
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd
from threadpoolctl import threadpool_limits
from tqdm import tqdm

from tunebench.files import write_text_atomically
from tunebench.kernels import matmul
from tunebench.measure.dataset import load_dataset
from tunebench.measure.replay import ReplayEvaluator
from tunebench.predict import (ALIGNMENTS, SELECTED, Predictor, TrainingData, alignment, by_alignment, by_family,
                               cross_validate, fit_predictor, load_predictor, per_shape_table, read_header,
                               save_predictor, select_ranker, summarize_efficiency, training_data)
from tunebench.predict.compiled import divisibility, load_table
from tunebench.predict.evaluation import best_of_top_k, retest_efficiency
from tunebench.predict.head import HEAD_SIZE, LEAF_CHOICES
from tunebench.predict.model import (FINAL_MODELS, INNER_SPLITS, ITERATION_CHOICES, MAX_TRAINING_SPREAD, OBJECTIVES,
                                     PORTFOLIO_CHOICES, SUBSAMPLE_BELOW, SUBSAMPLE_KEEP, TUNING_GRID, RankerSettings,
                                     relative_speed)
from tunebench.predict.protocol import N_SPLITS, dispatch_latency_ms
from tunebench.predict.shortlist import CLASSES, M_STEP, NK_STEP, PER_POINT, SIZE
from tunebench.predict.transfer import SOURCE_ONLY, TARGET_ONLY, transfer_efficiency
from tunebench.tables import markdown_table

REPO = Path(__file__).resolve().parents[1]
DATASET = REPO / "results" / "datasets" / "matmul_bfloat16_h100_prediction.parquet"
OUT = REPO / "results" / "config_prediction"
# The same candidates measured on a second GPU model, when that dataset exists: the transfer section uses it.
TRANSFER_DATASET = REPO / "results" / "datasets" / "matmul_bfloat16_h200_prediction.parquet"
TRANSFER_ADDED_SHAPES = (0, 2, 5, 10)  # second-GPU shapes added to the first GPU's training data
# What Triton 3.6 compiles of each candidate for sm_90 (H100 and H200), per alignment class of N and K.
COMPILED_RESOURCES = REPO / "results" / "datasets" / "matmul_bfloat16_sm90_compiled.csv"
# Every 5th of the first 153 prediction shapes (sorted), all candidates timed again in a later sitting: the
# measurement ceiling.
RETEST_DATASET = REPO / "results" / "datasets" / "matmul_bfloat16_h100_prediction_retest.parquet"
UNHINTED_DATASET = REPO / "results" / "datasets" / "matmul_bfloat16_h100_prediction_unhinted.parquet"
MEASURED_TOP_K = (3, 5, 10)  # "time the model's top k, keep the fastest": efficiency of that, out of fold
# CK Tile's published dispatcher numbers (fp16 on gfx950): mean, P10 and min efficiency over their test shapes.
CK_TILE = {"mean": 0.9936, "p10": 0.9805, "min": 0.9545}
TARGET = 0.99  # fraction of optimum the warm-start comparison counts evaluations to
SEARCH_BUDGET = 200  # unique evaluations per search run at most
TOP_K_SEEDS = 10  # model's top configs measured first by the warm start
SMALL_POPULATION = 30  # the inner strategies' initial population in the "-30" variants (default: 100)
PIPELINES = (*OBJECTIVES, SELECTED)
WORST_SHAPES = 10  # the held-out shapes listed with their pick and measured best
# The nearest-training-shape baseline's distance: |d log2 M| + 0.5 (|d log2 N| + |d log2 K|), and N or K even in one
# shape and odd in the other (vectorized loads or element by element) counts as far as 4 octaves of M.
NEIGHBOUR_WEIGHTS = np.array([1.0, 0.5, 0.5])
VECTORIZATION_MISMATCH = 4.0


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


def search_run(path: str, shape: tuple[int, ...], strategy: str, variant: str, seeds: list[dict], seed: int,
               stop_at_target: bool = True, budget: int = SEARCH_BUDGET) -> dict:
    """Evaluations until TARGET of the shape's recorded optimum (NaN if never within `budget`), one run.
    `variant`: "cold" or "warm" (seeded with `seeds`), then "-30" for an initial population of SMALL_POPULATION or,
    for "warm", "-restart" for `WarmStartSettings.restart` and "-restart-<n>" with a `restart_patience` of n.
    `stop_at_target`: end the run there (what comes after changes no evaluations to it), or run it to `budget`,
    so that `evaluations` counts what it spent before stopping by itself (or at the budget)."""
    from tunebench.search import make_strategy
    from tunebench.search.warm_start import warm_start
    from tunebench.study import Budget, run_search

    with threadpool_limits(1):
        replay = ReplayEvaluator(_dataset(path), shape, seed=seed)
        evaluator = StopAtTarget(replay, TARGET) if stop_at_target else replay
        settings = {"initial_population": SMALL_POPULATION} if variant.endswith("-30") else {}
        if variant.startswith("warm"):
            restart, patience = "-restart" in variant, variant.partition("-restart")[2].removeprefix("-")
            searcher = warm_start(strategy, replay.space, seeds, seed=seed, restart=restart,
                                  restart_patience=int(patience or 0), **settings)
        else:
            searcher = make_strategy(strategy, replay.space, seed=seed, **settings)
        trace = run_search(searcher, evaluator, Budget(evaluations=budget, seconds=1e300))
    fraction = replay.optimum_ms / trace["best_ms"].to_numpy()
    hit = np.flatnonzero(fraction >= TARGET)
    return {"M": shape[0], "N": shape[1], "K": shape[2], "strategy": strategy, "variant": variant, "seed": seed,
            "evals_to_target": float(hit[0] + 1) if hit.size else math.nan, "evaluations": len(trace)}


def baselines(data, folds) -> dict[str, np.ndarray]:
    """Scores of two model-free baselines, out of fold: one config for every shape (the highest mean relative speed
    over the training shapes), and the measured best config of the nearest training shape (NEIGHBOUR_WEIGHTS)."""
    count = len(data.candidates)
    relative = relative_speed(data.latency_ms, data.group).reshape(len(data.shapes), count)
    log2_shapes = np.log2(data.shapes.astype(np.float64))
    even = divisibility(data.shapes[:, 1:]) > 1
    single, nearest = np.zeros((len(data.shapes), count)), np.zeros((len(data.shapes), count))
    for train, test in folds:
        single[test, np.argmax(relative[train].mean(axis=0))] = 1.0
        for index in test:
            distance = (np.abs(log2_shapes[train] - log2_shapes[index]) @ NEIGHBOUR_WEIGHTS
                        + VECTORIZATION_MISMATCH * (even[train] != even[index]).any(axis=1))
            nearest[index, np.argmax(relative[train[np.argmin(distance)]])] = 1.0
    return {"one config for all shapes": single, "best config of the nearest training shape": nearest}


def one_hot(indices: np.ndarray, count: int) -> np.ndarray:
    scores = np.zeros((len(indices), count))
    scores[np.arange(len(indices)), indices] = 1.0
    return scores


def measured_top_k_row(k: int, efficiency: np.ndarray) -> dict[str, str]:
    return {"predictor": f"selected, its top {k} timed on the GPU and the fastest kept",
            "mean": percent(efficiency.mean()), "P10": percent(np.percentile(efficiency, 10)),
            "min": percent(efficiency.min()), "median": percent(np.median(efficiency)), "top-1 hit rate": "n/a",
            "top-5 hit rate": "n/a"}


def retest_text(dataset, retest_path: Path, unhinted_path: Path) -> str:
    """The measurement-ceiling section: each sitting's best judged by the other sitting's timings, per shape. The
    retest predates the kernel's alignment hints: its hinted shapes are judged against their pre-hint timings."""
    if not retest_path.is_file():
        return f"Not measured: no retest dataset at `{os.path.relpath(retest_path, REPO)}`."
    retest = load_dataset(retest_path, kernel="matmul")
    keys = [*dataset.shape_names, *(parameter.name for parameter in dataset.parameters)]
    first = dataset.measurements
    hinted = np.array([matmul.hinted(shape) for shape in first[list(dataset.shape_names)].itertuples(index=False)])
    if hinted.any():
        if not unhinted_path.is_file():
            missing = os.path.relpath(unhinted_path, REPO)
            return f"Not measured: the hinted shapes' pre-hint timings (`{missing}`) are missing."
        first = pd.concat([first[~hinted], load_dataset(unhinted_path, kernel="matmul").measurements])
    table = retest_efficiency(first, retest.measurements, keys)
    hinted_retests = sum(matmul.hinted(shape) for shape in table[list(dataset.shape_names)].itertuples(index=False))
    both = np.concatenate([table["first_best_judged_by_second"], table["second_best_judged_by_first"]])
    rows = [{"judged": name, "mean": percent(values.mean()), "P10": percent(np.percentile(values, 10)),
             "min": percent(values.min()), "median": percent(np.median(values))}
            for name, values in (("first sitting's best, by the second sitting", table["first_best_judged_by_second"]),
                                 ("second sitting's best, by the first sitting", table["second_best_judged_by_first"]),
                                 ("both directions pooled", both))]
    shapes = pd.DataFrame({"M": table["M"], "N": table["N"], "K": table["K"], "configs": table["configs"],
                           "best ms (first sitting)": table["best_ms_first"].map(lambda v: f"{v:.4f}"),
                           "first's best, by the second": table["first_best_judged_by_second"].map(percent),
                           "second's best, by the first": table["second_best_judged_by_first"].map(percent)})
    return f"""`{os.path.relpath(retest_path, REPO)}` times all {int(table['configs'].max())} candidates again on
{len(table)} of the shapes (every 5th of the first 153, sorted), in a later sitting on the same GPU model ({retest.gpu},
{retest.provenance.get('date', '?')}), before the kernel had its alignment hints: its {hinted_retests} hinted shapes are
judged against their first timings without hints (`{os.path.relpath(unhinted_path, REPO)}`), so that both sittings
time the same kernel. A perfect predictor, trained and judged on one sitting, would be credited with the efficiency of
one sitting's best config judged by the other sitting's timings:

{markdown_table(pd.DataFrame(rows))}

Per shape:

{markdown_table(shapes)}

A predictor's efficiency above these figures cannot be told apart from timing noise on this data."""


def percent(value: float) -> str:
    return f"{100 * value:.2f} %"


def mean_p10_min(values: pd.Series) -> str:
    """Efficiencies' mean / P10 / min, in percent."""
    return f"{100 * values.mean():.2f} / {100 * np.percentile(values, 10):.2f} / {100 * values.min():.2f} %"


def efficiency_row(name: str, summary: dict[str, float]) -> dict[str, str]:
    return {"predictor": name, "mean": percent(summary["mean"]), "P10": percent(summary["p10"]),
            "min": percent(summary["min"]), "median": percent(summary["median"]),
            "top-1 hit rate": f"{summary['top1_hit_rate']:.2f}", "top-5 hit rate": f"{summary['top5_hit_rate']:.2f}"}


def fit_deployed(data: TrainingData, objectives: Sequence[str], metrics: dict[str, Any], threads: int,
                 grid: Mapping[str, Sequence[Any]] = TUNING_GRID,
                 shortlist_shapes: Sequence[Sequence[int]] | None = None) -> Predictor:
    """The predictor trained on every shape: the objective (of `objectives`), tree size and iterations (over `grid`)
    chosen on inner splits of all of them, as in each fold; `metrics` (the cross-validation's summary) go into its
    header. `shortlist_shapes`: the only shapes it will be asked about (`fit_predictor`'s), to build its shortlist
    grid around those alone."""
    with threadpool_limits(threads):  # one process: its fits and predictions take every worker's core
        candidates = [select_ranker(data, np.arange(len(data.shapes)), objective, grid=grid)
                      for objective in objectives]
        settings, tuning = max(candidates, key=lambda c: max(t["inner_mean_efficiency"] for t in c[1]["tried"]))
        return fit_predictor(data, settings, out_of_fold_scores=tuning["out_of_fold_scores"],
                             shortlist_shapes=shortlist_shapes, header={"metrics": {
            "protocol": f"GroupKFold({N_SPLITS}) by shape; objective ({', '.join(objectives)}), tree size and "
                        f"iterations chosen on the mean over a seeded partition of each fold's training shapes into "
                        f"{INNER_SPLITS}, then the neighbour correction by leave-one-shape-out on that partition's "
                        f"out-of-fold scores, then the pairwise head's tree size on the same partition",
            **metrics}})


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", type=Path, default=DATASET)
    parser.add_argument("--workers", type=int, default=2, help="processes (each single-threaded)")
    parser.add_argument("--lfbo-seeds", type=int, default=1, help="search seeds per held-out shape for LFBO")
    parser.add_argument("--pattern-seeds", type=int, default=5, help="search seeds per held-out shape for pattern")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--compiled-resources", type=Path, default=COMPILED_RESOURCES,
                        help="the candidates' compiled shared memory and registers (tunebench.predict.compiled)")
    parser.add_argument("--retest-dataset", type=Path, default=RETEST_DATASET,
                        help="some shapes timed again in a later sitting (skipped when the file does not exist)")
    parser.add_argument("--unhinted-dataset", type=Path, default=UNHINTED_DATASET,
                        help="the hinted shapes as first timed, before the kernel's alignment hints")
    parser.add_argument("--transfer-dataset", type=Path, default=TRANSFER_DATASET,
                        help="the same candidates on another GPU (skipped when the file does not exist)")
    args = parser.parse_args()
    command = " ".join([".venv/bin/python", os.path.relpath(os.path.abspath(sys.argv[0]), REPO), *sys.argv[1:]])
    args.out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()

    dataset = load_dataset(args.dataset, kernel="matmul")
    resources = load_table(args.compiled_resources, dataset.parameter_names)
    data = training_data(dataset, resources)
    latency = data.latency_ms.reshape(len(data.shapes), -1)
    count = len(data.candidates)
    print(f"cross-validating on {len(data.shapes)} shapes x {len(data.candidates)} candidates", flush=True)
    cv = cross_validate(data, workers=args.workers)
    cv_s = time.perf_counter() - started

    # -- prediction quality, out of fold ---------------------------------------------------------------------
    tables = {pipeline: per_shape_table(data.shapes, cv.scores(pipeline), latency) for pipeline in PIPELINES}
    dispatch_tables = {pipeline: per_shape_table(data.shapes, one_hot(cv.dispatched(pipeline), count), latency)
                       for pipeline in PIPELINES}
    baseline_tables = {name: per_shape_table(data.shapes, scores, latency)
                       for name, scores in baselines(data, cv.folds).items()}
    names = {"throughput": "HGB on log1p(TFLOPS) + neighbour correction + pairwise head, full ranking",
             "relative": "HGB on latency_best / latency (weighted) + neighbour correction + pairwise head, full ranking",
             SELECTED: "objective chosen per fold on the inner splits + neighbour correction + pairwise head, full "
                       "ranking"}
    rows = [efficiency_row(names[p], summarize_efficiency(tables[p])) for p in PIPELINES]
    without_head = per_shape_table(data.shapes, cv.corrected_scores(SELECTED), latency)
    rows.append(efficiency_row("the same without the pairwise head (model + neighbour correction)",
                               summarize_efficiency(without_head)))
    model_alone = per_shape_table(data.shapes, cv.model_scores(SELECTED), latency)
    rows.append(efficiency_row("the same, the model alone (no correction, no head)", summarize_efficiency(model_alone)))
    first_model = per_shape_table(data.shapes, cv.first_model_scores(SELECTED), latency)
    rows.append(efficiency_row(f"ablation: the full ranking with the first of the {FINAL_MODELS} averaged models only",
                               summarize_efficiency(first_model)))
    first_alone = per_shape_table(data.shapes, cv.first_model_alone(SELECTED), latency)
    rows.append(efficiency_row("ablation: the first model alone (no correction, no head)",
                               summarize_efficiency(first_alone)))
    rows.append(efficiency_row("dispatcher best_config (selected; shortlist + compiled trees)",
                               summarize_efficiency(dispatch_tables[SELECTED])))
    timed_top_k = {k: best_of_top_k(cv.scores(SELECTED), latency, k) for k in MEASURED_TOP_K}
    rows += [measured_top_k_row(k, efficiency) for k, efficiency in timed_top_k.items()]
    rows += [efficiency_row(f"baseline: {name}", summarize_efficiency(table)) for name, table in baseline_tables.items()]
    overall = pd.DataFrame(rows)
    ck = pd.DataFrame([{"predictor": "CK Tile dispatcher (published; fp16, gfx950; their protocol)",
                        "mean": percent(CK_TILE["mean"]), "P10": percent(CK_TILE["p10"]), "min": percent(CK_TILE["min"]),
                        "median": "n/a", "top-1 hit rate": "n/a", "top-5 hit rate": "n/a"}])
    overall = pd.concat([overall, ck], ignore_index=True)
    family_tables = {p: by_family(tables[p]) for p in PIPELINES}
    alignment_tables = {"full ranking": by_alignment(tables[SELECTED]),
                        "`best_config`": by_alignment(dispatch_tables[SELECTED])}
    for group, table in [*(("family", t) for t in family_tables.values()),
                         *(("class", t) for t in alignment_tables.values())]:
        for column in ("mean", "p10", "min", "median"):
            table[column] = table[column].map(percent)
        for column in ("top1_hit_rate", "top5_hit_rate"):
            table[column] = table[column].map(lambda v: f"{v:.2f}")
        table.columns = [group, "shapes", "mean", "P10", "min", "median", "top-1 hit rate", "top-5 hit rate"]
    chosen = pd.DataFrame([{"fold": o.fold, "objective": o.objective, "max_leaf_nodes": o.settings.max_leaf_nodes,
                            "iterations": o.settings.max_iter,
                            "portfolio": o.settings.portfolio_size or "all",
                            "correction (strength, k, class penalty, M scale, weighted)": "off" if not o.correction
                            or not o.correction["strength"] else ", ".join(str(v) for v in o.correction.values()),
                            "head (max_leaf_nodes)": o.head["max_leaf_nodes"] if o.head else "off",
                            "inner validation mean efficiency (mean of the splits)": percent(o.inner_efficiency),
                            "test shapes": len(o.test_shapes)}
                           for o in cv.outcomes[SELECTED]])
    trees = [outcome.settings.max_iter for outcome in cv.outcomes[SELECTED]]
    agreement = float(np.mean(cv.dispatched(SELECTED) == np.argmax(cv.scores(SELECTED), axis=1)))

    # -- the deployed predictor: trained on every shape, objective and settings chosen on inner splits -------
    print("fitting the deployed predictor on every shape", flush=True)
    fit_started = time.perf_counter()
    predictor = fit_deployed(data, OBJECTIVES, summarize_efficiency(tables[SELECTED]), args.workers)
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
        runs = pd.DataFrame(list(tqdm(pool.map(search_run, *zip(*jobs), chunksize=4), total=len(jobs),
                                      desc="warm-start searches", unit="run", mininterval=5.0)))
    search_s = time.perf_counter() - search_started
    write_text_atomically(args.out / "warm_start.csv", runs.to_csv(index=False))
    warm_rows = []
    for (strategy, variant), group in runs.groupby(["strategy", "variant"], sort=False):
        values = group["evals_to_target"].to_numpy()
        per_shape = group.groupby(["M", "N", "K"])["evals_to_target"].median()
        warm_rows.append({
            "strategy": strategy, "variant": variant,
            "runs (shapes x seeds)": f"{len(group)} ({group[['M', 'N', 'K']].drop_duplicates().shape[0]} x "
                                     f"{group['seed'].nunique()})",
            f"median evals to {TARGET}": f"{np.median(np.where(np.isnan(values), np.inf, values)):.0f}",
            # "higher": a run's own count, so that a quarter of runs not reaching the target reads inf, not nan
            "P75": f"{np.percentile(np.where(np.isnan(values), np.inf, values), 75, method='higher'):.0f}",
            f"reached within {SEARCH_BUDGET} (or before the search ended)": f"{np.mean(~np.isnan(values)):.0%}",
            "reached within 20": f"{np.mean(values <= 20):.0%}",
            "median over shapes of per-shape medians": f"{np.median(np.where(np.isnan(per_shape), np.inf, per_shape)):.0f}"})
    warm_table = pd.DataFrame(warm_rows)

    # -- per-shape CSV -------------------------------------------------------------------------------------
    per_shape = tables[SELECTED][["M", "N", "K", "family", "alignment"]].copy()
    for pipeline in PIPELINES:
        per_shape[f"{pipeline}_efficiency"] = tables[pipeline]["efficiency"]
        per_shape[f"{pipeline}_top1_hit"] = tables[pipeline]["top1_hit"]
        per_shape[f"{pipeline}_top5_hit"] = tables[pipeline]["top5_hit"]
    per_shape["dispatcher_efficiency"] = dispatch_tables[SELECTED]["efficiency"]
    per_shape["without_head_efficiency"] = without_head["efficiency"]
    per_shape["model_alone_efficiency"] = model_alone["efficiency"]
    per_shape["first_model_efficiency"] = first_model["efficiency"]
    per_shape["first_model_alone_efficiency"] = first_alone["efficiency"]
    for k, efficiency in timed_top_k.items():
        per_shape[f"{SELECTED}_top{k}_timed_efficiency"] = efficiency
    per_shape["predicted_config"] = [",".join(map(str, data.candidates[i])) for i in tables[SELECTED]["predicted"]]
    per_shape["best_config"] = [",".join(map(str, data.candidates[i])) for i in tables[SELECTED]["best"]]
    per_shape["dispatcher_config"] = [",".join(map(str, data.candidates[i])) for i in cv.dispatched(SELECTED)]
    # The model's top configs, best first (as best_of_top_k orders them): what benchmarks/config_prediction_retime.py
    # times on the GPU.
    top = np.argsort(-cv.scores(SELECTED), axis=1, kind="stable")[:, :max(MEASURED_TOP_K)]
    per_shape[f"top{max(MEASURED_TOP_K)}_configs"] = [";".join(",".join(map(str, data.candidates[i])) for i in row)
                                                     for row in top]
    per_shape["predicted_ms"] = tables[SELECTED]["predicted_ms"]
    per_shape["best_ms"] = tables[SELECTED]["best_ms"]
    per_shape["predicted_row_spread"] = data.spread.reshape(len(shapes), -1)[np.arange(len(shapes)),
                                                                               tables[SELECTED]["predicted"]]
    per_shape["rank_all_ms"] = cv.rank_ms(SELECTED)
    per_shape["dispatch_ms_deployed"] = latencies
    for (strategy, variant), group in runs.groupby(["strategy", "variant"], sort=False):
        medians = group.groupby(["M", "N", "K"])["evals_to_target"].median()
        per_shape[f"{strategy}_{variant}_evals_to_{TARGET}"] = [medians.get(s, math.nan) for s in shapes]
    write_text_atomically(args.out / "per_shape.csv", per_shape.to_csv(index=False))

    # -- transfer to a second GPU: the deployed settings (tuned on this GPU's shapes), scored on the other's -------
    if args.transfer_dataset.is_file():
        target_dataset = load_dataset(args.transfer_dataset, kernel=data.kernel)
        target = training_data(target_dataset, resources)
        print(f"transfer to {target.gpu}", flush=True)
        with threadpool_limits(args.workers):
            transfer = transfer_efficiency(data, target, replace(predictor.ranker.settings, models=1),
                                           TRANSFER_ADDED_SHAPES, N_SPLITS)
        write_text_atomically(args.out / "transfer.csv", transfer.to_csv(index=False))
        order = [SOURCE_ONLY, *(f"source + {k} target shapes" for k in TRANSFER_ADDED_SHAPES if k), TARGET_ONLY]
        transfer_rows = []
        for variant in order:
            values = transfer.loc[transfer["variant"] == variant, "efficiency"].to_numpy()
            transfer_rows.append({"trained on": variant, "mean": percent(values.mean()),
                                  "P10": percent(np.percentile(values, 10)), "min": percent(values.min()),
                                  "median": percent(np.median(values))})
        transfer_table = pd.DataFrame(transfer_rows)
        transfer["alignment"] = [alignment(n, k) for n, k in zip(transfer["N"], transfer["K"])]
        by_class = transfer.pivot_table(index="variant", columns="alignment", values="efficiency", aggfunc="mean")
        class_sizes = transfer[transfer["variant"] == SOURCE_ONLY]["alignment"].value_counts()
        class_table = pd.DataFrame([{"trained on": variant, **{f"{name} ({class_sizes[name]})": percent(by_class.loc[
            variant, name]) for name in ALIGNMENTS if name in class_sizes}} for variant in order])
        common = len({tuple(s) for s in data.shapes.tolist()} & {tuple(s) for s in target.shapes.tolist()})
        transfer_text = f"""Source: this GPU ({data.gpu}, {len(data.shapes)} shapes). Target: {target.gpu} ({len(target.shapes)}
shapes, {common} of them also measured on the source; `{os.path.relpath(args.transfer_dataset, REPO)}`, measured
{target_dataset.provenance.get('date', '?')}). The target's shapes are split GroupKFold({N_SPLITS}); each held-out
target shape is scored on the target's own measurements, by a model trained on the source shapes plus k of the
fold's target training shapes (seeded draw), or on the fold's target training shapes alone. A held-out shape is unseen
on both GPUs: the source's measurements of the fold's test shapes are left out of its training data too. The settings
are the deployed model's, tuned on the source, except that each fit is one model, not an average of {FINAL_MODELS} (to
keep the run's time): no target shape tunes anything. Per shape in `transfer.csv`.

{markdown_table(transfer_table)}

Mean efficiency per alignment class of the target's shapes (shapes per class in brackets):

{markdown_table(class_table)}"""
    else:
        transfer_text = (f"Not measured: no second GPU's dataset at `{os.path.relpath(args.transfer_dataset, REPO)}`. "
                         "The features take the SM count from each dataset's provenance, and a saved predictor "
                         "refuses another GPU at load.")

    # -- summary ------------------------------------------------------------------------------------------
    header = read_header(path)
    disturbed_share = float(np.mean(np.isfinite(data.spread) & (data.spread > MAX_TRAINING_SPREAD)))
    worst = per_shape.nsmallest(WORST_SHAPES, f"{SELECTED}_efficiency")
    worst_table = pd.DataFrame({
        "M": worst["M"], "N": worst["N"], "K": worst["K"], "family": worst["family"],
        "gcd(N, 16), gcd(K, 16)": [f"{math.gcd(n, 16)}, {math.gcd(k, 16)}" for n, k in zip(worst["N"], worst["K"])],
        "efficiency": worst[f"{SELECTED}_efficiency"].map(percent), "predicted config": worst["predicted_config"],
        "its ms": worst["predicted_ms"].map(lambda v: f"{v:.4f}"), "measured best": worst["best_config"],
        "best ms": worst["best_ms"].map(lambda v: f"{v:.4f}")})
    total_s = time.perf_counter() - started
    text = f"""# Config prediction for unseen GEMM shapes (bf16, H100)

Command: `{command}` ({total_s:.0f} s on this machine: cross-validation {cv_s:.0f} s, deployed model {fit_s:.0f} s,
search replays {search_s:.0f} s; cross-validation and replays in {args.workers} single-threaded worker processes, the
deployed model's and the transfer's fits in one process of {args.workers} threads).

Data: `{os.path.relpath(args.dataset, REPO)}`, {len(shapes)} shapes x {count} candidate configs, all valid, measured
on {data.gpu} ({data.hardware.sm_count} SMs; {dataset.provenance.get('date', '?')}). The model picks among the
{count} candidates; efficiency is judged against the best of them.

## Protocol

- **Outer**: GroupKFold({N_SPLITS}) over shapes. Every number below is out of fold: the model that scores a shape
  never saw any measurement of that shape. A test checks that no shape is in both the training and test shapes of
  a fold.
- **Inner**: in each fold, a seeded partition of the training shapes into {INNER_SPLITS} parts (each validated by a
  model fitted on the others; trees of {", ".join(map(str, TUNING_GRID["max_leaf_nodes"]))} leaves, depth at most
  {RankerSettings().max_depth}) chooses, by the mean over the parts, the number of boosting iterations
  ({ITERATION_CHOICES[0]} to {ITERATION_CHOICES[-1]}, read off staged predictions), the
  portfolio (the model picks only among the {", ".join(str(size) for size in PORTFOLIO_CHOICES if size)} configs that
  greedily cover the inner training shapes' near-best configs, or among all {count}) and, for the `selected`
  pipeline, the objective, by the mean efficiency of the picks on the inner validation shapes. The portfolio is then
  chosen again on all of the fold's training shapes. The fold's model is then fitted on all its training shapes as
  the average of {FINAL_MODELS} models seeded apart (each its own subsample of slow rows and its own binning; the inner
  parts fit one; the "ablation" rows score the first of them alone). Then the **neighbour correction**
  (`predict/neighbours.py`): each training shape's residuals (its targets minus the scores of the part's model that
  never saw it) correct a new shape's scores by their mean over its k nearest training shapes (log2 M, N, K and alignment), times a strength; k,
  the distance's class penalty and M scale, inverse-distance weighting and the strength (0: off) are chosen by
  leave-one-shape-out efficiency over the training shapes. Last, the **pairwise head** (`predict/head.py`): on each
  training shape's top {HEAD_SIZE} by those out-of-fold scores, corrected from the other shapes' residuals, a gradient-boosted
  classifier learns which of two listed candidates is faster from the difference of their features and first-stage
  scores; a new shape's top {HEAD_SIZE} are re-ordered by their summed win probabilities. Its tree size
  ({" or ".join(str(leaves) for leaves in LEAF_CHOICES)} leaves) is chosen on the same partition; it is always on
  (docs/config_prediction.md says why). No early stopping or tuning ever looks at the fold being scored.
  The chosen settings per fold are listed below.
- **Training rows**: rows whose repeats spread over more than half their median ((max - min) / median > 0.5:
  {disturbed_share:.2%} of the rows, disturbed timings) get weight 0 in training. Rows slower than {SUBSAMPLE_BELOW:.0%} of
  their shape's best are subsampled for training: each kept with probability {SUBSAMPLE_KEEP} (seeded) and weighted by
  its inverse, which leaves the expected loss unchanged and halves the fits. **Scoring uses every recorded row,
  unfiltered.**
- **Efficiency** of a shape = measured latency of the best of the {count} candidates / measured latency of the
  predicted config (the model's argmax). Mean, P10 (numpy's linear-interpolation 10th percentile over shapes) and
  min over the {len(shapes)} shapes. **Top-1 hit rate**: share of shapes whose predicted config is the measured
  best; **top-5 hit rate**: share whose measured best is among the model's 5 highest-ranked (these are hit rates,
  not NDCG).
- **Families** (one definition, `tunebench.predict.evaluation.FAMILIES`): M < 8, 8 <= M < 128, 128 <= M < 1024,
  M >= 1024.
- **Features** (`tunebench.predict.features`, {len(data.feature_names)} columns, one batch code path): problem (M, N,
  K, their log2, arithmetic intensity, aspect ratios, log2 gcd(N, 16) and gcd(K, 16)), the config space's encoding,
  and interactions (tiles per dimension, programs, last-tile fill, waves on {data.hardware.sm_count} SMs, last-wave
  fraction, K iterations per split, shared memory and registers per thread as Triton {resources.source.get("triton")}
  compiles the candidate for sm_{resources.source.get("capability")} in the shape's alignment class (gcd of N and of K
  with 16: Triton's own specialization, or the kernel's alignment hints of 8, 4 or 2, or odd;
  `{os.path.relpath(args.compiled_resources, REPO)}`; an odd operand usually keeps one shared buffer instead of one per
  stage), programs per SM from shared memory, warps and registers, waves at that occupancy, padding waste, tile
  intensity, split-K workspace traffic, and load instructions per thread, per program and per SM, an operand moving
  gcd(stride, 16) elements per load, at most 8 (16 bytes), and multiply-adds per SM).

## Efficiency on held-out shapes

{markdown_table(overall)}

CK Tile's numbers are theirs, on another GPU, dtype, kernel family and candidate set, under a protocol that early-
stops on the scored fold; they are placed here for orientation, not as a like-for-like comparison. The table above
judges picks by the recorded timings, which are the truth this protocol has: each is the median of up to 30 runs
(see docs/measuring.md for the timing method and the dataset's spread). How far that truth can be trusted is measured in
"Measurement ceiling" below. The "top k timed" rows are not pure prediction: they spend k measurements on the
shape, as a dispatcher that times its shortlist once per new shape would.

### Per family

`selected` pipeline (the one deployed):

{markdown_table(family_tables[SELECTED])}

`throughput` (log1p TFLOPS regression):

{markdown_table(family_tables['throughput'])}

`relative` (the ranking-style challenger):

{markdown_table(family_tables['relative'])}

### Per alignment class

N and K both multiples of 16 (aligned), either odd (odd), or both even with one off multiples of 16 (hinted: the
kernel's alignment hints of 8, 4 or 2 apply); `tunebench.predict.evaluation.alignment`. `selected` pipeline, its full
ranking and the dispatcher:

{markdown_table(alignment_tables['full ranking'])}

{markdown_table(alignment_tables['`best_config`'])}

### What the inner splits chose (`selected`)

{markdown_table(chosen)}

### Where it misses

The {WORST_SHAPES} held-out shapes with the lowest efficiency (`selected`), with the pick and the measured best
(configs as {", ".join(data.space.names)}):

{markdown_table(worst_table)}

## Ranking time and dispatcher

| what | measured (ms) |
| --- | --- |
| rank all {count} candidates: features + sklearn predict, median over held-out shapes | {np.median(cv.rank_ms(SELECTED)):.2f} |
| deployed `best_config(shape)`, median over the {len(shapes)} shapes of each shape's median of 21 calls | {np.median(latencies):.3f} |
| the same, 90th percentile / max over shapes | {np.percentile(latencies, 90):.3f} / {latencies.max():.3f} |

sklearn's HistGradientBoostingRegressor.predict pays a fixed cost per tree per call, whatever the number of rows (the
fold models have {min(trees)}{'' if min(trees) == max(trees) else f' to {max(trees)}'} trees), so ranking all {count} candidates takes
~{np.median(cv.rank_ms(SELECTED)):.0f} ms here, over the 1 ms target. `best_config` instead scores a shortlist with the
same trees walked by a numba-compiled loop (identical predictions, tested) plus the neighbour correction, then re-orders
the shortlist's top {HEAD_SIZE} with the pairwise head (its trees compiled the same way): when it is fitted, the predictor ranks every candidate by its corrected score at each point of a grid of shapes (log2 M in steps of {M_STEP}, log2 N and log2 K in steps of {NK_STEP}, over
the training shapes' range, in each of the {len(CLASSES)} x {len(CLASSES)} alignment classes of N and K:
{loaded.shortlist.top[..., 0].size:,} points) and keeps its top {PER_POINT}; a query's shortlist
merges the lists of the up to 8 grid points around it, in its own alignment class, rank by rank, at most {SIZE}
candidates (median {int(np.median(shortlist_sizes))}). Out of fold (each fold's grid is computed only at the points
its test shapes need: the same lists), the dispatcher returned the full ranking's argmax on {agreement:.1%} of shapes;
its efficiency is in the table above. Timings are wall clock on this shared 2-core machine with one thread.

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

## Measurement ceiling

{retest_text(dataset, args.retest_dataset, args.unhinted_dataset)}

## Transfer across GPUs

{transfer_text}
"""
    write_text_atomically(args.out / "summary.md", text)
    print(text)
    print(json.dumps({"selected": summarize_efficiency(tables[SELECTED])}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
