"""The stream decoder under Nsight Compute: `launch` decodes the synthetic Llama-3.1-8B gate weight (seed 0) to each
output twice, for ncu to profile; `summarize` turns ncu's raw CSV pages into a table of the counters that say what
bounds the kernel (L1 wavefronts of the table gathers, stall reasons, pipe use, DRAM traffic).

    PYTHONPATH=lib ncu --clock-control none --set full --import-source no --kernel-name regex:decode_stream -f \\
        -o gate python3 benchmarks/decoder_profile.py launch --outputs codes,exponents,bfloat16
    ncu -i gate.ncu-rep --page raw --csv > default.csv
    PYTHONPATH=lib python3 benchmarks/decoder_profile.py summarize --profile default codes,exponents,bfloat16 \\
        default.csv --out results/compressed_pipelines/decoder_ncu_h200

Each output is launched twice (the first compiles); the summary reads the second launch of each. `launch` defaults
to the deployed layout and settings; `--steps 128 --max-code-length 12 --programs-per-sm 16` gives stop 73's.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import json
import shlex
import sys
from pathlib import Path

import pandas as pd

from tunebench.files import write_text_atomically
from tunebench.kernels.compressed_matmul import decoders
from tunebench.kernels.compressed_matmul.stream import StreamLayout
from tunebench.tables import markdown_table

# (column name, ncu raw metric): what the decoder's profiles were read for.
COUNTERS = [
    ("duration us", "gpu__time_duration.sum"),
    ("L1 global-load wavefronts", "l1tex__t_output_wavefronts_pipe_lsu_mem_global_op_ld.sum"),
    ("L1 global-load wavefronts % of peak",
     "l1tex__t_output_wavefronts_pipe_lsu_mem_global_op_ld.sum.pct_of_peak_sustained_elapsed"),
    ("L1 global-load sectors", "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"),
    ("long-scoreboard stall cycles an issue",
     "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio"),
    ("math-pipe-throttle stall cycles an issue",
     "smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio"),
    ("not-selected stall cycles an issue", "smsp__average_warps_issue_stalled_not_selected_per_issue_active.ratio"),
    ("issue active %", "smsp__issue_active.avg.pct_of_peak_sustained_active"),
    ("ALU pipe %", "sm__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active"),
    ("warps active %", "sm__warps_active.avg.pct_of_peak_sustained_active"),
    ("DRAM throughput %", "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed"),
    ("DRAM read MB", "dram__bytes_read.sum"),
    ("DRAM write MB", "dram__bytes_write.sum"),
    ("instructions", "smsp__inst_executed.sum"),
    ("registers", "launch__registers_per_thread"),
    ("programs", "launch__grid_size"),
]
# ncu scales some units to the value; the column names above assume these.
UNITS = {"gpu__time_duration.sum": "us", "dram__bytes_read.sum": "Mbyte", "dram__bytes_write.sum": "Mbyte"}


def launch(outputs: list[str], steps: int, max_code_length: int, programs_per_sm: int) -> None:
    """Compress the gate weight in the given layout and run the stream kernel twice per output on the GPU."""
    import torch  # here, not at the top: `summarize` needs no GPU

    from tunebench.kernels.compressed_matmul import compact, synthetic
    from tunebench.kernels.compressed_matmul.device import to_device
    from tunebench.kernels.compressed_matmul.schedule import decoder_programs

    layout = StreamLayout(steps=steps, max_code_length=max_code_length)
    settings = dataclasses.replace(decoders.DECODER, programs_per_sm=programs_per_sm)
    bits = synthetic.synthetic_bits(synthetic.LLAMA_3_1_8B_MLP["gate"], seed=0)
    weight = to_device(compact.compress(bits, layout), "cuda")
    programs = decoder_programs(100, torch.cuda.get_device_properties(0).multi_processor_count, settings)
    for output in outputs:
        out = decoders.output_buffer(weight, output)
        for _ in range(2):
            decoders.launch_stream_decoder(weight, output, out, programs, settings)
        torch.cuda.synchronize()
        print(f"{output}: launched twice on {programs} programs", flush=True)


def read_profile(path: Path, outputs: list[str]) -> list[dict]:
    """One row a output: the COUNTERS of its second launch in ncu's raw CSV page (a header row, a units row)."""
    with open(path, newline="") as handle:
        rows = list(csv.reader(handle))
    header, units, launches = rows[0], rows[1], rows[2:]
    if len(launches) != 2 * len(outputs):
        raise SystemExit(f"{path}: {len(launches)} profiled launches, expected 2 for each of {', '.join(outputs)}")
    missing = [metric for _, metric in COUNTERS if metric not in header]
    if missing:
        raise SystemExit(f"{path}: no column {missing[0]!r}; profile with --set full")
    for metric, unit in UNITS.items():
        if units[header.index(metric)] != unit:
            raise SystemExit(f"{path}: {metric} is in {units[header.index(metric)]!r}; this summary reads {unit!r}")
    table = []
    for index, output in enumerate(outputs):
        values = dict(zip(header, launches[2 * index + 1]))
        table.append({"output": output, **{name: float(values[metric].replace(",", "")) for name, metric in COUNTERS}})
    return table


def counter_table(rows: list[dict]) -> pd.DataFrame:
    """Counters down, one column a (profile, output)."""
    columns = {f"{row['profile']}: {row['output']}":
               [f"{row[name]:,.2f}".rstrip("0").rstrip(".") for name, _ in COUNTERS] for row in rows}
    return pd.DataFrame({"counter": [name for name, _ in COUNTERS], **columns})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("launch", help="launch the stream decoder for ncu")
    run.add_argument("--outputs", default=",".join(decoders.OUTPUTS))
    run.add_argument("--steps", type=int, default=StreamLayout().steps)
    run.add_argument("--max-code-length", type=int, default=StreamLayout().max_code_length)
    run.add_argument("--programs-per-sm", type=int, default=decoders.DECODER.programs_per_sm)
    summary = commands.add_parser("summarize", help="tabulate ncu raw CSV pages")
    summary.add_argument("--profile", nargs=3, action="append", required=True, metavar=("LABEL", "OUTPUTS", "CSV"))
    summary.add_argument("--out", type=Path, required=True, help="path without suffix: writes .md and .json")
    args = parser.parse_args(argv)
    if args.command == "launch":
        outputs = args.outputs.split(",")
        for output in outputs:
            if output not in decoders.OUTPUTS:
                raise SystemExit(f"unknown output {output!r}; allowed: {', '.join(decoders.OUTPUTS)}")
        launch(outputs, args.steps, args.max_code_length, args.programs_per_sm)
        return 0
    rows = [{"profile": label, **row} for label, outputs, path in args.profile
            for row in read_profile(Path(path), outputs.split(","))]
    command = "PYTHONPATH=lib python3 " + shlex.join(["benchmarks/decoder_profile.py", *(argv or sys.argv[1:])])
    report = {"command": command, "rows": rows}
    write_text_atomically(args.out.with_suffix(".json"), json.dumps(report, indent=1) + "\n")
    write_text_atomically(args.out.with_suffix(".md"), "\n".join([
        "# The stream decoder under Nsight Compute", "", f"Command: `{command}`", "",
        "Second launch of each output; counters from ncu's raw page (`--set full`, `--clock-control none`).", "",
        markdown_table(counter_table(rows))]) + "\n")
    print(f"wrote {args.out}.md/.json")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
