"""Split-K in one launch (`tunebench.kernels.split_k`), and the benchmarks that time it against the three launches
before and launch it again and again (benchmarks/split_k_epilogue.py, benchmarks/split_k_stress.py)."""

import json
import sys
from pathlib import Path

import pandas as pd
import pytest
import torch

from tunebench import split_k_rounds
from tunebench.kernels import get_kernel, matmul, split_k

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import compressed_split_k  # noqa: E402
import compressed_split_profile  # noqa: E402
import compressed_split_variants  # noqa: E402
import split_k_epilogue  # noqa: E402
import split_k_stress  # noqa: E402

# Configs that an H100 sweep found wrong at 72 x 1280 x 8192 before the last split waited for every thread's reads
# before zeroing the workspace (results/split_k_epilogue/stress_cases.json); one missed in 88 of 100 launches.
RACED = [
    ("matmul_tma", dict(BLOCK_M=64, BLOCK_N=64, BLOCK_K=32, GROUP_M=8, PROGRAMS_PER_SM=0, WARP_SPECIALIZE=False,
                        FLATTEN=False, EPILOGUE_SPLIT=1, WIDEN=False, TALL=False, SPLIT_K=8, num_warps=4,
                        num_stages=5)),
    ("matmul", dict(BLOCK_M=32, BLOCK_N=64, BLOCK_K=64, GROUP_M=1, SPLIT_K=8, num_warps=4, num_stages=2)),
]


def test_tile_counters_cover_any_configs_tiles_and_start_at_zero():
    counts = split_k.tile_counters(72, 1280, "cpu")
    assert counts.dtype == torch.int32 and counts.numel() == 5 * 80 and not counts.any()
    split_k.check_split_buffers(torch.zeros(72, 1280), counts, 72, 1280, 4)
    with pytest.raises(ValueError, match=r"SPLIT_K=4 counts splits per tile in at least 400 int32 counters for "
                                         r"M x N = 72 x 1280, got torch.int32 of 399"):
        split_k.check_split_buffers(torch.zeros(72, 1280), counts[:399], 72, 1280, 4)
    with pytest.raises(ValueError, match=r"adds into an fp32 workspace of M x N = 72 x 1280, got torch.float16"):
        split_k.check_split_buffers(torch.zeros(72, 1280, dtype=torch.float16), counts, 72, 1280, 4)


def test_inputs_without_a_workspace_refuse_a_split():
    inputs = matmul.make_inputs((4, 32, 64), "float16", "cpu", split_k_workspace=False)
    assert inputs.workspace.numel() == 0 and inputs.tile_counts.numel() == 0
    with pytest.raises(ValueError, match=r"SPLIT_K=2 adds into an fp32 workspace of M x N = 4 x 32"):
        matmul.run({"BLOCK_M": 16, "BLOCK_N": 32, "BLOCK_K": 32, "GROUP_M": 1, "SPLIT_K": 2, "num_warps": 4,
                    "num_stages": 2}, inputs)


def timings() -> pd.DataFrame:
    """Two rounds at one shape: cuBLAS, a pointer split config both ways and an unsplit one; one failed check."""
    rows = []
    for round_index, scale in ((0, 1.0), (1, 1.1)):
        for name, ms in (("cuBLAS", 0.012), ("matmul #0 split 8: one launch", 0.010),
                         ("matmul #0 split 8: three launches (stop 90)", 0.015), ("matmul #40 unsplit", 0.020)):
            rows.append({"shape": "2x712x4648", "name": name, "round": round_index, "status": "ok",
                         "latency_ms": ms * scale, "gpu": "H100"})
    rows.append({"shape": "2x712x4648", "name": "matmul #1 split 4: one launch", "round": 0,
                 "status": "wrong_result: error 0.03", "latency_ms": float("nan"), "gpu": "H100"})
    return pd.DataFrame(rows)


def test_the_epilogue_tables_compare_launches_and_families_with_cublas():
    launches = split_k_rounds.launches_table(timings())
    assert launches.to_dict("records") == [{"shape": "2x712x4648", "config": "matmul #0 split 8",
                                            "one launch ms": 0.0105, "three launches ms": 0.0158,
                                            "three / one": 1.5}]
    family = split_k_rounds.family_table(timings()).iloc[0]
    assert family["family"] == "matmul" and family["cuBLAS ms"] == 0.0126
    assert (family["split, one launch vs cuBLAS"], family["split, three launches vs cuBLAS"],
            family["unsplit vs cuBLAS"]) == (1.2, 0.8, 0.6)
    summary = split_k_epilogue.summary(timings(), "the command", "the code")
    assert "One launch, as timed: the code." in summary and "wrong_result: error 0.03" in summary


