"""The four compressed-weight pipelines on the Llama-3.1-8B MLP projections (synthetic weights with the exponent
statistics of real trained ones), on one GPU: bit-exactness first, then per (projection, batch) each pipeline's
preprocessing, matmul and total time beside uncompressed torch.matmul (cuBLAS) and the same Triton loop on BF16.

    PYTHONPATH=lib python3 benchmarks/compressed_pipelines.py          # ~3 minutes on an H100

Matmul times are the best of a short list of reconstructive-matmul configs (CANDIDATES; the exhaustive space is the
kernel family's, swept by the collector). "serial" = preprocess + matmul on one stream; "overlapped" = one step of
schedule.PrefetchedProjection (the next weight decoded on a side stream with a share of the SMs while the matmul
runs), at the best of the SM shares. Writes results/compressed_pipelines/<gpu>.md and .json atomically.
"""

from __future__ import annotations

import argparse
import datetime
import json
import re
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch
import triton

from tunebench.files import write_text_atomically
from tunebench.kernels.compressed_matmul import compact, decoders, format, reconstruct, synthetic
from tunebench.kernels.compressed_matmul.device import to_device
from tunebench.kernels.compressed_matmul.family import BATCHES
from tunebench.kernels.compressed_matmul.pipelines import PIPELINES, get_pipeline
from tunebench.kernels.compressed_matmul.schedule import PrefetchedProjection, decoder_programs
from tunebench.measure.timing import Timer, TimingPolicy
from tunebench.tables import markdown_table

# (BLOCK_M, BLOCK_N, BLOCK_K, SPLIT_K, num_warps, num_stages): decode-sized tiles, split-K for few output tiles,
# and prefill-sized tiles; all inside the family's resource model. (64, 128, 64) takes 2 stages: with 3, Triton
# 3.6's palette-source binary fails with a misaligned address on an H100.
CANDIDATES = [
    (16, 64, 64, 1, 4, 3), (16, 64, 128, 1, 8, 3), (16, 64, 64, 4, 4, 3), (16, 64, 128, 4, 8, 2),
    (16, 64, 64, 16, 4, 3), (16, 128, 64, 16, 8, 3),
    (16, 128, 64, 1, 8, 3), (16, 128, 64, 4, 8, 3), (64, 64, 64, 1, 8, 3), (64, 128, 64, 1, 8, 2),
    (128, 64, 64, 1, 8, 3), (128, 128, 64, 1, 8, 3),
]
TOLERANCE = 1e-2  # relative Frobenius error against torch.matmul, as the family's
SM_PERCENTS = (25, 50, 100)  # decoder shares of the SMs measured here (the family's space keeps 50 and 100)


def as_config(candidate: tuple[int, ...]) -> dict[str, int | str]:
    return {**dict(zip(reconstruct.MATMUL_PARAMETERS, candidate)), "split_reduction": "in_kernel"}


def gpu_slug(name: str) -> str:
    match = re.search(r"\b([a-z]\d{2,3})\b", name.lower())
    return match.group(1) if match else re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")


def relative_error(out: torch.Tensor, expected: torch.Tensor) -> float:
    out, expected = out.double(), expected.double()
    return float((out - expected).norm() / expected.norm()) if bool(torch.isfinite(out).all()) else float("inf")


def check_exactness(name: str, bits: np.ndarray, weight, tensors, programs: int) -> dict:
    """Decoders equal the CPU reference; x = the identity gives W back through every pipeline exactly (values: the
    fp32 accumulator turns -0 into +0); decode_then_cublas equals torch.matmul of the decoded weight bit for bit."""
    expected = {"codes": torch.from_numpy(weight.palette_form.codes).cuda(),
                "exponents": torch.from_numpy(format.split_bits(bits)[0]).cuda(),
                "bfloat16": format.bits_to_bf16(bits).cuda()}
    for output in decoders.OUTPUTS:
        out = decoders.output_buffer(tensors, output)
        out.view(torch.uint8).fill_(0xFF)
        decoders.decode(tensors, output, out, programs)
        if not torch.equal(out.view(torch.uint8), expected[output].view(torch.uint8)):
            raise SystemExit(f"{name}: decoder to {output} differs from the CPU reference")
    identity = torch.eye(bits.shape[0], dtype=torch.bfloat16, device="cuda")
    x = torch.randn((16, bits.shape[0]), generator=torch.Generator().manual_seed(0)).to("cuda", torch.bfloat16)
    reference = torch.matmul(x, expected["bfloat16"])
    config = as_config(CANDIDATES[0])
    results = {}
    for pipeline in PIPELINES:
        exact = torch.equal(get_pipeline(pipeline)(identity, tensors, config, programs), expected["bfloat16"])
        out = get_pipeline(pipeline)(x, tensors, config, programs)
        if get_pipeline(pipeline).matmul_source is None:
            exact = exact and torch.equal(out, reference)
        if not exact:
            raise SystemExit(f"{name}: pipeline {pipeline} is not bit-exact")
        results[pipeline] = {"bit_exact": exact, "relative_error_vs_torch": relative_error(out, reference)}
        del out
    return results


