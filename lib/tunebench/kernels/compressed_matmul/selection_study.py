"""The pipeline-selection study on a recorded compressed_matmul dataset, shared by benchmarks/pipeline_selection.py and
notebooks/pipeline_selection.py: the autotuner in replay, then per batch size and projection each fixed pipeline's best
recorded step beside the autotuned dispatch's and uncompressed torch.matmul's; and the measured preprocess/matmul split
that benchmarks/compressed_pipelines.py writes (the dataset records whole steps only).

Latencies are recorded medians in milliseconds, inf where nothing ran ok. A fixed pipeline's best is its fastest
recorded config for the projection (exhaustive over the recording); the dispatch's is the recorded latency of the config
the dispatcher picks. An MLP step is the sum of its projections' steps (autotune.py says why).
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import pandas as pd

from tunebench.kernels.compressed_matmul.autotune import AutotuneSettings, MlpTuning, ReplayStepEvaluators, autotune
from tunebench.kernels.compressed_matmul.dispatch import Dispatcher
from tunebench.kernels.compressed_matmul.mlp import Mlp
from tunebench.kernels.compressed_matmul.pipelines import PIPELINES
from tunebench.measure.dataset import Dataset
from tunebench.measure.result import Status

VENDOR = "vendor"  # the column of uncompressed torch.matmul (cuBLAS) on the BF16 weight


def tuned_batches(dataset: Dataset, mlp: Mlp) -> list[int]:
    """The batch sizes recorded for every projection of the MLP; a ValueError lists the recorded shapes if none."""
    recorded = dataset.shapes()
    per_projection = [{m for m, n, k in recorded if (n, k) == (p.out_features, p.in_features)} for p in mlp.projections]
    batches = sorted(set.intersection(*per_projection))
    if not batches:
        shapes = {p.name: (p.out_features, p.in_features) for p in mlp.projections}
        raise ValueError(f"the dataset records no batch size for all of {mlp.model}'s projections (N, K) {shapes}; "
                         f"recorded shapes (M, N, K): {recorded}")
    return batches


def replay_selection(dataset: Dataset, mlp: Mlp, settings: AutotuneSettings = AutotuneSettings(), *,
                     mode: str = "deterministic") -> MlpTuning:
    """The autotuner in replay on `dataset` at every batch size in tuned_batches (replay noise seeded by
    settings.seed in the noisy mode)."""
    evaluators = ReplayStepEvaluators(dataset, mode=mode, seed=settings.seed)
    return autotune(mlp, tuned_batches(dataset, mlp), evaluators, settings)


def recorded_ms(dataset: Dataset, shape: tuple[int, int, int]) -> dict[tuple, float]:
    """The recorded median latency of every config that ran ok on `shape`, by config key."""
    task = dataset.task(shape)
    task = task[task["status"] == Status.OK.value]
    keys = zip(*(task[name].tolist() for name in dataset.parameter_names))
    return dict(zip(keys, task["latency_ms"].tolist()))


def projection_latencies(dataset: Dataset, mlp: Mlp, batches: Sequence[int], dispatcher: Dispatcher) -> pd.DataFrame:
    """A row per (batch, projection), batches in the given order and projections in the MLP's: one column per
    pipeline (its best recorded step), `dispatch` (the recorded step of the dispatcher's pick), `config` (that pick)
    and `vendor` (torch.matmul on the uncompressed weight); milliseconds, inf where nothing ran ok."""
    pipeline_at = dataset.parameter_names.index("pipeline")
    rows = []
    for batch in batches:
        for projection in mlp.projections:
            shape = projection.shape(batch)
            latencies = recorded_ms(dataset, shape)
            fixed = {pipeline: min((ms for key, ms in latencies.items() if key[pipeline_at] == pipeline),
                                   default=math.inf) for pipeline in PIPELINES}
            selection = dispatcher.choose(projection.name, batch)
            key = tuple(selection.config[name] for name in dataset.parameter_names)
            vendor = dataset.vendor_ms(shape)
            rows.append({"batch": batch, "projection": projection.name, **fixed,
                         "dispatch": latencies.get(key, math.inf), "config": dict(selection.config),
                         VENDOR: math.inf if vendor is None else vendor})
    return pd.DataFrame(rows, columns=["batch", "projection", *PIPELINES, "dispatch", "config", VENDOR])


def mlp_steps(latencies: pd.DataFrame) -> pd.DataFrame:
    """Per batch size (the index, in the order of `latencies`): the MLP step of each fixed pipeline, of the dispatch
    and of the vendor library, each the sum over the projections (ms); `best_fixed` names the fastest fixed pipeline,
    the first in PIPELINES on a tie."""
    columns = [*PIPELINES, "dispatch", VENDOR]
    rows = {}
    for batch, group in latencies.groupby("batch", sort=False):
        rows[batch] = {column: sum(group[column].tolist()) for column in columns}
    steps = pd.DataFrame.from_dict(rows, orient="index", columns=columns)
    steps.index.name = "batch"
    steps["best_fixed"] = [min(PIPELINES, key=lambda pipeline: row[pipeline]) for _, row in steps.iterrows()]
    return steps


CHAIN_CONTENDERS = {"dispatched": "chain as dispatched", "serial": "chain, every decode before its matmul"}
CHAIN_PASSES = {CHAIN_CONTENDERS["dispatched"]: "pass as dispatched",  # the benchmark's contender names: labels
                CHAIN_CONTENDERS["serial"]: "pass, decodes serial", "uncompressed pass": "uncompressed pass"}


def chain_table(rounds: pd.DataFrame) -> pd.DataFrame:
    """benchmarks/compressed_mlp_chain.py's rounds (batch, round, contender, latency_us) as one row per batch (the
    index): the median over rounds of each pass timed whole, of the activation, and of the steps timed alone, summed
    (the dispatch's picks; cuBLAS's matmuls), in µs."""
    medians = rounds.groupby(["batch", "contender"]).latency_us.median().unstack()
    cublas = [name for name in medians.columns if name.endswith(" uncompressed alone")]
    picks = [name for name in medians.columns if name.endswith(" alone") and name not in cublas
             and name != "activation alone"]
    return pd.DataFrame({"steps alone, summed": medians[picks].sum(axis=1),
                         "activation alone": medians["activation alone"],
                         **{label: medians[name] for name, label in CHAIN_PASSES.items()},
                         "cuBLAS steps alone, summed": medians[cublas].sum(axis=1)})


def dispatch_gains(steps: pd.DataFrame) -> pd.DataFrame:
    """Per batch size: each fixed pipeline's MLP step and the vendor library's over the dispatch's (x faster the
    dispatch is; below 1 where it is slower, as against uncompressed cuBLAS)."""
    return steps[[*PIPELINES, VENDOR]].div(steps["dispatch"], axis=0)


def winners(latencies: pd.DataFrame) -> pd.DataFrame:
    """Per (batch, projection): the fastest pipeline (`winner`, the first in PIPELINES on a tie) and its step
    `winner_ms`, the second fastest (`runner_up`, `runner_up_ms`), the `margin` (runner-up step / winner step, >= 1;
    inf where only one pipeline ran, nan where none did) and the pipeline the dispatch picked."""
    rows = []
    for row in latencies.itertuples(index=False):
        values = row._asdict()
        ranked = sorted(PIPELINES, key=lambda pipeline: values[pipeline])  # stable: PIPELINES order on a tie
        winner, runner_up = ranked[0], ranked[1]
        rows.append({"batch": row.batch, "projection": row.projection, "winner": winner,
                     "winner_ms": values[winner], "runner_up": runner_up, "runner_up_ms": values[runner_up],
                     "margin": values[runner_up] / values[winner], "dispatch_pipeline": row.config["pipeline"]})
    return pd.DataFrame(rows)


@dataclass(frozen=True)
class MeasuredSplit:
    """benchmarks/compressed_pipelines.py's measurement: a row per (projection, batch, pipeline) in `table` with
    preprocess_ms (decoding at 100 % of the SMs; 0 for direct_palette), matmul_ms (best of a short candidate list),
    serial_ms (their sum), overlapped_ms (one prefetching step at the best SM share, overlapped_sm_percent) and the
    shape's cublas_ms; the GPU, the date and the command that wrote it."""

    table: pd.DataFrame
    gpu: str
    date: str
    command: str


