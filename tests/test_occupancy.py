"""CUDA's occupancy rules as `kernels.occupancy` applies them: which resource binds, and the register caps that fit a
number of programs an SM."""

import pytest

from tunebench.kernels import occupancy


def test_the_fewest_programs_any_resource_allows():
    # 4 warps at 80 registers: 80 x 128 = 10,240 of 65,536 registers a program, 6 programs; at 72, 7; at 64, 8
    assert [occupancy.programs_per_sm(registers, 0, 4) for registers in (80, 73, 72, 64)] == [6, 6, 7, 8]
    # registers go per warp in units of 256 (8 a thread): 65 registers take as many as 72
    assert occupancy.programs_per_sm(65, 0, 4) == occupancy.programs_per_sm(72, 0, 4) == 7
    # shared memory: 228 KiB an SM, 1 KiB of it reserved per program
    assert occupancy.programs_per_sm(32, 45_184, 4) == 233_472 // (45_184 + 1024) == 5
    assert occupancy.programs_per_sm(32, 0, 8) == 8  # 64 warps an SM
    assert occupancy.programs_per_sm(255, 0, 8) == 1


def test_the_register_cap_for_a_number_of_programs_fits_exactly_that_many():
    for warps in (1, 2, 4, 8, 16):
        for programs in range(1, 64 // warps + 1):
            cap = occupancy.registers_for_programs(programs, warps)
            assert cap % 8 == 0 or cap == 255
            assert occupancy.programs_per_sm(cap, 0, warps) >= programs
            if cap < 255:
                assert occupancy.programs_per_sm(cap + 1, 0, warps) < programs, (warps, programs, cap)
    assert occupancy.registers_for_programs(7, 4) == 72 and occupancy.registers_for_programs(8, 4) == 64


@pytest.mark.parametrize("call", [lambda: occupancy.programs_per_sm(0, 0, 4),
                                  lambda: occupancy.programs_per_sm(64, -1, 4),
                                  lambda: occupancy.registers_for_programs(0, 4)])
def test_bad_counts_are_refused(call):
    with pytest.raises(ValueError, match="allowed: "):
        call()
