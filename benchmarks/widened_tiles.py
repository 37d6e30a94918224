"""The TMA GEMM's widened tiles (WIDEN: 1.5 x BLOCK_N columns) against the recorded sweep's best config and cuBLAS at
the prefill-sized layers, timed again in shuffled rounds with cuBLAS in each round.

WIDEN (`matmul_tma.tile_columns`) joined the space after the sweep
(`results/datasets/matmul_tma_bfloat16_h200_mid.parquet`), which holds none; these configs were timed before it joined,
so here in this process with the default timing policy rather than through the bench's workers, which then took only the
space's configs. Each is checked against an fp32 reference first. First, anywhere: `.venv/bin/python
benchmarks/widened_tiles.py --write-plan results/matmul_tma/widened/rounds_plan.csv`. Then on an H200: `PYTHONPATH=lib
python3 benchmarks/widened_tiles.py --plan results/matmul_tma/widened/rounds_plan.csv --out
results/matmul_tma/widened/rounds_h200.csv` (a killed run resumes by round). Then anywhere: `.venv/bin/python
benchmarks/widened_tiles.py --summarize --out results/matmul_tma/widened/rounds_h200.csv`, which writes the tables
beside it (`.md`).
"""

from __future__ import annotations

import random
import statistics
from pathlib import Path

import pandas as pd

from tunebench.files import write_text_atomically
from tunebench.kernels import complete_config, matmul_tma
from tunebench.measure.dataset import load_dataset
from tunebench.measure.rounds import rounds_command
from tunebench.measure.timing import TimingPolicy
from tunebench.tables import markdown_table

REPO = Path(__file__).resolve().parents[1]
DATASET = REPO / "results/datasets/matmul_tma_bfloat16_h200_mid.parquet"
ROUNDS = 8
SHAPE = ["M", "N", "K"]
# Widened configs tried at every shape: 128 x 192 tiles a program each (the fastest of a scratch run at 768 x 4096 x
# 14336), with fewer stages, two warp groups, and persistent; and 64 x 192 and 128 x 96 tiles.
WIDE = dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, GROUP_M=8, PROGRAMS_PER_SM=0, WARP_SPECIALIZE=False, FLATTEN=False,
            EPILOGUE_SPLIT=2, WIDEN=True, num_warps=4, num_stages=4)
WIDENED = (WIDE, dict(WIDE, num_stages=3), dict(WIDE, num_warps=8), dict(WIDE, PROGRAMS_PER_SM=1, FLATTEN=True),
           dict(WIDE, BLOCK_M=64, num_stages=5), dict(WIDE, BLOCK_N=64, num_stages=5))


def plan(dataset_path: Path) -> pd.DataFrame:
    """Per shape of the sweep: its fastest config (WIDEN False) and every widened config, labelled."""
    dataset = load_dataset(dataset_path, kernel="matmul_tma")
    space = matmul_tma.config_space()
    rows = []
    for shape in dataset.shapes():
        task = dataset.task(shape)
        best = task[task.status == "ok"].sort_values("latency_ms", kind="stable").head(1)
        rows.append({**dict(zip(SHAPE, shape)), "candidate": "the sweep's best",
                     **best[list(dataset.parameter_names)].to_dict("records")[0], "WIDEN": False})
        for config in WIDENED:
            space.check(complete_config("matmul_tma", config))  # timed before TALL joined the space: not tall
            columns = matmul_tma.tile_columns(config)
            label = f"widened {config['BLOCK_M']}x{columns}, {config['num_warps']} warps, {config['num_stages']} stages"
            rows.append({**dict(zip(SHAPE, shape)), "candidate": label + (
                f", {config['PROGRAMS_PER_SM']} program per SM" if config["PROGRAMS_PER_SM"] else ""), **config})
    return pd.DataFrame(rows)


