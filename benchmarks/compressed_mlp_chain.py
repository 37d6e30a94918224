"""The Llama-3.1-8B MLP forward pass timed whole on the GPU through the autotuned dispatch, beside the sum of recorded
steps the replay reports, the same steps timed alone in this sitting, and the uncompressed pass (cuBLAS).

    python3 benchmarks/compressed_mlp_chain.py --out results/compressed_chain/h100.md

The selection file is this GPU's in `results/pipeline_selection/` unless `--selection` names another.

Per batch size of the selection file, these are timed side by side:
- the chain as dispatched (`chain.GatedMlpChain`): an overlapped pick's weight is decoded a projection ahead on a side
  stream;
- the chain with every weight decoded just before its matmul, as `Dispatcher.multiply` does;
- each projection's pick alone, as the sweep timed it (`family.run`: a stand-in of its own weight decoded ahead);
- SiLU(gate) * up alone;
- the uncompressed pass (torch.matmul on BF16 weights, the same activation), and its matmuls alone (`family.run_vendor`,
  as the sweep timed cuBLAS).
Every round times them in a seeded shuffled order. Each figure is the median over rounds of the timer's medians
(`tunebench.measure.timing`: CUDA events around each run, the L2 flushed before each). The weights are synthetic, with
the real exponent statistics (`synthetic.py`); every chain's output is checked against the uncompressed pass.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd
import torch

from tunebench.files import write_text_atomically
from tunebench.kernels.compressed_matmul import compact, family, synthetic
from tunebench.kernels.compressed_matmul.chain import SCHEDULES, GatedMlpChain, uncompressed_forward
from tunebench.kernels.compressed_matmul.device import to_device
from tunebench.kernels.compressed_matmul.dispatch import Dispatcher
from tunebench.kernels.compressed_matmul.format import bits_to_bf16
from tunebench.kernels.compressed_matmul.mlp import LLAMA_3_1_8B
from tunebench.kernels.compressed_matmul.selection_file import file_name
from tunebench.kernels.compressed_matmul.selection_study import CHAIN_CONTENDERS, chain_table
from tunebench.measure.timing import Timer, TimingPolicy
from tunebench.tables import markdown_table

SELECTIONS = Path("results/pipeline_selection")
TOLERANCE = 2e-2  # relative error of a pass against the fp32 pass: BF16 outputs, fp32 sums in another order


def weights(mlp, seed: int) -> tuple[dict, dict]:
    """Each projection's synthetic weight (K x N), compressed on the device and in BF16."""
    bits = {projection.name: synthetic.synthetic_bits((projection.in_features, projection.out_features),
                                                      (seed, index))
            for index, projection in enumerate(mlp.projections)}
    return ({name: to_device(compact.compress(value), "cuda") for name, value in bits.items()},
            {name: bits_to_bf16(value).cuda() for name, value in bits.items()})


def contenders(dispatcher: Dispatcher, compressed: dict, uncompressed: dict, batch: int,
               seed: int) -> tuple[dict[str, Callable[[], object]], dict[str, float]]:
    """What is timed at `batch`, by name, and each chain's relative error against the uncompressed pass."""
    mlp = dispatcher.selection.tuning.mlp
    generator = torch.Generator().manual_seed(seed + batch)
    x = (torch.randn((batch, mlp.projections[0].in_features), generator=generator)
         / math.sqrt(mlp.projections[0].in_features)).to("cuda", torch.bfloat16)
    expected = uncompressed_forward(x.float(), {name: value.float() for name, value in uncompressed.items()})
    chains = {schedule: GatedMlpChain(dispatcher, compressed, batch, "cuda", schedule) for schedule in SCHEDULES}
    errors = {}
    for schedule, chain in chains.items():
        for _ in range(3):  # a prefetched weight is decoded by the pass before: check passes after the first too
            out = chain.forward(x).float()
        errors[schedule] = float((out - expected).norm() / expected.norm())
    functions = {CHAIN_CONTENDERS[schedule]: (lambda chain=chain: chain.forward(x))
                 for schedule, chain in chains.items()}
    for projection in mlp.projections:
        config = dispatcher.choose(projection.name, batch).config
        inputs = family.make_inputs(projection.shape(batch), "bfloat16", "cuda", seed)
        functions[f"{projection.name} alone"] = lambda config=config, inputs=inputs: family.run(config, inputs)
        functions[f"{projection.name} uncompressed alone"] = lambda inputs=inputs: family.run_vendor(inputs)
    gate, up = (torch.zeros((batch, mlp.projections[0].out_features), dtype=torch.bfloat16, device="cuda")
                for _ in range(2))
    hidden = torch.empty_like(gate)
    functions["activation alone"] = lambda: torch.mul(torch.nn.functional.silu(gate), up, out=hidden)
    functions["uncompressed pass"] = lambda: uncompressed_forward(x, uncompressed)
    return functions, errors


