"""Kernel families: one module each with its Triton source, config space, inputs, reference and cost model.

`get_kernel(name)` returns a family's module; every family module provides the names in `KERNEL_INTERFACE`, and may
declare `ADDED_PARAMETERS` (see `complete_config`).
"""

from __future__ import annotations

import hashlib
import importlib
from pathlib import Path
from types import ModuleType
from typing import Any, Mapping

KERNELS = ("matmul", "matmul_tma", "layernorm", "softmax", "compressed_matmul")
KERNEL_INTERFACE = (
    "NAME", "SHAPE_NAMES", "DTYPES", "VENDOR_LIBRARY", "TOLERANCE",
    "config_space", "make_inputs", "reference", "relative_error", "run", "run_vendor",
    "compile_only", "specialization", "check_shape", "flops", "bytes_moved", "SHAPE_SETS", "LAUNCH_PARAMETERS",
)


def launch_parameters(name: str) -> tuple[str, ...]:
    """The parameters of kernel family `name` that only size its launch grid, so that configs differing in them alone
    share one compiled binary; empty for a family that declares none or that tunebench does not know (a Kernel Tuner
    cache's), whose every config is then its own binary."""
    return tuple(get_kernel(name).LAUNCH_PARAMETERS) if name in KERNELS else ()


def complete_config(name: str, config: Mapping[str, Any]) -> dict[str, Any]:
    """`config` with each parameter that kernel family `name` added to its space after configs were recorded without
    it (the family's `ADDED_PARAMETERS`, if any) set, where absent, to the value such a config meant."""
    added = getattr(get_kernel(name), "ADDED_PARAMETERS", {}) if name in KERNELS else {}
    return {**added, **config}


def get_kernel(name: str) -> ModuleType:
    """The module of kernel family `name`; a clear error lists the known families."""
    if name not in KERNELS:
        raise ValueError(f"unknown kernel {name!r}; known kernels: {', '.join(KERNELS)}")
    return importlib.import_module(f"tunebench.kernels.{name}")


def kernel_source_files(module: ModuleType) -> list[Path]:
    """The files a kernel family's binaries are built from: its module's, or every module of its package (a family
    like compressed_matmul keeps its kernels beside the module that runs them), then those of the modules it names in
    `SOURCE_MODULES` (shared code that decides its launch, such as the alignment hint)."""
    if hasattr(module, "__path__"):
        own = sorted(path for folder in module.__path__ for path in Path(folder).glob("*.py"))
    else:
        own = [Path(module.__file__)]
    return [*own, *(Path(importlib.import_module(name).__file__) for name in getattr(module, "SOURCE_MODULES", ()))]


def kernel_source_sha256(module: ModuleType) -> str:
    """The first 16 hex digits of the SHA-256 of `kernel_source_files(module)`'s text, in order; for a family of one
    module, of that module's source."""
    return hashlib.sha256("".join(path.read_text(encoding="utf-8")
                                  for path in kernel_source_files(module)).encode()).hexdigest()[:16]