def median_ms(timer: Timer, function) -> float:
    return float(np.median(timer.time(function)))


def best_matmul(timer: Timer, x, out, split, source: str, **operands) -> tuple[float, dict]:
    timings = []
    for candidate in CANDIDATES:
        config = as_config(candidate)
        reconstruct.multiply(x, source, config, out, split, **operands)
        timings.append((median_ms(timer, lambda: reconstruct.multiply(x, source, config, out, split, **operands)),
                        config))
    return min(timings, key=lambda timing: timing[0])


def measure_projection(name: str, tensors, bf16_weight: torch.Tensor, timer: Timer, sms: int) -> list[dict]:
    k, n = tensors.shape
    scratch = {pipeline: get_pipeline(pipeline).scratch(tensors) for pipeline in PIPELINES}
    preprocess_ms = {}
    for pipeline in PIPELINES:
        p = get_pipeline(pipeline)
        preprocess_ms[pipeline] = {
            share: median_ms(timer, lambda: p.preprocess(tensors, scratch[pipeline], decoder_programs(share, sms)))
            if p.preprocesses else 0.0 for share in SM_PERCENTS}
        p.preprocess(tensors, scratch[pipeline], sms)
    side = torch.cuda.Stream()
    rows = []
    for batch in BATCHES:
        x = torch.randn((batch, k), generator=torch.Generator().manual_seed(batch)).to("cuda", torch.bfloat16)
        out = torch.empty((batch, n), dtype=torch.bfloat16, device="cuda")
        split = reconstruct.SplitBuffers.zeroed(batch, n, "cuda")
        reference = torch.matmul(x, bf16_weight)
        vendor_ms = median_ms(timer, lambda: torch.matmul(x, bf16_weight, out=out))
        triton_bf16_ms, triton_bf16_config = best_matmul(timer, x, out, split, "bfloat16", bf16_weight=bf16_weight)
        row = {"projection": name, "M": batch, "N": n, "K": k, "cublas_ms": vendor_ms,
               "triton_bf16_ms": triton_bf16_ms, "triton_bf16_config": triton_bf16_config, "pipelines": {}}
        direct_ms, direct_config = best_matmul(timer, x, out, split, "palette", weight=tensors)
        exponent_ms, exponent_config = best_matmul(timer, x, out, split, "exponents", weight=tensors,
                                                   exponents=scratch["decode_exponents"])
        matmul = {"decode_then_cublas": (median_ms(timer, lambda: torch.matmul(x, scratch["decode_then_cublas"], out=out)), None),
                  "decode_exponents": (exponent_ms, exponent_config),
                  "transcode_palette": (median_ms(timer, lambda: reconstruct.multiply(
                      x, "palette", direct_config, out, split, tensors, codes=scratch["transcode_palette"])),
                      direct_config),
                  "direct_palette": (direct_ms, direct_config)}
        for pipeline in PIPELINES:
            matmul_ms, config = matmul[pipeline]
            steps = {}
            for share in SM_PERCENTS if get_pipeline(pipeline).preprocesses else (100,):
                projection = PrefetchedProjection(get_pipeline(pipeline), tensors, side)
                programs = decoder_programs(share, sms)
                projection.prime(programs)
                out.fill_(float("nan"))
                projection.step(x, config, programs, out, split)
                error = relative_error(out, reference)
                if not error <= TOLERANCE:
                    raise SystemExit(f"{name} M={batch} {pipeline}: relative error {error:.3g} > {TOLERANCE}")
                steps[share] = median_ms(timer, lambda: projection.step(x, config, programs, out, split))
            best_share = min(steps, key=steps.get)
            preprocess = preprocess_ms[pipeline][100]
            row["pipelines"][pipeline] = {
                "preprocess_ms": preprocess, "preprocess_ms_by_sm_percent": preprocess_ms[pipeline],
                "matmul_ms": matmul_ms, "matmul_config": config, "serial_ms": preprocess + matmul_ms,
                "overlapped_ms": steps[best_share], "overlapped_sm_percent": best_share,
                "overlapped_ms_by_sm_percent": steps}
        rows.append(row)
        summary = ", ".join(f"{p} {row['pipelines'][p]['serial_ms']:.3f}" for p in PIPELINES)
        print(f"{name} M={batch}: cuBLAS {vendor_ms:.3f} ms; serial {summary}", flush=True)
    return rows


