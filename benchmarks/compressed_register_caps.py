"""What each `register_cap` of the compressed matmul's in-kernel split sum buys in a recorded sweep (no GPU): every
capped config beside the same config uncapped at the same shape, and each projection's fastest config as the caps join.

    .venv/bin/python benchmarks/compressed_register_caps.py --out results/compressed_split_k/register_caps_sweep_h100.md

A capped config and its uncapped twin may come from different sittings of the sweep; the table of sittings says which
timed what, and how their cuBLAS (the dataset's vendor rows are the first sitting's) compares where a later sitting's
own dataset is given (`--later`).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

from tunebench.files import write_text_atomically
from tunebench.kernels import complete_config
from tunebench.kernels.compressed_matmul.reconstruct import MATMUL_PARAMETERS, REGISTER_CAPS
from tunebench.measure.dataset import load_dataset
from tunebench.tables import markdown_table

DATASET = Path("results/datasets/compressed_matmul_bfloat16_h100.parquet")
KEYS = ["pipeline", *MATMUL_PARAMETERS, "decode_sm_percent", "decode_schedule", "M", "N", "K"]
PROJECTIONS = {(14336, 4096): "gate, up", (4096, 14336): "down"}  # Llama-3.1-8B's MLP: (N, K) of each


def ok_rows(dataset) -> pd.DataFrame:
    """The sweep's ok rows, every config completed with the parameters added after it was recorded."""
    rows = dataset.measurements
    added = {name: value for name, value in complete_config(dataset.kernel, {}).items() if name not in rows}
    return rows[rows.status == "ok"].assign(**added)


def in_kernel_rows(dataset) -> pd.DataFrame:
    """The sweep's ok rows of split configs summed in the kernel."""
    rows = ok_rows(dataset)
    return rows[(rows.SPLIT_K > 1) & (rows.split_reduction == "in_kernel")]


def against_uncapped(rows: pd.DataFrame) -> pd.DataFrame:
    """Per pipeline, batch range and cap: capped / uncapped latency of one config at one shape (median), and how often
    the capped one is faster; "one_more_program" is also put beside "as_by_launches"."""
    caps = rows.pivot_table(index=KEYS, columns="register_cap", values="latency_ms").reset_index()
    caps["batch"] = caps.M.map(lambda m: "M <= 16" if m <= 16 else "M >= 64")
    pairs = [(cap, "none") for cap in REGISTER_CAPS[1:]] + [("one_more_program", "as_by_launches")]
    table = []
    for capped, base in pairs:
        if capped not in caps or base not in caps:
            continue
        ratio = caps.assign(ratio=caps[capped] / caps[base]).dropna(subset=["ratio"])
        for (pipeline, batch), group in ratio.groupby(["pipeline", "batch"]):
            table.append({"pipeline": pipeline, "batch": batch, "cap": capped, "against": base,
                          "configs x shapes": len(group), "median ratio": group.ratio.median(),
                          "P10": group.ratio.quantile(0.1), "P90": group.ratio.quantile(0.9),
                          "capped faster": f"{(group.ratio < 1).mean():.0%}"})
    return pd.DataFrame(table)


def fastest_as_caps_join(dataset) -> pd.DataFrame:
    """Per projection and batch, the fastest recorded config (any pipeline) when the caps up to each are allowed."""
    table = []
    for (m, n, k), shape in ok_rows(dataset).groupby(["M", "N", "K"]):
        row = {"projection": PROJECTIONS.get((n, k), f"{n}x{k}"), "batch": m}
        for index, cap in enumerate(REGISTER_CAPS):
            allowed = shape[shape.register_cap.isin(REGISTER_CAPS[:index + 1])]
            best = allowed.loc[allowed.latency_ms.idxmin()]
            row[f"up to {cap}, us"] = 1000 * best.latency_ms
        row["fastest config"] = describe(best)
        table.append(row)
    return pd.DataFrame(table).sort_values(["projection", "batch"])


def describe(row: pd.Series) -> str:
    tile = "x".join(str(row[name]) for name in ("BLOCK_M", "BLOCK_N", "BLOCK_K"))
    split = f" split {row.SPLIT_K} {row.split_reduction}" if row.SPLIT_K > 1 else ""
    cap = f" ({row.register_cap})" if row.register_cap != "none" else ""
    return f"{row.pipeline} {tile}{split} w{row.num_warps} s{row.num_stages}{cap}"


def sittings(dataset, later: list[Path]) -> pd.DataFrame:
    """Which sitting timed how many rows of each cap, and, for a later sitting whose own dataset is given (matched by
    its date), its cuBLAS over the first sitting's (median over shapes)."""
    rows = dataset.measurements.assign(register_cap=lambda frame: frame.get("register_cap", "none"))
    counts = rows.groupby(["sitting", "register_cap"]).size().unstack(fill_value=0)
    records = dataset.provenance.get("sittings", [{}])
    vendor = dataset.vendor.set_index(["M", "N", "K"]).latency_ms
    drift = {}
    for path in later:
        other = load_dataset(path)
        ratio = other.vendor.set_index(["M", "N", "K"]).latency_ms / vendor
        drift[other.provenance["date"]] = ratio.median()
    table = []
    for sitting, row in counts.iterrows():
        record = records[int(sitting)] if int(sitting) < len(records) else {}
        table.append({"sitting": int(sitting), "date": record.get("date", ""),
                      "kernel hash": record.get("kernel_source_sha256", dataset.provenance.get("kernel_source_sha256")),
                      **{f"rows {cap}": int(row.get(cap, 0)) for cap in REGISTER_CAPS},
                      "cuBLAS / first sitting's": f"{drift[record['date']]:.3f}" if record.get("date") in drift
                      else ""})
    return pd.DataFrame(table)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", type=Path, default=DATASET)
    parser.add_argument("--later", type=Path, nargs="*", default=[],
                        help="later sittings' own datasets (as the collector wrote them), for their cuBLAS")
    parser.add_argument("--out", type=Path, required=True, help="the markdown summary to write")
    args = parser.parse_args(argv)
    dataset = load_dataset(args.dataset)
    command = " ".join(["python benchmarks/compressed_register_caps.py", *(argv if argv is not None else sys.argv[1:])])
    text = "\n\n".join([
        "# The compressed matmul's register caps in the recorded sweep",
        f"Command: `{command}`. Dataset: `{args.dataset}` ({dataset.provenance['gpu_name']}, Triton "
        f"{dataset.provenance['triton']}). Caps (`reconstruct.register_cap`): {', '.join(REGISTER_CAPS)}.",
        "## Capped against uncapped, per config and shape\n\nBelow 1 the capped config is faster. Configs x shapes "
        "pairs one config at one shape; P10 and P90 are over those pairs.",
        markdown_table(against_uncapped(in_kernel_rows(dataset)), "{:.3f}"),
        "## Each projection's fastest config as the caps join\n\nThe fastest recorded config of any pipeline, "
        "allowing the caps up to the column's (in the order above); the config is the last column's.",
        markdown_table(fastest_as_caps_join(dataset), "{:.1f}"),
        "## Sittings\n\nThe cuBLAS column is blank for the first sitting and for one whose dataset `--later` does "
        "not give. A resumed sweep's dataset holds the cuBLAS of both its sittings; its ratio is on the first's row.",
        markdown_table(sittings(dataset, args.later)),
    ]) + "\n"
    write_text_atomically(args.out, text)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