def time_plan(out: Path, configs: pd.DataFrame, seed: int) -> None:
    """Time the plan's configs and cuBLAS in ROUNDS rounds on this machine's GPU, each config once a round in a seeded
    shuffled order and cuBLAS before them in even rounds and after them in odd ones, appending each finished round to
    `out` (a killed run resumes by round). A config that fails to compile or run is recorded as error, and one whose
    output misses the reference as wrong_result; neither is timed."""
    import torch

    from tunebench.measure.timing import Timer

    names = [name for name in configs.columns if name not in (*SHAPE, "candidate")]
    done = pd.read_csv(out) if out.exists() else pd.DataFrame(columns=["round"])
    timer, gpu, shuffle = Timer(TimingPolicy()), torch.cuda.get_device_name(0), random.Random(seed)
    for round_index in range(ROUNDS):
        orders = {shape: shuffle.sample(range(len(group)), len(group))
                  for shape, group in configs.groupby(SHAPE, sort=False)}
        if (done["round"] == round_index).any():
            continue
        rows = []
        for shape, group in configs.groupby(SHAPE, sort=False):
            inputs = matmul_tma.make_inputs(tuple(int(value) for value in shape), "bfloat16")
            expected = matmul_tma.reference(inputs)
            timed = [("cuBLAS", None), *((row.candidate, {name: row[name] for name in names})
                                         for _, row in group.iloc[orders[shape]].iterrows())]
            if round_index % 2:
                timed = timed[1:] + timed[:1]
            for candidate, config in timed:
                run = (lambda: matmul_tma.run_vendor(inputs)) if config is None else (
                    lambda config=config: matmul_tma.run(config, inputs))
                inputs.out.fill_(float("nan"))
                try:
                    run()
                    status = "ok" if matmul_tma.relative_error(inputs.out, expected) <= matmul_tma.TOLERANCE[
                        "bfloat16"] else "wrong_result"
                except Exception as error:  # noqa: BLE001 (a compile or launch failure is a result to record)
                    status = f"error: {type(error).__name__}: {str(error)[:200]}"
                rows.append({**dict(zip(SHAPE, shape)), "candidate": candidate, "round": round_index,
                             "kind": "vendor" if config is None else "config", "status": status,
                             "latency_ms": statistics.median(timer.time(run)) if status == "ok" else float("nan"),
                             "gpu": gpu})
        done = pd.DataFrame(rows) if done.empty else pd.concat([done, pd.DataFrame(rows)], ignore_index=True)
        write_text_atomically(out, done.to_csv(index=False))
        print(f"round {round_index + 1} of {ROUNDS}: {len(rows)} timings", flush=True)


def summarize(out: Path, command: str) -> str:
    timings = pd.read_csv(out)
    timings[SHAPE] = timings[SHAPE].astype(int)  # the H200's timings were written with shapes as floats
    ok = timings[timings.status == "ok"]
    vendor = ok[ok.kind == "vendor"].set_index([*SHAPE, "round"]).latency_ms
    configs = ok[ok.kind == "config"].join(vendor.rename("cublas_ms"), on=[*SHAPE, "round"])
    configs = configs.assign(ratio=configs.cublas_ms / configs.latency_ms)
    table = (configs.groupby([*SHAPE, "candidate"], sort=False)
             .agg(median_ms=("latency_ms", "median"), rounds=("round", "nunique"), vs_cublas=("ratio", "median"),
                  lowest=("ratio", "min"), highest=("ratio", "max")).reset_index())
    table["cuBLAS median ms"] = table.join(vendor.groupby(SHAPE).median().rename("cublas"), on=SHAPE).cublas
    table = (table.sort_values([*SHAPE, "vs_cublas"], ascending=[True, True, True, False])
             .rename(columns={"vs_cublas": "vs cuBLAS, median of rounds"}).round(4))
    return "\n\n".join([
        "# The TMA GEMM's widened tiles against the sweep's best and cuBLAS, in rounds", f"Command: `{command}`",
        f"The timings: `{out.relative_to(REPO) if out.is_relative_to(REPO) else out}` on {timings.gpu.iloc[0]}: per "
        f"shape, the recorded sweep's fastest config and {len(WIDENED)} widened ones, {ROUNDS} rounds, each round "
        "every config once in a seeded shuffled order (the default timing policy) and cuBLAS once, before the "
        "configs in even rounds and after them in odd ones. A config's speed against cuBLAS: the median over rounds "
        "of cuBLAS's ms / its ms in the same round (lowest and highest round beside it); per shape, fastest first.",
        markdown_table(table),
    ]) + "\n"


def main() -> int:
    return rounds_command(__doc__.split("\n\n")[0], REPO, DATASET, plan, time_plan, summarize)


if __name__ == "__main__":
    raise SystemExit(main())
