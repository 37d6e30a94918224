"""The compressed-weight matmul as a kernel family: the execution pipeline is a parameter beside the reconstructive
matmul's config and the decoder's SM share, so the collector, replay and every search strategy work on it unchanged.

Shapes are (M, N, K) = (batch, out features, in features); W (K x N) is a synthetic weight with the exponent
statistics of real trained MLP weights. A measured call is one steady-state step of a projection, so the latency
includes preprocessing and matmul: with `decode_schedule` "overlapped", the decoding pipelines decode the next weight
on a side stream limited to `decode_sm_percent` of the SMs while the matmul of the current one runs; with "serial",
they decode the current weight on every SM and then multiply, on one stream (schedule.PrefetchedProjection).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np
import torch

from tunebench.kernels import complete_config, numerics
from tunebench.kernels.compressed_matmul import compact, decoders, reconstruct, synthetic
from tunebench.kernels.compressed_matmul.device import DeviceWeight, to_device
from tunebench.kernels.compressed_matmul.format import bits_to_bf16
from tunebench.kernels.compressed_matmul.pipelines import PIPELINES, get_pipeline
from tunebench.kernels.compressed_matmul.schedule import PrefetchedProjection, decoder_programs, sm_count
from tunebench.space import Choice, Constraint, Ordinal, Space

NAME = "compressed_matmul"
SHAPE_NAMES = ("M", "N", "K")
DTYPES = ("bfloat16",)
VENDOR_LIBRARY = "torch.matmul (cuBLAS) on the uncompressed BF16 weight"
BATCHES = (1, 4, 16, 64, 256, 1024)
# Llama-3.1-8B MLP projections as (N, K): gate and up (4096 -> 14336) share a shape; down is 14336 -> 4096.
LLAMA_MLP_SHAPES = tuple((batch, n, k) for batch in BATCHES for n, k in ((14336, 4096), (4096, 14336)))
SHAPE_SETS = {"default": LLAMA_MLP_SHAPES}
TOLERANCE = {"bfloat16": 1e-2}  # as the GEMM's: one BF16 rounding of the output plus reordered sums
# The decoder grid's size and the streams work is queued on (see `run`); `compile_only` ignores both.
LAUNCH_PARAMETERS = ("decode_sm_percent", "decode_schedule")
relative_error = numerics.relative_error  # ||out - ref|| / ||ref|| in fp64; inf on NaN or inf
DECODE_SM_PERCENT = (50, 100)  # the decoder's share of the SMs; 25 % was never best on an H100
DECODE_SCHEDULES = ("overlapped", "serial")  # serial: the side stream's overlap slowed decode_then_cublas on both GPUs
# What configs recorded before a parameter joined did: overlapped decoding before stop 70; split sums by launches after
# the kernel before stop 92 (whose first sweep summed them in the kernel and says so in a column of its own); the
# compiler's choice of registers before stop 93.
ADDED_PARAMETERS = {"decode_schedule": "overlapped", "split_reduction": "separate_launches", "register_cap": "none"}
# The most K that one loop step of all split-K programs covers: the space's largest BLOCK_K x SPLIT_K.
_LARGEST_K_BLOCKS = math.prod(max(parameter.values) for parameter in reconstruct.matmul_parameters()
                              if parameter.name in ("BLOCK_K", "SPLIT_K"))


# ---------------------------------------------------------------------------------------------
# Config space
# ---------------------------------------------------------------------------------------------

def config_space() -> Space:
    """Pipeline x reconstructive-matmul config x decoder SM share x decode schedule; parameters a pipeline does not
    use are pinned to one canonical value, so every valid config is a distinct measurement."""
    matmul = reconstruct.matmul_parameters()
    canonical = {parameter.name: parameter.values[0] for parameter in matmul}
    parameters = [Choice("pipeline", PIPELINES), *matmul, Ordinal("decode_sm_percent", DECODE_SM_PERCENT),
                  Choice("decode_schedule", DECODE_SCHEDULES)]

    def uses_matmul(config: Mapping[str, Any]) -> bool:
        return get_pipeline(config["pipeline"]).matmul_source is not None

    def decodes(config: Mapping[str, Any]) -> bool:
        return get_pipeline(config["pipeline"]).preprocesses

    constraints = [
        Constraint("cublas_has_no_tiles",
                   lambda c: uses_matmul(c) or all(c[name] == value for name, value in canonical.items()),
                   f"decode_then_cublas pins the matmul parameters to {canonical}"),
        Constraint("no_decoder_no_share", lambda c: decodes(c) or c["decode_sm_percent"] == 100,
                   "direct_palette has no decoder: decode_sm_percent is 100"),
        Constraint("no_decoder_no_schedule", lambda c: decodes(c) or c["decode_schedule"] == "overlapped",
                   'direct_palette has no decoder: decode_schedule is "overlapped"'),
        Constraint("unsplit_sums_nothing",
                   lambda c: c["SPLIT_K"] > 1 or c["split_reduction"] == canonical["split_reduction"],
                   f'an unsplit config has no partial sums: split_reduction is "{canonical["split_reduction"]}"'),
        Constraint("caps_only_a_sum_in_the_kernel",
                   lambda c: (c["SPLIT_K"] > 1 and c["split_reduction"] == "in_kernel")
                   or c["register_cap"] == canonical["register_cap"],
                   f'only a split summed in the kernel caps its registers: register_cap is '
                   f'"{canonical["register_cap"]}"'),
        Constraint("serial_decodes_on_every_sm",
                   lambda c: c["decode_schedule"] == "overlapped" or c["decode_sm_percent"] == 100,
                   'a "serial" decode has the GPU to itself: decode_sm_percent is 100'),
        *reconstruct.matmul_constraints(applies=uses_matmul),
    ]
    return Space(parameters, constraints, name=NAME)


# ---------------------------------------------------------------------------------------------
# Inputs and reference
# ---------------------------------------------------------------------------------------------

@dataclass
class CompressedMatmulInputs:
    """One problem: activations, the compressed weight and its decode buffers, outputs, allocated once."""

    x: torch.Tensor  # (M, K) bf16
    weight: DeviceWeight
    bf16_weight: torch.Tensor  # (K, N): the uncompressed weight, for the vendor library and the reference
    out: torch.Tensor  # (M, N) bf16
    split: reconstruct.SplitBuffers  # where split configs' partial sums meet
    projections: dict[str, PrefetchedProjection]
    sm_count: int
    primed_for: dict[str, tuple] = field(default_factory=dict)  # pipeline -> config its buffer was decoded by


def check_shape(shape: tuple[int, ...]) -> tuple[int, int, int]:
    """Validate an (M, N, K) shape and return it as plain ints."""
    if len(shape) != 3:
        raise ValueError(f"compressed_matmul shape must be (M, N, K), got {shape!r}")
    for name, value in zip(SHAPE_NAMES, shape):
        if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < 1:
            raise ValueError(f"compressed_matmul shape {name}={value!r} must be a positive int")
    return int(shape[0]), int(shape[1]), int(shape[2])


@functools.lru_cache(maxsize=2)  # the sweep alternates between the two Llama MLP weight shapes
def _compressed_weight(k: int, n: int, seed: int) -> tuple[np.ndarray, compact.CompactWeight]:
    bits = synthetic.synthetic_bits((k, n), (seed, k, n))
    return bits, compact.compress(bits)


def make_inputs(shape: tuple[int, ...], dtype: str, device: str | torch.device = "cuda",
                seed: int = 0) -> CompressedMatmulInputs:
    """Seeded inputs: a synthetic weight with real exponent statistics (compressed on the CPU, cached for the last two
    weight shapes) and normal random activations scaled by 1/sqrt(K) (never zeros)."""
    m, n, k = check_shape(shape)
    if dtype not in DTYPES:
        raise ValueError(f"unknown dtype {dtype!r}; allowed: {', '.join(DTYPES)}")
    bits, compact_weight = _compressed_weight(k, n, seed)
    weight = to_device(compact_weight, device)
    generator = torch.Generator(device="cpu").manual_seed(seed)
    x = (torch.randn((m, k), generator=generator) / math.sqrt(k)).to(device=device, dtype=torch.bfloat16)
    device = torch.device(device)
    side_stream = torch.cuda.Stream(device) if device.type == "cuda" else None
    return CompressedMatmulInputs(
        x=x, weight=weight, bf16_weight=bits_to_bf16(bits).to(device),
        out=torch.empty((m, n), dtype=torch.bfloat16, device=device),
        split=reconstruct.SplitBuffers.zeroed(m, n, device),
        projections={name: PrefetchedProjection(get_pipeline(name), weight, side_stream) for name in PIPELINES},
        sm_count=sm_count(device),
    )


def reference(inputs: CompressedMatmulInputs) -> torch.Tensor:
    """The product in fp32 arithmetic on the upcast uncompressed operands."""
    return torch.matmul(inputs.x.float(), inputs.bf16_weight.float())



# ---------------------------------------------------------------------------------------------
# Wrappers
# ---------------------------------------------------------------------------------------------

def run(config: Mapping[str, Any], inputs: CompressedMatmulInputs) -> torch.Tensor:
    """One steady-state step of the configured pipeline into inputs.out. The first call with a config decodes the
    current buffer with that config's decoder first, so the checked output depends on it; a serial step decodes it
    again on every call."""
    config = complete_config(NAME, config)
    pipeline = config["pipeline"]
    projection = inputs.projections[pipeline]
    programs = decoder_programs(config["decode_sm_percent"], inputs.sm_count)
    matmul_config = config if get_pipeline(pipeline).matmul_source is not None else None
    if config["decode_schedule"] == "serial":
        return projection.serial_step(inputs.x, matmul_config, programs, inputs.out, inputs.split)
    key = tuple(sorted(config.items()))
    if inputs.primed_for.get(pipeline) != key:
        projection.prime(programs)
        inputs.primed_for[pipeline] = key
    return projection.step(inputs.x, matmul_config, programs, inputs.out, inputs.split)


def run_vendor(inputs: CompressedMatmulInputs) -> torch.Tensor:
    """cuBLAS on the uncompressed BF16 weight."""
    return torch.matmul(inputs.x, inputs.bf16_weight, out=inputs.out)


def compile_only(config: Mapping[str, Any], shape: tuple[int, ...], dtype: str) -> None:
    """Compile the config's decoder and reconstructive matmul for the shape's specialization without launching."""
    m, n, k = check_shape(shape)
    pipeline = get_pipeline(config["pipeline"])
    if pipeline.decoder_output is not None:
        decoders.compile_decoder(pipeline.decoder_output, (k, n))
    if pipeline.matmul_source is not None:
        reconstruct.compile_matmul(config, pipeline.matmul_source, (m, n, k))


def specialization(shape: tuple[int, ...]) -> tuple[bool | int, ...]:
    """The part of a shape that selects distinct binaries: Triton specializes the kernels' N, K (and strides equal to
    them) on == 1 and divisibility by 16, M is exempt; and the matmul's EVEN_K (K a multiple of BLOCK_K x SPLIT_K,
    powers of two) follows from the largest power of two that divides K, up to the space's largest BLOCK_K x SPLIT_K."""
    _, n, k = check_shape(shape)
    return (*(flag for value in (n, k) for flag in (value == 1, value % 16 == 0)), min(k & -k, _LARGEST_K_BLOCKS))


# ---------------------------------------------------------------------------------------------
# Cost model
# ---------------------------------------------------------------------------------------------

def flops(shape: tuple[int, ...]) -> int:
    """Floating-point operations of one product (a multiply and an add per term)."""
    m, n, k = check_shape(shape)
    return 2 * m * n * k


def bytes_moved(shape: tuple[int, ...], dtype: str) -> int:
    """The fewest bytes a pipeline moves: x read and out written in BF16, and the resident palette form read by the
    direct-palette matmul (sign+mantissa byte and 4-bit code a weight; verbatim groups left out)."""
    m, n, k = check_shape(shape)
    return 2 * (m * k + m * n) + k * n * 3 // 2
