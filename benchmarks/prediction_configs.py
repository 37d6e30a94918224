"""The fixed config subset measured on the prediction shapes: the 10 fastest configs of every shape of the
exhaustive GEMM dataset, filled up with uniformly drawn valid configs (seeded) to 600.

Run: `.venv/bin/python benchmarks/prediction_configs.py` (writes results/datasets/matmul_prediction_configs.json).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from tunebench.files import write_text_atomically
from tunebench.kernels import matmul
from tunebench.measure.dataset import load_dataset

SIZE = 600
TOP_PER_SHAPE = 10
SEED = 0


def main() -> int:
    dataset = load_dataset("results/datasets/matmul_bfloat16_h100.parquet", kernel="matmul")
    space = matmul.config_space()
    chosen: dict[tuple, dict] = {}
    for shape in dataset.shapes():
        rows = dataset.task(shape).nsmallest(TOP_PER_SHAPE, "latency_ms")
        for config in rows[list(space.names)].to_dict("records"):
            config = {name: int(value) for name, value in config.items()}
            chosen.setdefault(space.key(config), config)
    top = len(chosen)
    rng = np.random.default_rng(SEED)
    for config in space.sample(rng, len(space), unique=True):
        if len(chosen) == SIZE:
            break
        chosen.setdefault(space.key(config), config)
    out = Path("results/datasets/matmul_prediction_configs.json")
    write_text_atomically(out, json.dumps(sorted(chosen.values(), key=space.key), indent=0))
    print(f"{len(chosen)} configs ({top} among the {TOP_PER_SHAPE} fastest of some recorded shape) -> {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
