"""The row-wise resource model (tunebench.kernels.rowwise) against the binaries it was calibrated on: registers, spills
and shared memory of layer-norm and softmax binaries compiled on an H100 (results/rowwise_calibration, recorded by
benchmarks/rowwise_calibration.py). Reads the records only: no GPU, no compiling."""

import functools
import json
import re
from pathlib import Path
from typing import Any

from tunebench.kernels import layernorm, rowwise, softmax
from tunebench.space import Constraint

RECORDS = Path(__file__).resolve().parent.parent / "results" / "rowwise_calibration" / "binaries.jsonl"
KERNELS = {kernel.NAME: kernel for kernel in (layernorm, softmax)}
# The constraints of the config spaces that model resources; the others only drop configs of identical behaviour.
RESOURCE_CONSTRAINTS = ("row_registers", "warps_for_tile", "shared_memory", "programs_fit_on_an_sm")
# The counts rowwise's docstrings quote (RegisterModel): compiled binaries, compiles out of shared memory, and
# binaries the model admits.
BINARIES, OUT_OF_SHARED_MEMORY, ADMITTED = 961, 107, 504
# Triton's n_spills is a thread's local memory in 4-byte words. The most any admitted binary spilled: 10 words.
ADMITTED_SPILL_WORDS = 10
# Registers per thread on admitted binaries: ptxas used from 120 fewer to 42 more than RegisterModel's estimate.
REGISTERS_BELOW_ESTIMATE, REGISTERS_ABOVE_ESTIMATE = 120, 42
# With num_stages > 1 the pipeline buffers all but fill the allocation: Triton added at most 256 bytes to them.
PIPELINED_SCRATCH_BYTES = 256


@functools.cache
def resource_constraints(kernel_name: str) -> dict[str, Constraint]:
    """The kernel's own resource constraints, by name, built from the model's current defaults."""
    space = KERNELS[kernel_name].config_space()
    return {constraint.name: constraint for constraint in space.constraints if constraint.name in RESOURCE_CONSTRAINTS}


def admitted(record: dict[str, Any], names: tuple[str, ...] = RESOURCE_CONSTRAINTS) -> bool:
    """Whether the resource model (or its constraints `names`) admits the record's config. The calibration grid
    reaches past the spaces' parameter ranges (num_stages 3, LOOP_UNROLL 4), so the predicates are applied directly."""
    constraints = resource_constraints(record["kernel"])
    return all(constraints[name].predicate(record["config"]) for name in names)


def usage(record: dict[str, Any]) -> rowwise.ResourceUsage:
    return rowwise.resource_usage(record["config"], KERNELS[record["kernel"]].COLUMN_VECTORS)


def pipeline_buffer_bytes(record: dict[str, Any]) -> int:
    """The model's shared memory less its scratch allowance: num_stages - 1 buffers of one iteration's loads."""
    return usage(record).shared_memory_bytes - rowwise.SCRATCH_SHARED_MEMORY_BYTES


def describe(record: dict[str, Any]) -> str:
    figures = {name: record[name] for name in ("n_regs", "n_spills", "shared", "error") if name in record}
    return f"{record['kernel']} {record['config']} {figures}"


RECORDED = [json.loads(line) for line in RECORDS.read_text().splitlines()]
BINARY_RECORDS = [record for record in RECORDED if "error" not in record]
ERROR_RECORDS = [record for record in RECORDED if "error" in record]


def test_records_are_the_calibration_the_docstrings_quote():
    keys = [(record["kernel"], json.dumps(record["config"], sort_keys=True)) for record in RECORDED]
    assert len(set(keys)) == len(keys), "one record per (kernel, config)"
    assert {record["kernel"] for record in RECORDED} == set(KERNELS)
    assert (len(BINARY_RECORDS), len(ERROR_RECORDS)) == (BINARIES, OUT_OF_SHARED_MEMORY)
    for record in BINARY_RECORDS:
        assert all(isinstance(record[name], int) for name in ("n_regs", "n_spills", "shared")), describe(record)


def test_admitted_binaries_spill_at_most_a_few_words():
    inside = [record for record in BINARY_RECORDS if admitted(record)]
    spilling = [describe(record) for record in inside if record["n_spills"] > ADMITTED_SPILL_WORDS]
    assert not spilling, f"{len(spilling)} admitted binaries spilled more than {ADMITTED_SPILL_WORDS} words: {spilling}"
    assert len(inside) == ADMITTED
    # The bound tells configs apart: past the register share, binaries spilled thousands of words.
    past_the_share = [record["n_spills"] for record in BINARY_RECORDS if not admitted(record, ("row_registers",))]
    assert max(past_the_share) > 100 * ADMITTED_SPILL_WORDS


def test_register_estimate_is_within_the_quoted_range():
    differences = [record["n_regs"] - usage(record).registers_per_thread for record in BINARY_RECORDS
                   if admitted(record)]
    assert -REGISTERS_BELOW_ESTIMATE <= min(differences) and max(differences) <= REGISTERS_ABOVE_ESTIMATE


def test_shared_memory_is_the_pipeline_buffers_plus_scratch():
    """Every binary: buffers <= allocated <= buffers + SCRATCH_SHARED_MEMORY_BYTES, so the model's estimate is never
    short; with num_stages > 1 the excess is at most PIPELINED_SCRATCH_BYTES."""
    excess = {id(record): record["shared"] - pipeline_buffer_bytes(record) for record in BINARY_RECORDS}
    off = [describe(record) for record in BINARY_RECORDS
           if not 0 <= excess[id(record)] <= rowwise.SCRATCH_SHARED_MEMORY_BYTES]
    assert not off, f"{len(off)} binaries outside [buffers, buffers + scratch]: {off}"
    pipelined = [excess[id(record)] for record in BINARY_RECORDS if record["config"]["num_stages"] > 1]
    assert len(pipelined) > 500 and max(pipelined) <= PIPELINED_SCRATCH_BYTES


def test_every_compile_out_of_shared_memory_is_outside_the_model():
    for record in ERROR_RECORDS:
        reported = re.search(r"out of resource: shared memory, Required: (\d+), Hardware limit: (\d+)", record["error"])
        assert reported, describe(record)
        required, limit = int(reported.group(1)), int(reported.group(2))
        assert limit == rowwise.HOPPER.shared_memory_per_block, describe(record)
        assert not admitted(record, ("shared_memory",)), describe(record)
        # Triton asked for what the model estimates: the buffers plus at most the scratch allowance.
        assert 0 <= required - pipeline_buffer_bytes(record) <= rowwise.SCRATCH_SHARED_MEMORY_BYTES, describe(record)