def summary(timings: pd.DataFrame, dispatcher: Dispatcher) -> pd.DataFrame:
    """One row per batch: the picks, the recorded sum, the medians over rounds (`chain_table`), and their ratios."""
    table = chain_table(timings)
    names = [projection.name for projection in dispatcher.selection.tuning.mlp.projections]
    rows = []
    for bucket in dispatcher.selection.tuning.buckets:
        timed = table.loc[bucket.batch]
        dispatched = timed["pass as dispatched"]
        rows.append({"batch": bucket.batch,
                     "picks": ", ".join(f"{name} {bucket.projections[name].choice.pipeline}" for name in names),
                     "recorded sum (replay)": 1000 * sum(bucket.projections[name].choice.latency_ms
                                                         for name in names),
                     **timed[["steps alone, summed", "activation alone", "pass as dispatched",
                              "pass, decodes serial"]].to_dict(),
                     "dispatched / (steps + activation)": dispatched / (timed["steps alone, summed"]
                                                                        + timed["activation alone"]),
                     "uncompressed steps alone, summed": timed["cuBLAS steps alone, summed"],
                     "uncompressed pass": timed["uncompressed pass"],
                     "dispatched / uncompressed": dispatched / timed["uncompressed pass"]})
    return pd.DataFrame(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--selection", type=Path,
                        help=f"the pipeline-selection file to dispatch by (default: this GPU's in {SELECTIONS})")
    parser.add_argument("--model", default=LLAMA_3_1_8B.model)
    args, gpu = parse_round_arguments(parser, argv, rounds=7)
    selection = args.selection or SELECTIONS / file_name(args.model, gpu)
    dispatcher = Dispatcher.load(selection, model=args.model, gpu=gpu)
    compressed, uncompressed = weights(dispatcher.selection.tuning.mlp, args.seed)
    timer, rng, rows, errors = Timer(TimingPolicy()), np.random.default_rng(args.seed), [], {}
    for batch in dispatcher.buckets:
        started = time.perf_counter()
        functions, errors[batch] = contenders(dispatcher, compressed, uncompressed, batch, args.seed)
        wrong = {schedule: error for schedule, error in errors[batch].items() if not error < TOLERANCE}
        if wrong:
            raise SystemExit(f"error: at batch {batch} the chain's output is off the uncompressed pass by {wrong} "
                             f"(relative; allowed: under {TOLERANCE})")
        names = list(functions)
        for round_index in range(args.rounds):
            for index in rng.permutation(len(names)):
                latency_ms = float(np.median(timer.time(functions[names[index]])))
                rows.append({"batch": batch, "round": round_index, "contender": names[index],
                             "latency_us": 1000 * latency_ms})
        print(f"batch {batch}: {len(names)} contenders x {args.rounds} rounds in {time.perf_counter() - started:.0f} s"
              f" (chain errors {', '.join(f'{value:.1e}' for value in errors[batch].values())})", flush=True)
    timings = pd.DataFrame(rows)
    table = summary(timings, dispatcher)
    worst = max(max(values.values()) for values in errors.values())
    write_report(args.out, f"The {args.model} MLP pass timed whole on {gpu}",
                 f"Command: `{command_line('compressed_mlp_chain.py', argv)}` ({run_line(args)}). Selection: "
                 f"`{selection}`. Microseconds, medians over rounds; the recorded sum is the selection file's (another "
                 "sitting, other synthetic weights of the same statistics). Every chain's output matched the "
                 f"uncompressed pass within a relative error of {worst:.1e}.", table, timings)
    return 0


def parse_round_arguments(parser: argparse.ArgumentParser, argv: list[str] | None,
                          rounds: int) -> tuple[argparse.Namespace, str]:
    """Add the options every rounds benchmark takes (--rounds, --seed, --out), parse, check them, and name the GPU
    (an error where none is visible)."""
    parser.add_argument("--rounds", type=int, default=rounds)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, required=True, help="the markdown summary (its CSV of rounds beside it)")
    args = parser.parse_args(argv)
    if args.rounds < 1:
        raise SystemExit(f"error: --rounds {args.rounds}: time at least one round")
    if not torch.cuda.is_available():
        raise SystemExit("error: this benchmark times kernels on a CUDA GPU, and none is visible")
    return args, torch.cuda.get_device_name()


def command_line(script: str, argv: list[str] | None) -> str:
    """The command that ran `script` of benchmarks/ with these arguments (the process's own, if None)."""
    return " ".join([f"python3 benchmarks/{script}", *(argv if argv is not None else sys.argv[1:])])


def run_line(args: argparse.Namespace) -> str:
    """The torch version, rounds, seed and date of a run, for its report's header."""
    return f"torch {torch.__version__}, {args.rounds} rounds, seed {args.seed}, {time.strftime('%Y-%m-%d')}"


def write_report(out: Path, title: str, header: str, table: pd.DataFrame, timings: pd.DataFrame) -> None:
    """The markdown summary at `out` (title, header, table) and every round's timing beside it as CSV, atomically."""
    out.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomically(out.with_suffix(".csv"), timings.to_csv(index=False))
    write_text_atomically(out, "\n\n".join([f"# {title}", header, markdown_table(table)]) + "\n")
    print(f"wrote {out} and {out.with_suffix('.csv')}")


if __name__ == "__main__":
    raise SystemExit(main())
