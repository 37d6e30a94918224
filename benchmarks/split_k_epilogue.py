"""Split-K in one launch (`tunebench.kernels.split_k`: the tile's last split stores C) against split-K as it ran to
stop 90 (the workspace zeroed by a launch before the GEMM and cast into C by one after), side by side in shuffled
rounds with cuBLAS, on both GEMM families' fastest recorded split configs at small M.

First, anywhere: `.venv/bin/python benchmarks/split_k_epilogue.py --write-plan PLAN.csv` (each family's TOP fastest
recorded split configs, and its fastest unsplit one, per shape of SHAPES its dataset holds). The code before:
`mkdir -p BEFORE && git show b38cf80:lib/tunebench/kernels/matmul.py > BEFORE/matmul.py` and the same for
matmul_tma.py. Then on a GPU: `PYTHONPATH=lib python3 benchmarks/split_k_epilogue.py --plan PLAN.csv --before BEFORE
--out OUT.csv` (the summary goes beside it as `.md`; `--summarize --out OUT.csv` writes it again, anywhere).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import importlib.util
import json
import shlex
import sys
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Mapping

import pandas as pd

from tunebench.files import write_text_atomically
from tunebench.measure.probe_rounds import Contender, checked_contenders, contender_summary, time_contenders
from tunebench.split_k_rounds import ONE, THREE, family_table, launches_table
from tunebench.tables import markdown_table

REPO = Path(__file__).resolve().parents[1]
DATASETS = {"matmul": REPO / "results/datasets/matmul_bfloat16_h100_prediction.parquet",
            "matmul_tma": REPO / "results/datasets/matmul_tma_bfloat16_h100_split_k.parquet"}
# The four gap shapes with M <= 72 (results/gemm_families/pointer_gaps_h100.md), which both families have swept with
# split configs, and four decode-sized shapes of real layers the pointer GEMM's prediction dataset holds.
SHAPES = ((2, 712, 4648), (6, 960, 5120), (36, 616, 13192), (72, 1280, 8192),
          (1, 4096, 4096), (1, 768, 3072), (4, 4096, 11008), (16, 1024, 8192))
TOP = 3  # each family's fastest recorded split configs per shape
TITLE = "Split-K in one launch against the three launches before, beside cuBLAS"


def write_plan(path: Path) -> pd.DataFrame:
    """Per family and shape of SHAPES its dataset holds: its TOP fastest recorded split configs and its fastest
    unsplit one, with their recorded ms and rank among the shape's configs."""
    from tunebench.measure.dataset import load_dataset

    rows = []
    for family, dataset_path in DATASETS.items():
        dataset = load_dataset(dataset_path, kernel=family)
        for shape in SHAPES:
            if tuple(shape) not in set(dataset.shapes()):
                continue
            task = dataset.task(shape)
            ok = task[task["status"] == "ok"].sort_values("latency_ms", kind="stable").reset_index(drop=True)
            split = ok["SPLIT_K"].fillna(1) > 1 if "SPLIT_K" in ok else pd.Series(False, index=ok.index)
            chosen = [*ok.index[split][:TOP], *ok.index[~split][:1]]
            for rank in chosen:
                config = {name: _plain(ok.at[rank, name]) for name in dataset.parameter_names}
                rows.append({"M": shape[0], "N": shape[1], "K": shape[2], "family": family, "rank": int(rank),
                             "recorded_ms": float(ok.at[rank, "latency_ms"]), "config": json.dumps(config)})
    plan = pd.DataFrame(rows)
    write_text_atomically(path, plan.to_csv(index=False))
    return plan


def _plain(value: Any) -> Any:
    return value.item() if hasattr(value, "item") else value


