"""Compiling Triton kernels for a GPU without touching it, so that a compile worker needs no CUDA.

Before it compiles, Triton's JIT asks its active driver for the current device, stream and target; `compile_for` has a
driver answer those from the target of the process that owns the GPU. The binary lands in Triton's on-disk cache under
the key the timing worker looks up.
"""

from __future__ import annotations

from typing import Any


def device_target() -> Any:
    """The target (a `triton.backends.compiler.GPUTarget`) Triton compiles for on this process's current GPU; starts
    CUDA in this process."""
    from triton.runtime import driver

    return driver.active.get_current_target()


class CompileOnlyDriver:
    """What Triton's JIT asks of a driver to compile for `target`: device 0, its default stream, the target. Anything
    else (a launch, loading a binary) needs a GPU, and is refused by name."""

    def __init__(self, target: Any) -> None:
        self.target = target

    def get_current_device(self) -> int:
        return 0

    def get_current_stream(self, device: int | None = None) -> int:
        return 0

    def get_current_target(self) -> Any:
        return self.target

    def get_device_capability(self, device: int | None = None) -> tuple[int, int]:
        return divmod(self.target.arch, 10)

    def __getattr__(self, name: str) -> Any:
        raise AttributeError(f"a compile-only driver (target {self.target}) has no {name!r}: it needs a GPU")


def compile_for(target: Any) -> None:
    """From now on this process's Triton compiles for `target` and never starts CUDA; call it before the first
    compile (a kernel's JIT keeps the target it first saw)."""
    from triton.runtime import driver

    driver.set_active(CompileOnlyDriver(target))
