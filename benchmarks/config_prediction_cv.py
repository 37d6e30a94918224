"""The cross-validation of `config_prediction.py` alone, for one or both objectives: the headline efficiencies, per
alignment class and family, without the deployed fit, the warm-start replays or the transfer (a third of the time).

Run: `.venv/bin/python benchmarks/config_prediction_cv.py --objectives relative` (2,565 s on stop 32's 2-core machine
for 1,465 shapes; `relative` is the objective every fold of the full runs chose). Writes
results/config_prediction/cv.md and cv_per_shape.csv; with `--deployed PATH`, also the predictor fitted on every
shape, as the full benchmark fits it.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from config_prediction import (COMPILED_RESOURCES, DATASET, efficiency_row, fit_deployed, mean_p10_min, one_hot,
                               percent)
from model_projection_shapes import narrow_hinted_draw_end
from unaligned_check_shapes import model_projection_draw_end
from tunebench.files import write_text_atomically
from tunebench.kernels import matmul
from tunebench.measure.dataset import load_dataset
from tunebench.predict import (SELECTED, by_family, cross_validate, load_predictor, per_shape_table, save_predictor,
                               summarize_efficiency, training_data)
from tunebench.predict.compiled import load_table
from tunebench.predict.evaluation import best_of_top_k
from tunebench.predict.model import FINAL_MODELS, OBJECTIVES, TUNING_GRID
from tunebench.predict.protocol import N_SPLITS
from tunebench.predict.split import ALIGNMENT_SPLITS
from tunebench.tables import markdown_table

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "results" / "config_prediction" / "cv.md"
# model_projection_shapes.py's draw: after the hard draws, before the unaligned checks' draw
REAL_MODEL_LAYERS = set(matmul.PREDICTION_SHAPES[narrow_hinted_draw_end():model_projection_draw_end()])
# (column of the per-shape table, label): the deployed pipeline and its ablations, same folds
PIPELINE_ROWS = (("selected", "full ranking: model + neighbour correction + pairwise head"),
                 ("dispatcher", "`best_config` (deployed path: shortlist, compiled trees and head)"),
                 ("without_head", "without the pairwise head"), ("model_alone", "the models alone"),
                 ("first_model", f"ablation: the full ranking with the first of the {FINAL_MODELS} models only"))


def per_shape(cv, latency: np.ndarray) -> pd.DataFrame:
    """One row per shape: its family and class, each pipeline's efficiency, and timing the top 10."""
    data, count = cv.data, latency.shape[1]
    table = per_shape_table(data.shapes, cv.scores(SELECTED), latency)[["M", "N", "K", "family", "alignment"]]
    scores = {"selected": cv.scores(SELECTED), "dispatcher": one_hot(cv.dispatched(SELECTED), count),
              "without_head": cv.corrected_scores(SELECTED), "model_alone": cv.model_scores(SELECTED),
              "first_model": cv.first_model_scores(SELECTED)}
    for name, values in scores.items():
        table[f"{name}_efficiency"] = per_shape_table(data.shapes, values, latency)["efficiency"]
    table["top10_timed_efficiency"] = best_of_top_k(cv.scores(SELECTED), latency, 10)
    table["real_model_layer"] = [tuple(shape) in REAL_MODEL_LAYERS for shape in data.shapes.tolist()]
    return table


