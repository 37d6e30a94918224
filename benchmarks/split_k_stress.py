"""Split-K in one launch, launched again and again on the same inputs with every output checked: a race between a
tile's splits shows as a wrong output in some launches, and a counter or workspace left unclean as one in every launch
after it. A sweep checks each config once; this checks each many times.

On a GPU: `PYTHONPATH=lib python3 benchmarks/split_k_stress.py --cases results/split_k_epilogue/stress_cases.json
--plan results/split_k_epilogue/plan.csv --repeats 100` (the cases: configs a sweep found wrong, as {kernel, shape,
config}; the plan's split configs are added). Prints, per case, how many of the launches missed the tolerance and the
worst relative error, then the total (results/split_k_epilogue/stress_*.txt).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pandas as pd


def stress_cases(cases: Path, plan: Path) -> list[dict[str, Any]]:
    """The cases file's {kernel, shape, config} entries, then every split config of the plan
    (`benchmarks/split_k_epilogue.py --write-plan`)."""
    chosen = json.loads(cases.read_text())
    for row in pd.read_csv(plan).to_dict("records"):
        config = json.loads(row["config"])
        if config.get("SPLIT_K", 1) > 1:
            chosen.append({"kernel": row["family"], "shape": [row["M"], row["N"], row["K"]], "config": config})
    return chosen


def launch_errors(kernel: Any, config: dict[str, Any], inputs: Any, expected: Any, repeats: int) -> list[float]:
    """The relative error of each of `repeats` launches of `config` by `kernel` on the same `inputs`, the output
    NaN-filled before each."""
    from tunebench.kernels import matmul

    errors = []
    for _ in range(repeats):
        inputs.out.fill_(float("nan"))
        kernel.run(config, inputs)
        errors.append(matmul.relative_error(inputs.out, expected))
    return errors


def main(argv: list[str] | None = None) -> int:
    import torch

    from tunebench.kernels import get_kernel, matmul, split_k

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=Path, required=True)
    parser.add_argument("--plan", type=Path, required=True)
    parser.add_argument("--repeats", type=int, default=100)
    args = parser.parse_args(argv)
    source = Path(split_k.__file__).read_text().split("tl.debug_barrier()")[0]
    print("data atomic sem:", "relaxed" if 'sem="relaxed")\n' in source else "acq_rel")
    total = 0
    for case in stress_cases(args.cases, args.plan):
        kernel = get_kernel(case["kernel"])
        shape = tuple(case["shape"])
        inputs = kernel.make_inputs(shape, "bfloat16", "cuda", seed=3)
        expected = matmul.reference(inputs)
        errors = launch_errors(kernel, case["config"], inputs, expected, args.repeats)
        bad, worst = sum(error > matmul.TOLERANCE["bfloat16"] for error in errors), max(errors)
        total += bad
        print(case["kernel"], shape, case["config"]["SPLIT_K"], f"bad {bad}/{args.repeats} worst {worst:.3g}",
              flush=True)
        del inputs
        torch.cuda.empty_cache()
    print("total bad", total)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
