"""A held-out check decided before it is measured: the deployed predictor's picks for the real-model projection shapes
(`model_projection_shapes.py`), or with `--draw unaligned` for the unaligned ones (`unaligned_check_shapes.py`), or
with `--draw fresh` for both kinds after the whole re-recording (`fresh_check_shapes.py`), are frozen in a file first,
and scored once the GPU has measured every candidate.

Freeze (CPU, seconds): `.venv/bin/python benchmarks/preregistered_picks.py freeze --picks P`, which writes the picks
for the drawn shapes not yet measured to P (never over an existing file) and its .provenance.json (the predictor's
sha256 and the draw). Score (once the
shapes are in the dataset): `.venv/bin/python benchmarks/preregistered_picks.py score`, which writes
results/config_prediction/preregistered.md and, for `config_prediction_retime.py measure --per-shape`,
preregistered_per_shape.csv.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pandas as pd

import fresh_check_shapes
import model_projection_shapes
import unaligned_check_shapes
from tunebench.files import write_text_atomically
from tunebench.kernels import matmul
from tunebench.measure.dataset import Dataset, load_dataset
from tunebench.predict import load_predictor
from tunebench.predict.evaluation import alignment
from tunebench.tables import markdown_table

REPO = Path(__file__).resolve().parents[1]
PREDICTOR = REPO / "results" / "config_prediction" / "matmul_bfloat16_h100.predictor"
DATASET = REPO / "results" / "datasets" / "matmul_bfloat16_h100_prediction.parquet"
PICKS = REPO / "results" / "config_prediction" / "preregistered_picks.csv"
REPORT = REPO / "results" / "config_prediction" / "preregistered.md"
PER_SHAPE = REPO / "results" / "config_prediction" / "preregistered_per_shape.csv"
TOP_K = 10  # the list "top 10 timed" keeps its fastest of
# Each draw's module (its `draw`, `BATCH` and `COUNT`), the index in matmul.PREDICTION_SHAPES its shapes start at, and
# what its scored report is about
DRAWS = {"model_projection": (model_projection_shapes, model_projection_shapes.narrow_hinted_draw_end,
                              "real-model projection shapes"),
         "unaligned": (unaligned_check_shapes, unaligned_check_shapes.model_projection_draw_end,
                       "shapes with N or K off multiples of 16"),
         "fresh": (fresh_check_shapes, fresh_check_shapes.unaligned_draw_end,
                   "real-model layers and shapes with N or K off multiples of 16, alternating")}


def config_text(config: dict[str, int]) -> str:
    return ",".join(str(value) for value in config.values())


def freeze(predictor_path: Path, out: Path, draw_name: str) -> None:
    """Write the `best_config` and full-ranking top TOP_K of every shape of draw `draw_name` not yet in
    `matmul.PREDICTION_SHAPES` (not measured), with the predictor's hash beside them; refuses if the predictor was
    trained on any of them."""
    if out.exists():
        raise SystemExit(f"{out} exists: frozen picks are never overwritten; name another --picks file")
    module, start, _ = DRAWS[draw_name]
    predictor = load_predictor(predictor_path)
    trained_on = {tuple(shape) for shape in predictor.header["training"]["shapes"]}
    drawn = module.draw(set(matmul.PREDICTION_SHAPES[:start()]) | set(matmul.DATASET_SHAPES))
    shapes = [(position, shape) for position, shape in enumerate(drawn) if shape not in matmul.PREDICTION_SHAPES]
    if not shapes:
        raise SystemExit(f"all {len(drawn)} drawn shapes are measured: nothing to freeze; raise COUNT in "
                         f"{module.__name__}.py to continue the draw")
    seen = sorted(trained_on & {shape for _, shape in shapes})
    if seen:
        raise SystemExit(f"the predictor was trained on drawn shapes {seen}")
    rows = [{"M": m, "N": n, "K": k, "batch": position // module.BATCH,
             "best_config": config_text(predictor.best_config((m, n, k))),
             "top10_configs": ";".join(config_text(config) for config in predictor.top_configs((m, n, k), TOP_K))}
            for position, (m, n, k) in shapes]
    out.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomically(out, pd.DataFrame(rows).to_csv(index=False))
    provenance = {"command": " ".join(["python", *sys.argv]), "date": datetime.now(timezone.utc).isoformat(),
                  "draw": draw_name,
                  "predictor": predictor_path.name,
                  "predictor_sha256": hashlib.sha256(predictor_path.read_bytes()).hexdigest(),
                  "predictor_training_shapes": len(trained_on), "config_order": list(predictor.space.names)}
    write_text_atomically(out.with_suffix(".provenance.json"), json.dumps(provenance, indent=1) + "\n")
    print(f"froze {len(rows)} shapes' picks in {out}")


def score(picks_path: Path, dataset: Dataset, dataset_name: str, out: Path, per_shape_out: Path) -> None:
    """Efficiency of the frozen picks against the measured best of every shape `dataset` (the file `dataset_name`) now
    has; the picks and their replay efficiencies also go to `per_shape_out` in the columns of config_prediction.py's
    per_shape.csv that the re-timing reads (`predicted_config` is the full ranking's first, `dispatcher_config` the
    frozen `best_config`), with the shape's alignment class and the frozen `best_config`'s efficiency for
    `cv_side_by_side.py`."""
    picks = pd.read_csv(picks_path)
    provenance = json.loads(picks_path.with_suffix(".provenance.json").read_text())
    measured = set(dataset.shapes())
    names = list(dataset.parameter_names)
    rows, retime_rows = [], []
    for pick in picks.itertuples(index=False):
        shape = (pick.M, pick.N, pick.K)
        if shape not in measured:
            continue
        task = dataset.task(shape)
        latency = {",".join(str(value) for value in key): ms
                   for key, ms in zip(task[names].itertuples(index=False, name=None), task["latency_ms"])}
        best = dataset.optimum_ms(shape)
        top_configs = pick.top10_configs.split(";")
        top = [latency[config] for config in top_configs]
        vendor = np.nan if dataset.vendor_ms(shape) is None else dataset.vendor_ms(shape)
        rows.append({"M": pick.M, "N": pick.N, "K": pick.K, "best_config": best / latency[pick.best_config],
                     "top 1": best / top[0], "top 10 timed": best / min(top),
                     "cuBLAS / pick": vendor / latency[pick.best_config], "cuBLAS / best": vendor / best})
        retime_rows.append({"M": pick.M, "N": pick.N, "K": pick.K, "predicted_config": top_configs[0],
                            "dispatcher_config": pick.best_config,
                            "best_config": min(latency, key=latency.get), "top10_configs": pick.top10_configs,
                            "selected_efficiency": best / top[0], "selected_top10_timed_efficiency": best / min(top),
                            "alignment": alignment(pick.N, pick.K),
                            "dispatcher_efficiency": best / latency[pick.best_config]})
    if not rows:
        raise SystemExit(f"none of the {len(picks)} frozen shapes is measured in {dataset_name}")
    frame = pd.DataFrame(rows)
    summary = [{"pick": column, "mean": f"{frame[column].mean():.2%}",
                "P10": f"{np.percentile(frame[column], 10):.2%}", "min": f"{frame[column].min():.2%}",
                "median": f"{frame[column].median():.2%}"} for column in ("best_config", "top 1", "top 10 timed")]
    worst = frame.sort_values("best_config").head(10)
    command = " ".join([".venv/bin/python", "benchmarks/preregistered_picks.py", *sys.argv[1:]])
    about = DRAWS[provenance.get("draw", "model_projection")][2]  # picks frozen before the draw was named: projections
    text = f"""# Predictions frozen before measurement: {about}