def _module(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ValueError(f"cannot load {path} as a module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def contender_name(row: Mapping[str, Any], config: Mapping[str, Any], way: str) -> str:
    """'matmul #3 split 8: one launch'; an unsplit config is named by its family and rank alone."""
    split = int(config.get("SPLIT_K", 1))
    if split == 1:
        return f"{row['family']} #{row['rank']} unsplit"
    return f"{row['family']} #{row['rank']} split {split}: {way}"


def contenders(plan: pd.DataFrame, before: Mapping[str, ModuleType], shape: tuple[int, int, int]
               ) -> dict[str, Contender]:
    """Name -> callable for one shape: cuBLAS, and each planned config by today's `run` and, if it splits K, by the
    code before's; each checked against an fp32 reference first, a failure recorded as its status."""
    import torch

    from tunebench.kernels import get_kernel, matmul

    rows = plan[(plan.M == shape[0]) & (plan.N == shape[1]) & (plan.K == shape[2])]
    inputs = matmul.make_inputs(shape, "bfloat16")  # the TMA GEMM's inputs are the same (`matmul_tma.make_inputs`)
    expected = matmul.reference(inputs)
    # The code before leaves its workspace unzeroed, which today's needs zero, and it keeps launches under the same
    # keys: so it runs on the same operands and output with a workspace and a launch cache of its own.
    inputs_before = dataclasses.replace(inputs, workspace=torch.zeros_like(inputs.workspace))
    runs: dict[str, Callable[[], Any]] = {"cuBLAS": lambda: torch.matmul(inputs.a, inputs.b, out=inputs.out)}
    for row in rows.to_dict("records"):
        config = json.loads(row["config"])
        runs[contender_name(row, config, ONE)] = functools.partial(get_kernel(row["family"]).run, config, inputs)
        if int(config.get("SPLIT_K", 1)) > 1:
            runs[contender_name(row, config, THREE)] = functools.partial(before[row["family"]].run, config,
                                                                         inputs_before)
    return checked_contenders(runs, inputs.out, expected)


def summary(timings: pd.DataFrame, command: str, code: str) -> str:
    timing_command = ("PYTHONPATH=lib python3 benchmarks/split_k_epilogue.py --plan results/split_k_epilogue/plan.csv "
                      "--before BEFORE --out CSV")
    return "\n\n".join([
        contender_summary(timings, TITLE, command, timing_command).rstrip("\n"),
        f"One launch, as timed: {code}.",
        "## Each family's fastest, against cuBLAS (cuBLAS's median / the fastest median)",
        markdown_table(family_table(timings)),
        "## Each split config in one launch and in three",
        markdown_table(launches_table(timings)),
    ]) + "\n"


def add_rounds_arguments(parser: argparse.ArgumentParser, before_help: str) -> None:
    """The options both side-by-side benchmarks take: --plan, --before, --out, --rounds, --seed, --summarize."""
    parser.add_argument("--plan", type=Path, help="the plan CSV to time")
    parser.add_argument("--before", type=Path, help=before_help)
    parser.add_argument("--out", type=Path, help="CSV of every timing; the summary goes beside it (.md)")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--summarize", action="store_true", help="only write the summary of --out's timings")


def read_or_time(parser: argparse.ArgumentParser, args: argparse.Namespace, argv: list[str] | None, script: str,
                 time_plan: Callable[[pd.DataFrame, Path | None], pd.DataFrame]) -> tuple[pd.DataFrame, str]:
    """With --summarize, --out's timings; else `time_plan(--plan's plan, --before or None)`'s, written to --out
    atomically.
    And the command line that ran, for the summary."""
    if args.out is None:
        parser.error("--out is needed, with --plan and --before to time or with --summarize")
    command = f"PYTHONPATH=lib python3 {script} " + shlex.join(sys.argv[1:] if argv is None else argv)
    if args.summarize:
        return pd.read_csv(args.out), command
    if args.plan is None:
        parser.error("timing needs --plan")
    timings = time_plan(pd.read_csv(args.plan), args.before)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomically(args.out, timings.to_csv(index=False))
    return timings, command


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write-plan", type=Path, help="write the plan CSV from the recorded datasets (no GPU)")
    add_rounds_arguments(parser, "a folder with matmul.py and matmul_tma.py as of stop 90")
    parser.add_argument("--code", default="the code of this checkout",
                        help="what the one-launch code was, when --summarize describes timings of other code")
    args = parser.parse_args(argv)
    if args.write_plan:
        print(f"{len(write_plan(args.write_plan))} planned configs in {args.write_plan}")
        return 0
    if not args.summarize and args.before is None:
        parser.error("timing needs --before")

    def time_plan(plan: pd.DataFrame, folder: Path | None) -> pd.DataFrame:
        assert folder is not None  # checked above
        before = {"matmul": _module("matmul_before_stop91", folder / "matmul.py"),
                  "matmul_tma": _module("matmul_tma_before_stop91", folder / "matmul_tma.py")}
        shapes = list(dict.fromkeys(plan[["M", "N", "K"]].itertuples(index=False, name=None)))
        return time_contenders([tuple(int(v) for v in shape) for shape in shapes],
                               lambda shape: contenders(plan, before, shape), args.rounds, args.seed)

    timings, command = read_or_time(parser, args, argv, "benchmarks/split_k_epilogue.py", time_plan)
    write_text_atomically(args.out.with_suffix(".md"), summary(timings, command, args.code))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
