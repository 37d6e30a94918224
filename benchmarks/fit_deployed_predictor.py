"""The deployed predictor alone: fitted on every shape of a dataset as `config_prediction.py` fits it, its header carrying
the metrics of a cross-validation already run on the same shapes (`config_prediction_cv.py`'s per-shape CSV).

Run: `.venv/bin/python benchmarks/fit_deployed_predictor.py --dataset D --cv-per-shape CSV --out P --report R`
(the cross-validation takes an hour on 2 cores; this reuses it instead of running it again).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pandas as pd
from threadpoolctl import threadpool_limits

from config_prediction import COMPILED_RESOURCES, fit_deployed, percent
from tunebench.files import write_text_atomically
from tunebench.measure.dataset import load_dataset
from tunebench.predict import load_predictor, save_predictor, summarize_efficiency, training_data
from tunebench.predict.compiled import load_table
from tunebench.predict.model import OBJECTIVES, TUNING_GRID
from tunebench.predict.protocol import dispatch_latency_ms

REPO = Path(__file__).resolve().parents[1]
CV_COLUMN = "selected_efficiency"  # the full ranking's, as `config_prediction.py` records in the header


def cv_metrics(per_shape: pd.DataFrame, shapes: np.ndarray, source: str) -> dict[str, float | str | int]:
    """The cross-validation's summary of its full ranking, from its per-shape table; refused unless the table covers
    exactly the dataset's shapes (metrics of other shapes would misdescribe the predictor)."""
    missing = {"M", "N", "K", CV_COLUMN} - set(per_shape.columns)
    if missing:
        raise SystemExit(f"{source}: no column {sorted(missing)}; expected config_prediction_cv.py's per-shape CSV")
    table_shapes = {tuple(map(int, row)) for row in per_shape[["M", "N", "K"]].to_numpy()}
    data_shapes = {tuple(map(int, row)) for row in shapes}
    if table_shapes != data_shapes:
        raise SystemExit(f"{source} scores {len(table_shapes)} shapes, the dataset has {len(data_shapes)}; "
                         f"{len(data_shapes - table_shapes)} of the dataset's are not in it and "
                         f"{len(table_shapes - data_shapes)} of its are not in the dataset: cross-validate this dataset")
    efficiency = per_shape[CV_COLUMN]
    return {**summarize_efficiency(pd.DataFrame({"efficiency": efficiency, "top1_hit": efficiency >= 1.0})),
            "source": source}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", type=Path, required=True)
    parser.add_argument("--cv-per-shape", type=Path, required=True,
                        help="config_prediction_cv.py's per-shape CSV for the same dataset")
    parser.add_argument("--objectives", nargs="+", choices=OBJECTIVES, default=["relative"])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", type=Path, required=True, help="the predictor file to write")
    parser.add_argument("--report", type=Path, required=True, help="a markdown note of the fit")
    args = parser.parse_args()
    command = " ".join([".venv/bin/python", os.path.relpath(os.path.abspath(sys.argv[0]), REPO), *sys.argv[1:]])
    started = time.perf_counter()
    dataset = load_dataset(args.dataset, kernel="matmul")
    data = training_data(dataset, load_table(COMPILED_RESOURCES, dataset.parameter_names))
    metrics = cv_metrics(pd.read_csv(args.cv_per_shape), data.shapes, os.path.relpath(args.cv_per_shape, REPO))
    print(f"fitting the deployed predictor on {len(data.shapes)} shapes x {len(data.candidates)} candidates", flush=True)
    predictor = fit_deployed(data, args.objectives, metrics, args.threads, TUNING_GRID)
    fit_s = time.perf_counter() - started
    save_predictor(predictor, args.out)
    loaded = load_predictor(args.out, kernel=data.kernel, gpu=data.gpu)
    shapes = [tuple(int(v) for v in shape) for shape in data.shapes]
    with threadpool_limits(1):
        picks = [loaded.best_config(shape) for shape in shapes]
        latencies = np.array([dispatch_latency_ms(loaded, shape) for shape in shapes])
    if picks != [predictor.best_config(shape) for shape in shapes]:
        raise SystemExit("the reloaded predictor picks otherwise than the fitted one")
    latency = data.latency_ms.reshape(len(shapes), -1)
    index = {tuple(map(int, c)): i for i, c in enumerate(data.candidates)}
    picked = np.array([index[tuple(int(pick[name]) for name in data.space.names)] for pick in picks])
    in_sample = latency.min(axis=1) / latency[np.arange(len(shapes)), picked]
    settings = predictor.ranker.settings
    text = "\n\n".join([
        "# The deployed predictor",
        f"Command: `{command}` ({time.perf_counter() - started:.0f} s, of which the fit {fit_s:.0f} s, "
        f"{os.cpu_count()} cores). Trained on all {len(shapes)} shapes x {len(data.candidates)} candidates of "
        f"`{os.path.relpath(args.dataset, REPO)}` ({data.gpu}); saved to `{os.path.relpath(args.out, REPO)}` "
        f"({args.out.stat().st_size / 2**20:.1f} MiB) and reloaded with its schema check.",
        f"Chosen on inner splits of every shape: objective {settings.objective}, {settings.max_iter} trees of "
        f"{settings.max_leaf_nodes} leaves, {settings.models} models, portfolio {settings.portfolio_size or 'all'}; "
        f"neighbour correction {asdict(loaded.correction.settings) if loaded.correction else 'off'}; pairwise head "
        f"{predictor.head.settings.max_leaf_nodes if predictor.head else 'off'}.",
        f"Its header's metrics, from the cross-validation of the same shapes (`{metrics['source']}`, the full "
        f"ranking, held-out shapes): mean {percent(metrics['mean'])}, P10 {percent(metrics['p10'])}, min "
        f"{percent(metrics['min'])}.",
        f"`best_config` on its own training shapes (in sample, not a measure of prediction): mean "
        f"{percent(in_sample.mean())}, P10 {percent(np.percentile(in_sample, 10))}, min {percent(in_sample.min())}. "
        f"Its latency on this machine, one thread: median {np.median(latencies):.3f} ms, max "
        f"{latencies.max():.3f} ms over the {len(shapes)} shapes."])
    write_text_atomically(args.report, text + "\n")
    print(text, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
