"""Registers and local memory per thread of a compiled Triton kernel, read from its cubin with the cuobjdump that ships
with Triton: no GPU needed, so compile-only workers can read them too (a CompiledKernel learns its `n_regs` only
when loaded onto a GPU)."""

from __future__ import annotations

import re
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import triton


def cuobjdump() -> str:
    """Triton's bundled cuobjdump."""
    return str(Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump")


def resource_usage(compiled: Any) -> dict[str, int]:
    """Registers and local (spill) memory bytes per thread of `compiled` (a Triton CompiledKernel for NVIDIA)."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "kernel.cubin"
        path.write_bytes(compiled.asm["cubin"])
        usage = subprocess.run([cuobjdump(), "--dump-resource-usage", str(path)], check=True, capture_output=True,
                               text=True).stdout
    found = {key: int(value) for key, value in re.findall(r"\b(REG|LOCAL):(\d+)", usage)}
    if "REG" not in found:
        raise RuntimeError(f"cuobjdump printed no register count: {usage!r}")
    return {"registers": found["REG"], "local_memory_bytes": found.get("LOCAL", 0)}