SPLIT_COLUMNS = ("projection", "batch", "pipeline", "preprocess_ms", "matmul_ms", "serial_ms", "overlapped_ms",
                 "overlapped_sm_percent", "cublas_ms")


def read_split(path: str | os.PathLike[str], *, gpu: str | None = None) -> MeasuredSplit:
    """The split in the JSON file that benchmarks/compressed_pipelines.py wrote; with `gpu`, a ValueError unless it
    was measured on that GPU."""
    report: Mapping[str, Any] = json.loads(Path(path).read_text(encoding="utf-8"))
    measured_on = report["provenance"]["gpu_name"]
    if gpu is not None and measured_on != gpu:
        raise ValueError(f"{path} was measured on {measured_on!r}, not {gpu!r}")
    rows = [{"projection": row["projection"], "batch": row["M"], "pipeline": pipeline, **{
        name: timing[name] for name in ("preprocess_ms", "matmul_ms", "serial_ms", "overlapped_ms",
                                        "overlapped_sm_percent")}, "cublas_ms": row["cublas_ms"]}
            for row in report["rows"] for pipeline, timing in row["pipelines"].items()]
    return MeasuredSplit(pd.DataFrame(rows, columns=SPLIT_COLUMNS), measured_on,
                         report["provenance"].get("date", "n/a"), report.get("command", "n/a"))