Command: `{command}`. Picks frozen by `{provenance['command']}` on
{provenance['date'][:10]} with `{provenance['predictor']}` (sha256 {provenance['predictor_sha256'][:16]}..., trained on
{provenance['predictor_training_shapes']} shapes), before any of these shapes was measured; scored against
`{dataset_name}`: {len(frame)} of the {len(picks)} drawn shapes measured. Efficiency = the shape's measured best
latency / the pick's; "top 10 timed" keeps the fastest of the frozen top 10 (10 measurements, not pure prediction).
Against cuBLAS on the same bench (cuBLAS latency / the config's): the pick median
{frame['cuBLAS / pick'].median():.3f}x, faster on {int((frame['cuBLAS / pick'] > 1).sum())} of {len(frame)}; the
measured best candidate median {frame['cuBLAS / best'].median():.3f}x, faster on {int((frame['cuBLAS / best'] > 1).sum())}.

{markdown_table(pd.DataFrame(summary))}

The 10 lowest (`best_config`):

{markdown_table(worst.round(4))}
"""
    write_text_atomically(out, text)
    write_text_atomically(per_shape_out, pd.DataFrame(retime_rows).to_csv(index=False))
    print(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("action", choices=("freeze", "score"))
    parser.add_argument("--predictor", type=Path, default=PREDICTOR)
    parser.add_argument("--picks", type=Path, default=PICKS)
    parser.add_argument("--draw", choices=sorted(DRAWS), default="model_projection",
                        help="freeze: the draw whose unmeasured shapes get picks")
    parser.add_argument("--dataset", type=Path, default=DATASET)
    parser.add_argument("--out", type=Path, default=REPORT)
    parser.add_argument("--per-shape-out", type=Path, default=PER_SHAPE)
    args = parser.parse_args()
    if args.action == "freeze":
        freeze(args.predictor, args.picks, args.draw)
    else:
        score(args.picks, load_dataset(args.dataset), args.dataset.name, args.out, args.per_shape_out)


if __name__ == "__main__":
    main()
