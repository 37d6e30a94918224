"""What one streaming multiprocessor offers, and how many programs (thread blocks) of a compiled binary it holds at
once: CUDA's occupancy rules, for the compute capability 9.0 GPUs tunebench measures on (H100, H200)."""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class DeviceLimits:
    """What one streaming multiprocessor offers (H100 and H200: compute capability 9.0)."""

    registers_per_thread: int = 255
    registers_per_sm: int = 65_536  # also the most one program (thread block) may use
    register_allocation_unit: int = 256  # a warp's registers are allocated in units of this many
    warps_per_sm: int = 64
    shared_memory_per_block: int = 232_448  # opt-in maximum per block (227 KiB)
    shared_memory_per_sm: int = 233_472  # 228 KiB, of which every resident block reserves 1 KiB
    reserved_shared_memory_per_block: int = 1024
    vector_elements: int = 8  # one 16-byte load of 2-byte elements; fewer per thread leaves lanes idle


HOPPER = DeviceLimits()


def programs_per_sm(registers: int, shared_memory_bytes: int, num_warps: int, limits: DeviceLimits = HOPPER) -> int:
    """Programs of `num_warps` warps taking `registers` a thread and `shared_memory_bytes` each that one SM holds at
    once: the fewest that its registers, shared memory and warps allow."""
    if registers < 1 or shared_memory_bytes < 0 or num_warps < 1:
        raise ValueError(f"registers={registers}, shared_memory_bytes={shared_memory_bytes}, num_warps={num_warps}; "
                         "allowed: registers and num_warps of at least 1, shared memory of at least 0")
    unit = limits.register_allocation_unit
    warps_by_registers = limits.registers_per_sm // (math.ceil(32 * registers / unit) * unit)
    by_shared_memory = limits.shared_memory_per_sm // (shared_memory_bytes + limits.reserved_shared_memory_per_block)
    return min(warps_by_registers // num_warps, by_shared_memory, limits.warps_per_sm // num_warps)


def registers_for_programs(programs: int, num_warps: int, limits: DeviceLimits = HOPPER) -> int:
    """The most registers a thread may take so that `programs` programs of `num_warps` warps fit an SM's registers
    (a multiple of the allocation unit's share of a thread; at most `registers_per_thread`)."""
    if programs < 1 or num_warps < 1:
        raise ValueError(f"programs={programs}, num_warps={num_warps}; allowed: at least 1 each")
    unit = limits.register_allocation_unit
    per_warp = limits.registers_per_sm // (programs * num_warps) // unit * unit
    return min(limits.registers_per_thread, per_warp // 32)