# ---------------------------------------------------------------------------------------------
# Headlines: one sentence each, from the numbers
# ---------------------------------------------------------------------------------------------

def _batch_range(batches: Sequence[int]) -> str:
    return f"batch {batches[0]}" if len(batches) == 1 else f"batches {batches[0]}-{batches[-1]}"


def _where_each_wins(table: pd.DataFrame) -> str:
    """"A at batches 1-64; B (gate, up), C (down) at batch 256": runs of batch sizes with the same winner per
    projection, from a table with batch, projection and winner columns."""
    projections = list(dict.fromkeys(table["projection"]))
    runs: list[tuple[list[int], tuple[str, ...]]] = []
    for batch, group in table.groupby("batch", sort=False):
        winners_here = tuple(group.set_index("projection").loc[projections, "winner"])
        if runs and runs[-1][1] == winners_here:
            runs[-1][0].append(batch)
        else:
            runs.append(([batch], winners_here))
    parts = []
    for batches, winners_here in runs:
        by_pipeline = {pipeline: [name for name, won in zip(projections, winners_here) if won == pipeline]
                       for pipeline in dict.fromkeys(winners_here)}
        who = ", ".join(pipeline if len(by_pipeline) == 1 else f"{pipeline} ({', '.join(names)})"
                        for pipeline, names in by_pipeline.items())
        parts.append(f"{who} at {_batch_range(batches)}")
    return "; ".join(parts)


def winner_summary(table: pd.DataFrame) -> str:
    """Where each pipeline wins, the narrowest margin and whether the dispatch picked the winner everywhere; `table`
    is winners()."""
    narrowest = table.loc[table["margin"].idxmin()]
    missed = table[table["dispatch_pipeline"] != table["winner"]]
    dispatch = ("the dispatch picked the winner everywhere" if missed.empty else
                "the dispatch missed the winner at " + ", ".join(f"{row.projection} batch {row.batch}"
                                                                  for row in missed.itertuples()))
    return (f"Fastest pipeline: {_where_each_wins(table)}. Narrowest margin {narrowest['margin']:.2f}× "
            f"({narrowest['projection']} at batch {narrowest['batch']}, {narrowest['winner']} over "
            f"{narrowest['runner_up']}); {dispatch}.")


def gain_summary(steps: pd.DataFrame) -> str:
    """Whether the dispatch's MLP step is at least as fast as the best fixed pipeline's at every batch size, the most
    it gains over each fixed pipeline and what compression costs against uncompressed torch.matmul; `steps` is
    mlp_steps()."""
    gains = dispatch_gains(steps)
    best_fixed = gains[list(PIPELINES)].min(axis=1)
    slower = best_fixed[best_fixed < 1]
    verdict = ("at least as fast as the best fixed pipeline at every batch size" if slower.empty else
               "slower than the best fixed pipeline at " + ", ".join(f"batch {batch} ({1 / gain:.2f}× its time)"
                                                                    for batch, gain in slower.items()))
    most = ", ".join(f"{pipeline} {gains[pipeline].max():.2f}× (batch {gains[pipeline].idxmax()})"
                     for pipeline in PIPELINES)
    cost = 1 / gains[VENDOR]  # the dispatch's time / uncompressed torch.matmul's
    faster = ", ".join(str(batch) for batch in cost[cost < 1].index)
    against_vendor = f"faster at batch {faster}" if faster else "slower at every batch size"
    return (f"The autotuned dispatch is {verdict}. Its largest gain over each fixed pipeline: {most}. Against "
            f"uncompressed torch.matmul (cuBLAS on the BF16 weight) it is {against_vendor}: {cost.min():.2f}× to "
            f"{cost.max():.2f}× its time.")


def split_summary(split: pd.DataFrame) -> str:
    """How much of each decoding pipeline's serial time is preprocessing, and how the fastest compressed pipeline
    compares with cuBLAS; `split` is MeasuredSplit.table."""
    decoding = split[split["preprocess_ms"] > 0]
    share = (decoding["preprocess_ms"] / decoding["serial_ms"]).groupby(decoding["pipeline"], sort=False)
    shares = ", ".join(f"{pipeline} {low:.0%}-{high:.0%}" for pipeline, (low, high)
                       in share.agg(["min", "max"]).iterrows())
    cells = split.groupby(["projection", "batch"], sort=False)
    fastest = split.loc[cells["serial_ms"].idxmin(), ["projection", "batch", "pipeline", "serial_ms", "cublas_ms"]]
    ratio = fastest["serial_ms"] / fastest["cublas_ms"]
    return (f"Preprocessing's share of the serial time: {shares}. Fastest run serially: "
            f"{_where_each_wins(fastest.rename(columns={'pipeline': 'winner'}))}; it takes {ratio.min():.1f}× to "
            f"{ratio.max():.1f}× cuBLAS's time on the uncompressed weight.")
