"""The compressed-weight decoder's two kernels timed apart on one GPU: the stream kernel and the verbatim patch, per
Llama-3.1-8B MLP projection and decoder output, over a grid of stream layouts and launch settings.

    PYTHONPATH=lib python3 benchmarks/decoder_parts.py                       # the deployed settings, ~1 minute
    PYTHONPATH=lib python3 benchmarks/decoder_parts.py --steps 128,64 --stream-settings 1x2x16,2x2x16 \\
        --patch-settings 16x4,4x2 --label grid
    PYTHONPATH=lib python3 benchmarks/decoder_parts.py --max-code-lengths 12,8,7 --label code_lengths

Every variant is first checked bit for bit against the CPU reference (stream and patch together, poisoned output).
Then `--rounds` rounds, each timing every (variant, kernel) once in a shuffled order (the Timer's median of its
repeats, L2 flushed before each run); the tables give the median over rounds. A stream setting is
CHUNKS_PER_PROGRAM x NUM_WARPS x PROGRAMS_PER_SM, a patch setting GROUPS_PER_BLOCK x NUM_WARPS. Writes
results/compressed_pipelines/decoder_parts_<gpu>[_<label>].md and .json atomically.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import random
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch
import triton
from compressed_pipelines import gpu_slug

from tunebench.files import write_text_atomically
from tunebench.kernels.compressed_matmul import compact, decoders, format, synthetic
from tunebench.kernels.compressed_matmul.device import to_device
from tunebench.kernels.compressed_matmul.schedule import POISON_BYTE, decoder_programs
from tunebench.kernels.compressed_matmul.stream import StreamLayout
from tunebench.measure.timing import Timer, TimingPolicy
from tunebench.tables import markdown_table

RECORDED_BEFORE_THE_OPTION = 12  # the longest code of every layout timed before --max-code-lengths existed


def parse_settings(text: str, fields: tuple[str, ...]) -> list[dict[str, int]]:
    """'AxBxC,...' into dicts of `fields`; a clear error names the bad item."""
    settings = []
    for item in text.split(","):
        parts = item.strip().split("x")
        if len(parts) != len(fields) or not all(part.isdigit() and int(part) > 0 for part in parts):
            raise SystemExit(f"bad setting {item!r}: expected {len(fields)} positive integers joined by 'x' "
                             f"({' x '.join(fields)})")
        settings.append(dict(zip(fields, map(int, parts))))
    return settings


def stream_label(setting: dict[str, int]) -> str:
    return f"{setting['chunks_per_program']}x{setting['num_warps']}x{setting['programs_per_sm']}"


def patch_label(setting: dict[str, int]) -> str:
    return f"{setting['patch_groups_per_block']}x{setting['patch_num_warps']}"


def expected_outputs(bits: np.ndarray, weight: compact.CompactWeight) -> dict[str, torch.Tensor]:
    return {"codes": torch.from_numpy(weight.palette_form.codes).cuda(),
            "exponents": torch.from_numpy(format.split_bits(bits)[0]).cuda(),
            "bfloat16": format.bits_to_bf16(bits).cuda()}


def check(tensors, output: str, expected: torch.Tensor, settings: decoders.DecoderSettings, sms: int, what: str) -> None:
    out = decoders.output_buffer(tensors, output)
    out.view(torch.uint8).fill_(POISON_BYTE)
    decoders.decode(tensors, output, out, decoder_programs(100, sms, settings), settings)
    if not torch.equal(out.view(torch.uint8), expected.view(torch.uint8)):
        raise SystemExit(f"{what}: decoding to {output} differs from the CPU reference")


def moved_bytes(tensors, output: str, out: torch.Tensor) -> int:
    """Bytes the stream kernel must move at least: the stream and its offsets, the output `out`, and for BF16 the
    sign+mantissa bytes it reads."""
    read = tensors.words.nbytes + tensors.lane_bits.nbytes + tensors.chunk_starts.nbytes
    return read + out.nbytes + (tensors.sign_mantissa.nbytes if output == "bfloat16" else 0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--projections", default="gate,up,down", help="a subset of gate,up,down")
    parser.add_argument("--outputs", default=",".join(decoders.OUTPUTS), help="a subset of " + ",".join(decoders.OUTPUTS))
    parser.add_argument("--steps", default=str(StreamLayout().steps), help="stream layouts: steps a lane, a list")
    parser.add_argument("--max-code-lengths", default=str(StreamLayout().max_code_length),
                        help="stream layouts: longest Huffman code (the decode table has 2**length entries), a list")
    deployed = decoders.DECODER
    parser.add_argument("--stream-settings", default=stream_label(dataclasses.asdict(deployed)))
    parser.add_argument("--patch-settings", default=patch_label(dataclasses.asdict(deployed)))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--label", default="", help="suffix of the output files")
    parser.add_argument("--out-dir", type=Path, default=Path("results/compressed_pipelines"))
    args = parser.parse_args(argv)
    projections = args.projections.split(",")
    outputs = args.outputs.split(",")
    for name in projections:
        if name not in synthetic.LLAMA_3_1_8B_MLP:
            raise SystemExit(f"unknown projection {name!r}; allowed: {', '.join(synthetic.LLAMA_3_1_8B_MLP)}")
    for output in outputs:
        if output not in decoders.OUTPUTS:
            raise SystemExit(f"unknown output {output!r}; allowed: {', '.join(decoders.OUTPUTS)}")
    if args.rounds < 1:
        raise SystemExit(f"--rounds {args.rounds} is not allowed; allowed: >= 1")
    try:
        steps_list = [StreamLayout(steps=int(steps)).steps for steps in args.steps.split(",")]
    except ValueError as error:
        raise SystemExit(f"bad --steps {args.steps!r}: {error}")
    try:
        lengths = [StreamLayout(max_code_length=int(length)).max_code_length
                   for length in args.max_code_lengths.split(",")]
    except ValueError as error:
        raise SystemExit(f"bad --max-code-lengths {args.max_code_lengths!r}: {error}")
    layouts = [StreamLayout(steps=steps, max_code_length=length) for steps in steps_list for length in lengths]
    stream_settings = parse_settings(args.stream_settings, ("chunks_per_program", "num_warps", "programs_per_sm"))
    patch_settings = parse_settings(args.patch_settings, ("patch_groups_per_block", "patch_num_warps"))

    start = time.monotonic()
    policy = TimingPolicy()
    timer = Timer(policy)
    properties = torch.cuda.get_device_properties(0)
    sms = properties.multi_processor_count
    items, formats = [], []  # items: (key, function); key describes the measurement
    for index, name in enumerate(projections):
        bits = synthetic.synthetic_bits(synthetic.LLAMA_3_1_8B_MLP[name], seed=index)
        for layout in layouts:
            steps = layout.steps
            weight = compact.compress(bits, layout)
            figures = compact.figures(bits, weight)
            tensors = to_device(weight, "cuda")
            formats.append({"projection": name, "steps": steps, "max_code_length": layout.max_code_length,
                            "chunks": tensors.chunks,
                            "compact_ratio": figures.compact_ratio,
                            "compact_exponent_bits": figures.compact_exponent_bits,
                            "verbatim_groups": tensors.verbatim_count})
            expected = expected_outputs(bits, weight)
            for output in outputs:
                out = decoders.output_buffer(tensors, output)
                for setting in stream_settings:
                    settings = dataclasses.replace(deployed, **setting)
                    check(tensors, output, expected[output], settings, sms, f"{name} steps={steps} "
                          f"max_code_length={layout.max_code_length} {stream_label(setting)}")
                    programs = decoder_programs(100, sms, settings)
                    kernel = decoders.launch_stream_decoder(tensors, output, out, programs, settings)
                    key = {"projection": name, "output": output, "steps": steps,
                           "max_code_length": layout.max_code_length, "kernel": "stream",
                           "setting": stream_label(setting), "programs": programs,
                           "n_regs": getattr(kernel, "n_regs", None), "n_spills": getattr(kernel, "n_spills", None),
                           "moved_bytes": moved_bytes(tensors, output, out)}
                    items.append((key, lambda t=tensors, o=output, b=out, p=programs, s=settings:
                                  decoders.launch_stream_decoder(t, o, b, p, s)))
                if output == "codes" or layout != layouts[0]:
                    continue  # the patch reads no stream: one layout is enough
                for setting in patch_settings:
                    settings = dataclasses.replace(deployed, **setting)
                    check(tensors, output, expected[output], settings, sms, f"{name} patch {patch_label(setting)}")
                    programs = decoder_programs(100, sms, deployed)
                    kernel = decoders.launch_verbatim_patch(tensors, output, out, programs, settings)
                    key = {"projection": name, "output": output, "steps": steps,
                           "max_code_length": layout.max_code_length, "kernel": "patch",
                           "setting": patch_label(setting), "programs": programs,
                           "n_regs": getattr(kernel, "n_regs", None), "n_spills": getattr(kernel, "n_spills", None),
                           "moved_bytes": None}
                    items.append((key, lambda t=tensors, o=output, b=out, p=programs, s=settings:
                                  decoders.launch_verbatim_patch(t, o, b, p, s)))
            print(f"{name} steps={steps} max_code_length={layout.max_code_length}: checked bit for bit; "
                  f"{tensors.chunks} chunks, compact {figures.compact_ratio:.4f}x", flush=True)
    rng = random.Random(0)
    timings: list[list[float]] = [[] for _ in items]
    for round_index in range(args.rounds):
        order = list(range(len(items)))
        rng.shuffle(order)
        for position in order:
            timings[position].append(float(np.median(timer.time(items[position][1]))))
        print(f"round {round_index + 1} of {args.rounds} done ({time.monotonic() - start:.0f} s)", flush=True)

    rows = []
    for (key, _), times in zip(items, timings):
        median = float(np.median(times))
        rows.append({**key, "median_ms": median, "min_ms": min(times), "max_ms": max(times), "round_ms": times,
                     "gb_per_s": key["moved_bytes"] / median / 1e6 if key["moved_bytes"] else None})
    command = "PYTHONPATH=lib python3 " + " ".join(["benchmarks/decoder_parts.py", *(argv or sys.argv[1:])])
    report = {"command": command, "seconds": time.monotonic() - start, "timing": policy.describe(),
              "rounds": args.rounds, "deployed": dataclasses.asdict(deployed), "formats": formats, "rows": rows,
              "provenance": {"gpu_name": properties.name, "sm_count": sms, "torch": torch.__version__,
                             "triton": triton.__version__, "cuda": torch.version.cuda, "timer_retries": timer.retries,
                             "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}}
    slug = "decoder_parts_" + gpu_slug(properties.name) + (f"_{args.label}" if args.label else "")
    args.out_dir.mkdir(parents=True, exist_ok=True)
    write_text_atomically(args.out_dir / f"{slug}.json", json.dumps(report, indent=1) + "\n")
    write_text_atomically(args.out_dir / f"{slug}.md", markdown(report))
    print(f"wrote {args.out_dir / slug}.md/.json in {report['seconds']:.0f} s")
    return 0


def markdown(report: dict) -> str:
    table = pd.DataFrame([
        {"projection": row["projection"], "output": row["output"], "kernel": row["kernel"], "steps": row["steps"],
         "longest code": row.get("max_code_length", RECORDED_BEFORE_THE_OPTION), "setting": row["setting"],
         "programs": row["programs"], "registers": row["n_regs"],
         "median ms": f"{row['median_ms']:.4f}", "min-max ms": f"{row['min_ms']:.4f}-{row['max_ms']:.4f}",
         "GB/s": "" if row["gb_per_s"] is None else f"{row['gb_per_s']:.0f}"}
        for row in report["rows"]]).sort_values(
        ["projection", "output", "kernel", "steps", "longest code", "setting"],
        ascending=[True, True, False, False, False, True])
    formats = pd.DataFrame([{"projection": row["projection"], "steps": row["steps"],
                             "max_code_length": row.get("max_code_length", RECORDED_BEFORE_THE_OPTION), **row}
                            for row in report["formats"]]).assign(
        compact_ratio=lambda frame: frame["compact_ratio"].map("{:.4f}".format),
        compact_exponent_bits=lambda frame: frame["compact_exponent_bits"].map("{:.4f}".format))
    provenance = report["provenance"]
    return "\n".join([
        f"# The decoder's kernels timed apart on {provenance['gpu_name']}", "",
        f"Command: `{report['command']}` ({provenance['date']}, {report['seconds']:.0f} s; torch {provenance['torch']}, "
        f"Triton {provenance['triton']}). Synthetic Llama-3.1-8B MLP weights (`synthetic.synthetic_bits`, seeds 0, 1, "
        f"2). Every variant checked bit for bit first. Medians over {report['rounds']} shuffled rounds of the Timer's "
        f"median ({report['timing']['method']}). Stream setting: chunks a program x warps x programs an SM; patch "
        "setting: groups a block x warps. GB/s: the least bytes the stream kernel moves (stream, offsets, output, and "
        "for BF16 the sign+mantissa bytes) over its time.", "",
        "Stream layouts:", "", markdown_table(formats), "", markdown_table(table)]) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
