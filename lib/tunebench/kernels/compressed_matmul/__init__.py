"""Matmuls with losslessly compressed BF16 weights (Unweight-style): the format and its coders, Triton decoders, the
reconstructive matmul, four execution pipelines and the SM split. The package is the kernel family `compressed_matmul`.

Modules: format (palette form), huffman, stream (parallel entropy-coded layout), compact (storage form), device
(tensors), decoders and reconstruct (Triton), pipelines, schedule (SM split, overlapped steps), synthetic (weights
with real exponent statistics), family (the kernel-family interface re-exported here); mlp (models' projections),
autotune (coordinate descent over projections), selection_file (the per-(model, GPU) choice file) and dispatch (the
runtime pick per projection and batch size).
"""

from tunebench.kernels.compressed_matmul.family import (
    ADDED_PARAMETERS, DTYPES, LAUNCH_PARAMETERS, NAME, SHAPE_NAMES, SHAPE_SETS, TOLERANCE, VENDOR_LIBRARY, bytes_moved,
    check_shape, compile_only, config_space, flops, make_inputs, reference, relative_error, run, run_vendor,
    specialization,
)

# Its split-K reduction, and what sets a register cap's count (see kernel_source_files).
SOURCE_MODULES = ("tunebench.kernels.split_k", "tunebench.kernels.cubin", "tunebench.kernels.occupancy")

__all__ = [
    "NAME", "SHAPE_NAMES", "DTYPES", "VENDOR_LIBRARY", "TOLERANCE", "config_space", "make_inputs", "reference",
    "relative_error", "run", "run_vendor", "compile_only", "specialization", "check_shape", "flops", "bytes_moved",
    "SHAPE_SETS", "LAUNCH_PARAMETERS", "ADDED_PARAMETERS", "SOURCE_MODULES",
]
