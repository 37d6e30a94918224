"""The compressed-weight stream decoder's inner loop in SASS, without a GPU: Triton compiles the kernel for sm_90
here and the nvdisasm bundled with it disassembles the loop; the tables count its instructions a step by kind.

    .venv/bin/python benchmarks/decoder_sass.py                        # the installed Triton
    PYTHONPATH=/tmp/t36 .venv/bin/python benchmarks/decoder_sass.py   # the device image's Triton 3.6, unpacked there

(`pip download triton==3.6.0 --no-deps` and unzip the wheel into /tmp/t36.) A step decodes two lanes a thread; a
loop iteration takes one step, or two where the buffers are topped up every other step (codes of at most 8 bits).
What to look for: `BAR`, `LDS` and `STS` in the loop are a layout conversion through shared memory, `LDL` and `STL`
registers spilled to local memory; a load whose result is used a few instructions later stalls every step. Writes results/compressed_pipelines/decoder_sass_
triton<version>[_<label>].md and .json atomically.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from tunebench.files import write_text_atomically
from tunebench.kernels.compressed_matmul import decoders
from tunebench.kernels.compressed_matmul.stream import StreamLayout
from tunebench.tables import markdown_table

POINTER_TYPES = {"torch.uint8": "*u8", "torch.int16": "*i16", "torch.int32": "*i32", "torch.int64": "*i64"}
MEMORY_KINDS = ("LDG", "STG", "LDS", "STS", "BAR", "LDL", "STL")  # LDL, STL: registers spilled to local memory
_INSTRUCTION = re.compile(r"^\s*/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)")
_LABEL = re.compile(r"^(\.L_x_\d+):")
_BACK_BRANCH = re.compile(r"BRA\s+`?\((\.L_x_\d+)\)")


def loop_opcodes(sass: str) -> list[str]:
    """The opcodes of the innermost loop: the shortest body of a backward branch with more than 5 instructions (the
    one-instruction trap loop at a kernel's end excluded)."""
    lines = sass.splitlines()
    labels = {match.group(1): index for index, line in enumerate(lines) if (match := _LABEL.match(line))}
    best: list[str] | None = None
    for index, line in enumerate(lines):
        match = _BACK_BRANCH.search(line)
        if match and labels.get(match.group(1), index) < index:
            body = [op.group(1) for text in lines[labels[match.group(1)]:index + 1] if (op := _INSTRUCTION.match(text))]
            if len(body) > 5 and (best is None or len(body) < len(best)):
                best = body
    if best is None:
        raise ValueError("no loop of more than 5 instructions in the SASS")
    return best


def compile_stream_kernel(output: str, paired: bool, num_warps: int) -> tuple[str, int]:
    """SASS and registers of the stream kernel for `output` at the default layout, N even (`paired`) or odd."""
    sign_mantissa, out = decoders._stream_dtypes(output, paired)
    pointers = ("words_ptr", "chunk_starts_ptr", "lane_bits_ptr", "table_ptr", "sign_mantissa_ptr", "out_ptr")
    dtypes = ("torch.int32", "torch.int64", "torch.int16", "torch.int16", str(sign_mantissa), str(out))
    signature = {name: POINTER_TYPES[dtype] for name, dtype in zip(pointers, dtypes)}
    signature.update(num_chunks="i32", num_bytes="i32", K="i32", N="i32")
    settings = decoders.DecoderSettings(num_warps=num_warps)
    constants = decoders._launch_arguments(StreamLayout(), output, settings)
    constants.pop("num_warps")
    constants.update(NARROW=True, PAIRED=paired)
    signature.update({name: "constexpr" for name in constants})
    kernel = decoders.decode_stream_kernel
    # Pointers 16-byte aligned and N, K and num_bytes divisible by 16, as for the Llama MLP weights; num_chunks is not
    # specialized.
    divisible = [kernel.arg_names.index(name) for name in pointers + ("num_bytes", "K", "N")]
    source = ASTSource(fn=kernel, signature=signature,
                       constexprs={(kernel.arg_names.index(name),): value for name, value in constants.items()},
                       attrs={(index,): [["tt.divisibility", 16]] for index in divisible})
    compiled = triton.compile(source, target=GPUTarget("cuda", 90, 32),
                              options={"num_warps": num_warps, "maxnreg": decoders._register_cap(settings, paired)})
    tools = Path(triton.__file__).parent / "backends" / "nvidia" / "bin"
    with tempfile.TemporaryDirectory() as folder:
        cubin = Path(folder) / "kernel.cubin"
        cubin.write_bytes(compiled.asm["cubin"])
        sass = subprocess.run([str(tools / "nvdisasm"), "-c", str(cubin)], check=True, capture_output=True,
                              text=True).stdout
        usage = subprocess.run([str(tools / "cuobjdump"), "-res-usage", str(cubin)], check=True, capture_output=True,
                               text=True).stdout
    return sass, int(re.search(r"REG:(\d+)", usage).group(1))


def describe(output: str, paired: bool, num_warps: int) -> dict:
    sass, registers = compile_stream_kernel(output, paired, num_warps)
    opcodes = loop_opcodes(sass)
    kinds = collections.Counter(opcode.split(".")[0] for opcode in opcodes)
    memory = collections.Counter(opcode for opcode in opcodes if opcode.split(".")[0] in MEMORY_KINDS)
    steps = decoders._steps_a_refill(StreamLayout())
    return {"output": output, "N": "even" if paired else "odd", "registers": registers, "steps_a_loop": steps,
            "loop_instructions": len(opcodes), "instructions_a_step": len(opcodes) / steps,
            **{kind: kinds.get(kind, 0) for kind in MEMORY_KINDS},
            "memory_opcodes": dict(sorted(memory.items())), "opcodes": dict(kinds.most_common())}


def markdown(report: dict) -> str:
    rows = [[row["output"], row["N"], row["registers"], row.get("steps_a_loop", 1), row["loop_instructions"],
             row["loop_instructions"] / row.get("steps_a_loop", 1), *(row[kind] for kind in MEMORY_KINDS),
             ", ".join(f"{opcode} {count}" for opcode, count in row["memory_opcodes"].items())]
            for row in report["rows"]]
    columns = ["output", "N", "registers", "steps a loop iteration", "loop instructions", "instructions a step",
               *MEMORY_KINDS, "memory instructions"]
    table = markdown_table(pd.DataFrame(rows, columns=columns))
    return (f"# The stream decoder's loop in SASS (Triton {report['triton']}, sm_90)\n\nCommand: `{report['command']}` "
            f"({report['seconds']:.0f} s). Compiled here, not on a GPU; {report['num_warps']} warps, the default "
            "layout. A step decodes two lanes a thread; the memory columns count a loop iteration.\n\n" + table + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--outputs", default=",".join(decoders.OUTPUTS),
                        help="a subset of " + ",".join(decoders.OUTPUTS))
    parser.add_argument("--num-warps", type=int, default=decoders.DECODER.num_warps)
    parser.add_argument("--out-dir", type=Path, default=Path("results/compressed_pipelines"))
    parser.add_argument("--label", default="", help="suffix of the output files")
    args = parser.parse_args(argv)
    outputs = args.outputs.split(",")
    for output in outputs:
        if output not in decoders.OUTPUTS:
            raise SystemExit(f"unknown output {output!r}; allowed: {', '.join(decoders.OUTPUTS)}")
    if args.num_warps not in (1, 2, 4, 8):
        raise SystemExit(f"--num-warps {args.num_warps} is not allowed; allowed: 1, 2, 4, 8")
    start = time.monotonic()
    rows = []
    for output in outputs:
        for paired in (True, False) if output != "codes" else (True,):  # codes always go out two bytes at a time
            rows.append(describe(output, paired, args.num_warps))
            print(f"{output}, N {rows[-1]['N']}: {rows[-1]['instructions_a_step']:g} instructions a step", flush=True)
    report = {"command": "python3 benchmarks/decoder_sass.py " + " ".join(sys.argv[1:] if argv is None else argv),
              "seconds": time.monotonic() - start, "triton": triton.__version__, "num_warps": args.num_warps,
              "triton_path": os.path.dirname(triton.__file__), "rows": rows}
    slug = f"decoder_sass_triton{triton.__version__}" + (f"_{args.label}" if args.label else "")
    write_text_atomically(args.out_dir / f"{slug}.json", json.dumps(report, indent=1) + "\n")
    write_text_atomically(args.out_dir / f"{slug}.md", markdown(report))
    print(f"wrote {args.out_dir / slug}.md/.json")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