def test_the_compressed_plan_takes_each_datasets_fastest_palette_split_configs(tmp_path):
    dataset = Path(__file__).resolve().parents[1] / "results/datasets/compressed_matmul_bfloat16_h100.parquet"
    plan = compressed_split_k.write_plan(tmp_path / "plan.csv", [dataset, dataset])  # a config is planned once
    assert len(plan) == len(compressed_split_k.SHAPES) * compressed_split_k.TOP
    configs = [json.loads(text) for text in plan.config]
    assert all(config["SPLIT_K"] > 1 and set(config) == set(compressed_split_k.MATMUL) for config in configs)
    first = plan.groupby(["M", "N", "K"], sort=False).recorded_ms.apply(lambda ms: ms.is_monotonic_increasing)
    assert first.all()
    assert compressed_split_k.contender_name(configs[0], compressed_split_k.THREE).endswith(
        f"split {configs[0]['SPLIT_K']} w4 s3: three launches (stop 91)")
    rows = [{"shape": "1x14336x4096", "name": name, "round": 0, "status": "ok", "latency_ms": ms, "gpu": "H100"}
            for name, ms in (("cuBLAS", 0.05), ("16x64x64 split 4 w4 s3: one launch", 0.09),
                             ("16x64x64 split 4 w4 s3: three launches (stop 91)", 0.081))]
    launches = split_k_rounds.launches_table(pd.DataFrame(rows), compressed_split_k.THREE)
    assert launches["three / one"].tolist() == [0.9]
    assert "| 1x14336x4096 | 16x64x64 split 4 w4 s3 | 0.09 | 0.081 | 0.9 |" in compressed_split_k.summary(
        pd.DataFrame(rows), "the command")


def test_contender_names_say_the_split_and_the_way_it_ran():
    row = {"family": "matmul_tma", "rank": 3}
    assert split_k_epilogue.contender_name(row, {"SPLIT_K": 4}, split_k_rounds.ONE) == "matmul_tma #3 split 4: " \
                                                                                        "one launch"
    assert split_k_epilogue.contender_name(row, {"SPLIT_K": 1}, split_k_rounds.THREE) == "matmul_tma #3 unsplit"


def test_the_stress_takes_the_cases_then_the_plans_split_configs(tmp_path):
    cases, plan = tmp_path / "cases.json", tmp_path / "plan.csv"
    cases.write_text(json.dumps([{"kernel": "matmul", "shape": [72, 1280, 8192], "config": RACED[1][1]}]))
    pd.DataFrame([{"M": 2, "N": 712, "K": 4648, "family": "matmul", "rank": rank, "recorded_ms": 0.01,
                   "config": json.dumps(dict(RACED[1][1], SPLIT_K=split))} for rank, split in ((0, 8), (9, 1))]
                 ).to_csv(plan, index=False)
    chosen = split_k_stress.stress_cases(cases, plan)
    assert [(case["shape"], case["config"]["SPLIT_K"]) for case in chosen] == [([72, 1280, 8192], 8),
                                                                                ([2, 712, 4648], 8)]


def test_each_split_variant_is_one_substitution_of_todays_source_and_imports():
    """A variant whose text no longer occurs in `split_k.py` would time the sum as built under another name."""
    for index, (substitutions, _) in enumerate(compressed_split_variants.VARIANTS.values()):
        module = compressed_split_variants.variant_module(index)
        assert module.reconstruct_matmul_kernel is not None and len(substitutions) >= 1
    with pytest.raises(ValueError, match="expected 'absent' once, found it 0 times"):
        compressed_split_variants.substituted("text", (("absent", "x"),), Path("split_k.py"))


def test_the_profile_summary_puts_two_ways_side_by_side(tmp_path):
    header = ('"ID","Kernel Name","gpu__time_duration.sum","launch__registers_per_thread",'
              '"smsp__average_warps_issue_stalled_membar_per_issue_active.ratio"')
    profiles = {}
    for way, (microseconds, registers) in zip(compressed_split_profile.WAYS, ((88.0, 80), (75.5, 72))):
        rows = [f'"{launch}","reconstruct_matmul_kernel","{microseconds + launch}","{registers}","0.5"'
                for launch in range(3)]
        profiles[way] = tmp_path / f"{way}.csv"
        lines = ["==PROF== printed first", header, '"","","us","register/thread",""', *rows]
        profiles[way].write_text("\n".join(lines))
    summary = compressed_split_profile.summarize(profiles, "a GPU")
    assert "| in_kernel | reconstruct_matmul_kernel | 3 | 89 | 80 |" in summary
    assert "| separate_launches | reconstruct_matmul_kernel | 3 | 76.5 | 72 |" in summary
    assert "| membar | 0.500 | 0.500 |" in summary
    (tmp_path / "failed.csv").write_text("==ERROR== the application returned an error code (1)\n")
    with pytest.raises(ValueError, match="no Nsight Compute raw page"):
        compressed_split_profile.read_raw(tmp_path / "failed.csv")


@pytest.mark.gpu
@pytest.mark.parametrize("kernel_name, config", RACED)
def test_gpu_every_launch_of_a_split_is_right(kernel_name, config):
    """The same inputs launched 50 times, every output checked: a race between splits, or a counter or workspace
    left unclean, shows as a wrong output (results/split_k_epilogue/stress_*.txt)."""
    kernel = get_kernel(kernel_name)
    inputs = kernel.make_inputs((72, 1280, 8192), "bfloat16", "cuda", seed=3)
    expected = matmul.reference(inputs)
    errors = split_k_stress.launch_errors(kernel, config, inputs, expected, 50)
    assert max(errors) <= matmul.TOLERANCE["bfloat16"], errors
    assert not inputs.workspace.any() and not inputs.tile_counts.any()
