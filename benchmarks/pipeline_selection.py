"""Pipeline selection in replay: the coordinate-descent autotuner on a recorded compressed_matmul dataset, its selection
file per (model, GPU), and per batch size each fixed pipeline's best, the autotuned dispatch and uncompressed cuBLAS.

    PYTHONPATH=lib python3 benchmarks/pipeline_selection.py results/datasets/compressed_matmul_bfloat16_h100.parquet

Every latency in the tables is a recorded median of the dataset: a fixed pipeline's best is its fastest recorded config
for the projection (exhaustive over the recording), the dispatch's is the recorded latency of the config the
dispatcher, loaded from the written file, picks; so "the dispatch is at least as fast as the best fixed pipeline" is
measured on the same numbers, not assumed. An MLP step is the sum of its projections' steps (autotune.py says why).
The study is tunebench.kernels.compressed_matmul.selection_study, which notebooks/pipeline_selection.py draws.
Writes results/pipeline_selection/<model>__<gpu>.json (the selection file) and .md, atomically.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import shlex
import statistics
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any, Sequence

import pandas as pd

from tunebench.files import write_text_atomically
from tunebench.kernels.compressed_matmul.autotune import AutotuneSettings, MlpTuning
from tunebench.kernels.compressed_matmul.dispatch import Dispatcher
from tunebench.kernels import complete_config
from tunebench.kernels.compressed_matmul.family import NAME
from tunebench.kernels.compressed_matmul.mlp import MODELS, Mlp
from tunebench.kernels.compressed_matmul.pipelines import PIPELINES
from tunebench.kernels.compressed_matmul.selection_file import SelectionFile, file_name, save_selection
from tunebench.kernels.compressed_matmul.selection_study import (
    VENDOR, mlp_steps, projection_latencies, replay_selection, tuned_batches,
)
from tunebench.measure.dataset import Dataset, load_dataset
from tunebench.measure.replay import MODES
from tunebench.search import NAMES

DEFAULT_DATASET = Path("results/datasets/compressed_matmul_bfloat16_h100.parquet")  # the current kernel's recording
DEFAULT_OUT = Path("results/pipeline_selection")
LOOKUPS = 20_000  # dispatcher calls timed for the per-call cost


def lookup_us(dispatcher: Dispatcher, mlp: Mlp, batches: Sequence[int]) -> float:
    """The dispatcher's median cost per call in microseconds (batches of calls over every projection and batch)."""
    calls = [(p.name, batch) for p in mlp.projections for batch in range(1, 2 * max(batches) + 1)]
    rounds = max(1, LOOKUPS // len(calls))
    samples = []
    for _ in range(rounds):
        started = time.perf_counter()
        for name, batch in calls:
            dispatcher.choose(name, batch)
        samples.append((time.perf_counter() - started) / len(calls) * 1e6)
    return statistics.median(samples)


def _us(ms: float) -> str:
    return f"{ms * 1000:.1f}" if math.isfinite(ms) else "n/a"


def _ratio(numerator: float, denominator: float) -> str:
    return f"{numerator / denominator:.2f}x" if math.isfinite(numerator) and math.isfinite(denominator) else "n/a"


def _describe(config: dict[str, Any]) -> str:
    config = complete_config(NAME, config)  # a config recorded before one of ADDED_PARAMETERS existed
    schedule = "serial" if config["decode_schedule"] == "serial" else f"share {config['decode_sm_percent']} %"
    if config["pipeline"] == "decode_then_cublas":
        return f"decode_then_cublas, {schedule}"
    tile = "x".join(str(config[name]) for name in ("BLOCK_M", "BLOCK_N", "BLOCK_K"))
    split = f"split {config['SPLIT_K']}"
    if config["SPLIT_K"] > 1:
        split += " summed in the kernel" if config["split_reduction"] == "in_kernel" else " summed by launches after it"
    if config["register_cap"] != "none":
        split += {"as_by_launches": " (registers as by launches)",
                  "one_more_program": " (registers for one more program an SM)"}[config["register_cap"]]
    return f"{config['pipeline']}, {tile} {split} w{config['num_warps']} s{config['num_stages']}, {schedule}"


def transfer_text(settings: AutotuneSettings) -> str:
    """How the run transferred between shapes, as the report's first paragraph says it ('' without transfer)."""
    if not settings.transfer:
        return ""
    return ", transfer between shapes" + (" with the picks' neighbours" if settings.neighbours else "")


def markdown(dataset_path: Path, dataset: Dataset, tuning: MlpTuning, settings: AutotuneSettings,
             latencies: pd.DataFrame, lookup: float, selection_path: Path) -> str:
    """The report: the run, the MLP step per batch size, whether the dispatch is at least as fast as the best fixed
    pipeline at every batch size, and the per-projection rows (selection_study.projection_latencies)."""
    batches = sorted(set(latencies["batch"]))
    steps = mlp_steps(latencies)
    exhaustive = sum(len(dataset.task(p.shape(b))) for p in tuning.mlp.projections for b in batches)
    lines = [f"# Pipeline selection: {tuning.mlp.model} on {dataset.gpu}", "",
             f"Replay of `{dataset_path}` (recorded {dataset.provenance.get('date', 'n/a')}). Strategy "
             f"`{settings.strategy}` ({dict(settings.strategy_settings) or 'its defaults'}), "
             f"{settings.evaluations_per_pipeline} evaluations per pipeline run"
             f"{f', a race (probe {settings.probe}, {settings.leaders} go on)' if settings.leaders else ''}"
             f"{transfer_text(settings)}, seed {settings.seed}, threshold "
             f"{settings.threshold}: {tuning.evaluations} evaluations over all rounds (the recording holds "
             f"{exhaustive} configs of these projections and batch sizes), {tuning.search_s:.1f} simulated "
             f"seconds. Selection file: `{selection_path}`; its dispatcher picks in {lookup:.2f} us a call (median, "
             "this CPU).", "",
             "Latencies in microseconds: recorded medians. A fixed pipeline keeps one pipeline for every projection, "
             "each projection at that pipeline's fastest recorded config; the MLP step is the sum over "
             f"{', '.join(p.name for p in tuning.mlp.projections)}.", "",
             "## MLP step per batch size", "",
             f"| batch | {' | '.join(PIPELINES)} | best fixed | autotuned dispatch | best fixed / dispatch | "
             "gain over decode_then_cublas | uncompressed torch.matmul | rounds |",
             "| --- " * (len(PIPELINES) + 7) + "|"]
    slower, gains = [], []
    for bucket in tuning.buckets:
        step = steps.loc[bucket.batch]
        fixed, best, dispatch, vendor = step[list(PIPELINES)], step["best_fixed"], step["dispatch"], step[VENDOR]
        gains.append(f"{_ratio(fixed['decode_then_cublas'], dispatch)} at batch {bucket.batch}")
        if not dispatch <= fixed[best]:
            slower.append(f"batch {bucket.batch} ({_ratio(dispatch, fixed[best])} the time of {best})")
        rounds = f"{len(bucket.round_totals_ms)}{'' if bucket.converged else ' (max)'}"
        lines.append(f"| {bucket.batch} | {' | '.join(_us(fixed[p]) for p in PIPELINES)} | {best} {_us(fixed[best])} "
                     f"| {_us(dispatch)} | {_ratio(fixed[best], dispatch)} | "
                     f"{_ratio(fixed['decode_then_cublas'], dispatch)} | {_us(vendor)} | {rounds} |")
    verdict = f"yes, at all {len(batches)} batch sizes" if not slower else f"no: slower at {', '.join(slower)}"
    lines += ["", f"Autotuned dispatch at least as fast as the best fixed pipeline at every batch size: {verdict}.",
              f"Gain of the autotuned dispatch over always decoding fully (decode_then_cublas): {', '.join(gains)}.",
              "",
              "## Per projection", "",
              f"| projection | batch | {' | '.join(PIPELINES)} | dispatch | dispatch's choice | "
              "uncompressed torch.matmul |", "| --- " * (len(PIPELINES) + 5) + "|"]
    for row in latencies.to_dict("records"):
        lines.append(f"| {row['projection']} | {row['batch']} | {' | '.join(_us(row[p]) for p in PIPELINES)} "
                     f"| {_us(row['dispatch'])} | {_describe(row['config'])} | {_us(row[VENDOR])} |")
    return "\n".join(lines) + "\n"


def parse_setting(text: str) -> tuple[str, Any]:
    """NAME=VALUE, the value read as JSON where it parses (numbers, true/false), else as a string."""
    name, separator, value = text.partition("=")
    if not separator or not name:
        raise argparse.ArgumentTypeError(f"a strategy setting is NAME=VALUE, got {text!r}")
    try:
        return name, json.loads(value)
    except json.JSONDecodeError:
        return name, value


def main(argv: Sequence[str] | None = None) -> int:
    defaults = AutotuneSettings()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dataset", type=Path, nargs="?", default=DEFAULT_DATASET)
    parser.add_argument("--model", choices=sorted(MODELS), default="Llama-3.1-8B")
    parser.add_argument("--strategy", choices=sorted(NAMES), default=defaults.strategy)
    parser.add_argument("--strategy-setting", type=parse_setting, action="append", default=[],
                        metavar="NAME=VALUE", help="override one of the strategy's defaults (repeatable)")
    parser.add_argument("--evaluations-per-pipeline", type=int, default=defaults.evaluations_per_pipeline)
    parser.add_argument("--seed", type=int, default=defaults.seed)
    parser.add_argument("--threshold", type=float, default=defaults.threshold)
    parser.add_argument("--max-rounds", type=int, default=defaults.max_rounds)
    parser.add_argument("--probe", type=int, default=defaults.probe,
                        help="a race among the pipelines (with --leaders > 0): every pipeline's run pauses after this "
                             "many configs")
    parser.add_argument("--leaders", type=int, default=defaults.leaders,
                        help="the race's pipelines that go on (0: no race)")
    parser.add_argument("--transfer", action=argparse.BooleanOptionalAction, default=defaults.transfer,
                        help="seed each pipeline's run with its best configs at the other projections and batch sizes")
    parser.add_argument("--neighbours", action=argparse.BooleanOptionalAction, default=defaults.neighbours,
                        help="with --transfer, also seed the one-move neighbours of the other projections' picks at "
                             "the same batch size")
    parser.add_argument("--mode", choices=MODES, default="deterministic", help="replay mode")
    parser.add_argument("--out-dir", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    if not args.dataset.is_file():
        raise SystemExit(f"no dataset at {args.dataset}: record one on a GPU first, e.g.\n  PYTHONPATH=lib python3 -m "
                         f"tunebench.collect --kernel {NAME} --shapes default --out {args.dataset}")
    dataset = load_dataset(args.dataset, kernel=NAME)
    mlp = MODELS[args.model]
    try:
        batches = tuned_batches(dataset, mlp)
    except ValueError as error:
        raise SystemExit(str(error)) from None
    try:
        settings = AutotuneSettings(strategy=args.strategy, strategy_settings=tuple(args.strategy_setting),
                                    evaluations_per_pipeline=args.evaluations_per_pipeline, seed=args.seed,
                                    threshold=args.threshold, max_rounds=args.max_rounds, probe=args.probe,
                                    leaders=args.leaders, transfer=args.transfer, neighbours=args.neighbours)
    except ValueError as error:
        parser.error(str(error))
    tuning = replay_selection(dataset, mlp, settings, mode=args.mode)
    rounds = max(len(bucket.round_totals_ms) for bucket in tuning.buckets)
    provenance = {
        "dataset": str(args.dataset), "dataset_provenance": dataset.provenance, "replay_mode": args.mode,
        "settings": {**asdict(settings), "strategy_settings": dict(settings.strategy_settings)},
        "seeds": list(range(settings.seed, settings.seed + rounds)),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": shlex.join(["python3", "benchmarks/pipeline_selection.py",
                               *(sys.argv[1:] if argv is None else argv)]),
    }
    selection_path = save_selection(SelectionFile(dataset.gpu, tuning, provenance),
                                    args.out_dir / file_name(mlp.model, dataset.gpu))
    dispatcher = Dispatcher.load(selection_path, model=mlp.model, gpu=dataset.gpu)  # reads back what it wrote
    report = markdown(args.dataset, dataset, tuning, settings, projection_latencies(dataset, mlp, batches, dispatcher),
                      lookup_us(dispatcher, mlp, batches), selection_path)
    report_path = write_text_atomically(selection_path.with_suffix(".md"), report)
    print(report)
    print(f"wrote {selection_path} and {report_path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