def markdown(report: dict) -> str:
    lines = [f"# Compressed-weight pipelines on {report['provenance']['gpu_name']}", "",
             f"Command: `{report['command']}` ({report['provenance']['date']}, {report['seconds']:.0f} s). "
             f"Weights: synthetic Llama-3.1-8B MLP projections with the exponent statistics of "
             f"{report['statistics_source']} (compact form {report['compact_ratio']:.3f}x, palette form "
             f"{report['palette_ratio']:.3f}x smaller than BF16). Times in ms, medians ({report['timing']['method']}).",
             "", "Bit-exactness: every decoder equals the CPU reference, x = the identity gives W back through every "
             "pipeline exactly, and decode_then_cublas equals torch.matmul of the decoded weight bit for bit: "
             + ("yes" if report["bit_exact"] else "NO") + ".", "",
             "preprocess: decoding at 100 % of the SMs; matmul: best of the candidate configs; serial = preprocess + "
             "matmul; overlapped: one prefetching step (next weight decoded on a side stream at the best SM share, "
             "in parentheses). Ratios are cuBLAS time / time.", "",
             markdown_table(pd.DataFrame([
                 {"projection": row["projection"], "M": row["M"], "cuBLAS": f"{row['cublas_ms']:.4f}",
                  "Triton BF16": f"{row['triton_bf16_ms']:.4f}", "pipeline": pipeline,
                  "preprocess": f"{timing['preprocess_ms']:.4f}", "matmul": f"{timing['matmul_ms']:.4f}",
                  "serial": f"{timing['serial_ms']:.4f}",
                  "overlapped (SM %)": f"{timing['overlapped_ms']:.4f} ({timing['overlapped_sm_percent']})",
                  "cuBLAS / serial": f"{row['cublas_ms'] / timing['serial_ms']:.2f}",
                  "cuBLAS / overlapped": f"{row['cublas_ms'] / timing['overlapped_ms']:.2f}"}
                 for row in report["rows"] for pipeline, timing in row["pipelines"].items()]))]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out-dir", type=Path, default=Path("results/compressed_pipelines"))
    parser.add_argument("--projections", default="gate,up,down", help="a subset of gate,up,down")
    args = parser.parse_args(argv)
    start = time.monotonic()
    torch.backends.cuda.matmul.allow_tf32 = False
    policy = TimingPolicy()
    timer = Timer(policy)
    properties = torch.cuda.get_device_properties(0)
    sms = properties.multi_processor_count
    rows, exactness, ratios = [], {}, []
    for index, name in enumerate(args.projections.split(",")):
        shape = synthetic.LLAMA_3_1_8B_MLP[name]
        bits = synthetic.synthetic_bits(shape, seed=index)
        weight = compact.compress(bits)
        figures = compact.figures(bits, weight)
        ratios.append((figures.compact_ratio, figures.palette_ratio))
        tensors = to_device(weight, "cuda")
        exactness[name] = check_exactness(name, bits, weight, tensors, sms)
        print(f"{name} {shape}: bit-exact; compact {figures.compact_ratio:.3f}x, palette {figures.palette_ratio:.3f}x",
              flush=True)
        rows += measure_projection(name, tensors, format.bits_to_bf16(bits).cuda(), timer, sms)
        del tensors
        torch.cuda.empty_cache()
    command = "PYTHONPATH=lib python3 " + " ".join(["benchmarks/compressed_pipelines.py", *(argv or sys.argv[1:])])
    report = {
        "command": command, "seconds": time.monotonic() - start, "timing": policy.describe(),
        "statistics_source": json.loads(synthetic.STATISTICS_PATH.read_text())["source"],
        "compact_ratio": float(np.mean([r[0] for r in ratios])), "palette_ratio": float(np.mean([r[1] for r in ratios])),
        "bit_exact": all(p["bit_exact"] for e in exactness.values() for p in e.values()), "exactness": exactness,
        "provenance": {"gpu_name": properties.name, "sm_count": sms, "torch": torch.__version__,
                       "triton": triton.__version__, "cuda": torch.version.cuda, "timer_retries": timer.retries,
                       "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")},
        "candidates": [as_config(candidate) for candidate in CANDIDATES], "rows": rows,
    }
    args.out_dir.mkdir(parents=True, exist_ok=True)
    slug = gpu_slug(properties.name)
    write_text_atomically(args.out_dir / f"{slug}.json", json.dumps(report, indent=1) + "\n")
    write_text_atomically(args.out_dir / f"{slug}.md", markdown(report))
    print(f"wrote {args.out_dir / slug}.md/.json in {report['seconds']:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