def class_table(table: pd.DataFrame) -> pd.DataFrame:
    """Mean / P10 / min of each pipeline per alignment class, and on the real-model layers."""
    groups = [(f"{name} ({(table['alignment'] == name).sum()})", table[table["alignment"] == name])
              for name in ("aligned", "hinted", "odd")]
    groups.append((f"real-model layers ({table['real_model_layer'].sum()})", table[table["real_model_layer"]]))
    rows = []
    for label, members in (group for group in groups if len(group[1])):
        row = {"shapes": label}
        for column, name in PIPELINE_ROWS[:4]:
            row[name] = mean_p10_min(members[f"{column}_efficiency"])
        rows.append(row)
    return pd.DataFrame(rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", type=Path, default=DATASET)
    parser.add_argument("--objectives", nargs="+", choices=OBJECTIVES, default=list(OBJECTIVES))
    parser.add_argument("--workers", type=int, default=2, help="processes (each single-threaded)")
    parser.add_argument("--alignment-split", nargs="+", choices=list(ALIGNMENT_SPLITS), default=["none"],
                        help="first-stage models per group of alignment classes (`predict.split`); several: the "
                             "inner splits choose per fold")
    parser.add_argument("--profile-factors", nargs="+", type=int, default=[0],
                        help="the config profile's components beside the features (`predict.profile`; 0: none); "
                             "several: the inner splits choose per fold")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--deployed", type=Path, default=None,
                        help="also fit the predictor on every shape (as the benchmark does, with these objectives "
                             "only) and save it here, this run's cross-validation in its header")
    args = parser.parse_args()
    command = " ".join([".venv/bin/python", os.path.relpath(os.path.abspath(sys.argv[0]), REPO), *sys.argv[1:]])
    started = time.perf_counter()
    dataset = load_dataset(args.dataset, kernel="matmul")
    data = training_data(dataset, load_table(COMPILED_RESOURCES, dataset.parameter_names))
    latency = data.latency_ms.reshape(len(data.shapes), -1)
    grid = {**TUNING_GRID, "alignment_split": tuple(args.alignment_split),
            "profile_factors": tuple(args.profile_factors)}
    cv = cross_validate(data, objectives=tuple(args.objectives), workers=args.workers, grid=grid)
    table = per_shape(cv, latency)
    csv = args.out.with_name(args.out.stem + "_per_shape.csv")
    write_text_atomically(csv, table.to_csv(index=False))  # first: the tables below are made from it
    rows = [efficiency_row(name, summarize_efficiency(table.assign(efficiency=table[f"{column}_efficiency"],
                                                                   top1_hit=table[f"{column}_efficiency"] == 1,
                                                                   top5_hit=np.nan)))
            for column, name in PIPELINE_ROWS]
    top10 = table["top10_timed_efficiency"]
    rows.append({"predictor": "not pure prediction: the full ranking's top 10 timed, fastest kept",
                 "mean": percent(top10.mean()), "P10": percent(np.percentile(top10, 10)), "min": percent(top10.min()),
                 "median": percent(top10.median()), "top-1 hit rate": "n/a", "top-5 hit rate": "n/a"})
    overall = pd.DataFrame(rows).drop(columns="top-5 hit rate")
    families = by_family(table.rename(columns={"selected_efficiency": "efficiency"}).assign(
        top1_hit=lambda frame: frame["efficiency"] == 1, top5_hit=np.nan))
    chosen = pd.DataFrame([{"fold": o.fold, "objective": o.objective, "alignment split": o.settings.alignment_split,
                            "profile components": o.settings.profile_factors,
                            "trees": o.settings.max_iter,
                            "portfolio": o.settings.portfolio_size or "all",
                            "correction (strength, k, class penalty, M scale, weighted)": ", ".join(
                                str(value) for value in (o.correction or {}).values()) or "off",
                            "head leaves": o.head["max_leaf_nodes"] if o.head else "off",
                            "inner mean efficiency": percent(o.inner_efficiency),
                            "test shapes": len(o.test_shapes), "fit s": round(o.fit_s)}
                           for o in cv.outcomes[SELECTED]])
    text = "\n\n".join([
        "# Config prediction, cross-validation only",
        f"Command: `{command}` ({time.perf_counter() - started:.0f} s, {os.cpu_count()} cores). "
        f"{len(data.shapes)} shapes x {len(data.candidates)} candidates ({data.gpu}), GroupKFold({N_SPLITS}) by "
        f"shape, objectives tried per fold: {', '.join(args.objectives)}; the protocol and pipeline of "
        "`benchmarks/config_prediction.py` (every choice on inner splits of the fold's training shapes), without "
        "its deployed fit, search replays and transfer. Efficiency: the shape's measured best / the pick's.",
        markdown_table(overall),
        "Mean / P10 / min per alignment class and on the real-model layers (`model_projection_shapes.py`):",
        markdown_table(class_table(table)),
        "Full ranking per family:",
        markdown_table(families.assign(**{c: families[c].map(percent) for c in ("mean", "p10", "min", "median")})
                       .drop(columns=["top1_hit_rate", "top5_hit_rate"])),
        "What each fold's inner splits chose:",
        markdown_table(chosen)])
    write_text_atomically(args.out, text + "\n")
    print(text, flush=True)
    if args.deployed is not None:
        print("fitting the deployed predictor on every shape", flush=True)
        fit_started = time.perf_counter()
        summary = summarize_efficiency(per_shape_table(data.shapes, cv.scores(SELECTED), latency))
        predictor = fit_deployed(data, args.objectives, summary, args.workers, grid)
        save_predictor(predictor, args.deployed)
        loaded = load_predictor(args.deployed, kernel=data.kernel, gpu=data.gpu)
        shapes = [tuple(int(v) for v in shape) for shape in data.shapes]
        assert all(loaded.best_config(s) == predictor.best_config(s) for s in shapes), "reloaded predictor differs"
        text += (f"\n\nDeployed predictor: `{os.path.relpath(args.deployed, REPO)}`, fitted on all {len(shapes)} "
                 f"shapes in {time.perf_counter() - fit_started:.0f} s ({predictor.ranker.settings.objective}, "
                 f"{predictor.ranker.settings.max_iter} trees of {predictor.ranker.settings.max_leaf_nodes} leaves, "
                 f"{predictor.ranker.settings.models} models, alignment split "
                 f"{predictor.ranker.settings.alignment_split}, portfolio "
                 f"{predictor.ranker.settings.portfolio_size or 'all'}; head {predictor.head.settings.max_leaf_nodes} "
                 f"leaves, with the neighbour evidence); reloaded, it picks as fitted on every shape.")
        write_text_atomically(args.out, text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
