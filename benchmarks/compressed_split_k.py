"""The palette matmul's split-K in one launch (stop 92: `split_k.add_split`) against its three launches: stop 91's
code (the workspace zeroed before the kernel and cast into the output after it) with `--before`, else today's
`split_reduction="separate_launches"`; side by side in shuffled rounds with cuBLAS on the uncompressed weight, at the
Llama-3.1-8B MLP's decode-sized shapes.

First, anywhere: `.venv/bin/python benchmarks/compressed_split_k.py --write-plan PLAN.csv --datasets A.parquet ...`
(per shape, each dataset's TOP fastest direct_palette split configs). The code before: `mkdir -p BEFORE && git show
fa686e1:lib/tunebench/kernels/compressed_matmul/reconstruct.py > BEFORE/reconstruct.py`. Then on a GPU:
`PYTHONPATH=lib python3 benchmarks/compressed_split_k.py --plan PLAN.csv --before BEFORE --out OUT.csv` (the summary
goes beside it as `.md`; `--summarize --out OUT.csv` writes it again, anywhere). Without `--before` it times today's
two ways.
"""

from __future__ import annotations

import argparse
import functools
import json
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

import pandas as pd

from split_k_epilogue import _module, _plain, add_rounds_arguments, read_or_time
from tunebench.files import write_text_atomically
from tunebench.measure.probe_rounds import Contender, checked_contenders, contender_summary, time_contenders
from tunebench.split_k_rounds import ONE, launches_table
from tunebench.tables import markdown_table

SHAPES = tuple((batch, n, k) for batch in (1, 16, 64) for n, k in ((14336, 4096), (4096, 14336)))
TOP = 3  # each dataset's fastest direct_palette split configs per shape
THREE = "three launches (stop 91)"
SEPARATE = "summed by launches after it"  # today's split_reduction="separate_launches"
TITLE = "The palette matmul's split-K in one launch against the three launches before, beside cuBLAS"
MATMUL = ("BLOCK_M", "BLOCK_N", "BLOCK_K", "SPLIT_K", "num_warps", "num_stages")


def write_plan(path: Path, datasets: list[Path]) -> pd.DataFrame:
    """Per shape of SHAPES: the union of each dataset's TOP fastest direct_palette split tile configs (the matmul
    parameters without split_reduction), with the dataset and its recorded ms."""
    from tunebench.measure.dataset import load_dataset

    rows, seen = [], set()
    for dataset_path in datasets:
        dataset = load_dataset(dataset_path, kernel="compressed_matmul")
        for shape in SHAPES:
            task = dataset.task(shape)
            ok = task[(task["status"] == "ok") & (task["pipeline"] == "direct_palette") & (task["SPLIT_K"] > 1)]
            fastest: dict[tuple, Any] = {}  # tile config (the matmul parameters without split_reduction) -> row
            for _, row in ok.sort_values("latency_ms", kind="stable").iterrows():
                fastest.setdefault(tuple(int(_plain(row[name])) for name in MATMUL), row)
                if len(fastest) == TOP:
                    break
            for tile, row in fastest.items():
                if (shape, tile) not in seen:
                    seen.add((shape, tile))
                    rows.append({"M": shape[0], "N": shape[1], "K": shape[2], "dataset": dataset_path.name,
                                 "recorded_ms": float(row["latency_ms"]),
                                 "config": json.dumps(dict(zip(MATMUL, tile)))})
    plan = pd.DataFrame(rows)
    write_text_atomically(path, plan.to_csv(index=False))
    return plan


def contender_name(config: dict[str, int], way: str) -> str:
    """'16x64x64 split 4 w4 s3: one launch'."""
    tile = f"{config['BLOCK_M']}x{config['BLOCK_N']}x{config['BLOCK_K']}"
    return f"{tile} split {config['SPLIT_K']} w{config['num_warps']} s{config['num_stages']}: {way}"


def contenders(plan: pd.DataFrame, before: ModuleType | None, shape: tuple[int, int, int]) -> dict[str, Contender]:
    """Name -> callable for one shape: cuBLAS on the uncompressed weight, and each planned config by today's
    `reconstruct.multiply` in one launch and by the code before's (or by today's separate launches), on the same
    operands; each checked against fp32 first."""
    import torch

    from tunebench.kernels.compressed_matmul import family, reconstruct

    inputs = family.make_inputs(shape, "bfloat16")
    expected = family.reference(inputs)
    workspace = None if before is None else torch.empty_like(inputs.split.workspace)  # the code before zeroes its own
    runs: dict[str, Callable[[], Any]] = {
        "cuBLAS": lambda: torch.matmul(inputs.x, inputs.bf16_weight, out=inputs.out)}
    rows = plan[(plan.M == shape[0]) & (plan.N == shape[1]) & (plan.K == shape[2])]
    for config in (json.loads(text) for text in rows.config):
        runs[contender_name(config, ONE)] = functools.partial(
            reconstruct.multiply, inputs.x, "palette", dict(config, split_reduction="in_kernel"), inputs.out,
            inputs.split, inputs.weight)
        if before is None:
            runs[contender_name(config, SEPARATE)] = functools.partial(
                reconstruct.multiply, inputs.x, "palette", dict(config, split_reduction="separate_launches"),
                inputs.out, inputs.split, inputs.weight)
        else:
            runs[contender_name(config, THREE)] = functools.partial(
                before.multiply, inputs.x, "palette", config, inputs.out, workspace, inputs.weight)
    return checked_contenders(runs, inputs.out, expected)


def summary(timings: pd.DataFrame, command: str) -> str:
    """The contenders' medians against cuBLAS, and each split config's two ways (against stop 91's code, or today's)."""
    three = THREE if timings["name"].str.endswith(THREE).any() else SEPARATE
    plan = "plan.csv --before BEFORE" if three == THREE else "plan_reductions.csv"
    timing_command = ("PYTHONPATH=lib python3 benchmarks/compressed_split_k.py "
                      f"--plan results/compressed_split_k/{plan} --out CSV")
    return "\n\n".join([
        contender_summary(timings, TITLE, command, timing_command).rstrip("\n"),
        f"## Each split config in one launch and {three}",
        markdown_table(launches_table(timings, three)),
    ]) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write-plan", type=Path, help="write the plan CSV from --datasets (no GPU)")
    parser.add_argument("--datasets", type=Path, nargs="+", help="compressed_matmul datasets to plan from")
    add_rounds_arguments(parser, "a folder with reconstruct.py as of stop 91 (else today's two ways)")
    args = parser.parse_args(argv)
    if args.write_plan:
        if not args.datasets:
            parser.error("--write-plan needs --datasets")
        print(f"{len(write_plan(args.write_plan, args.datasets))} planned configs in {args.write_plan}")
        return 0
    def time_plan(plan: pd.DataFrame, folder: Path | None) -> pd.DataFrame:
        before = None if folder is None else _module("reconstruct_before_stop92", folder / "reconstruct.py")
        return time_contenders(SHAPES, lambda shape: contenders(plan, before, shape), args.rounds, args.seed)

    timings, command = read_or_time(parser, args, argv, "benchmarks/compressed_split_k.py", time_plan)
    write_text_atomically(args.out.with_suffix(".md"), summary(timings, command))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
