"""The flush benchmark's summary: each contender's median under each flush policy and their ratios; and its refusal
without a GPU."""

import importlib.util
from pathlib import Path

import pandas as pd
import pytest
import torch

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.fixture
def module(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))  # it imports compressed_mlp_chain beside it
    spec = importlib.util.spec_from_file_location("flush_write_back", BENCHMARKS / "flush_write_back.py")
    loaded = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(loaded)
    return loaded


def test_the_summary_puts_each_policy_beside_the_others(module):
    base = {"zero": 12.0, "read": 10.0, "none": 8.0}
    timings = pd.DataFrame([{"batch": 1, "round": round_index, "contender": "gate alone", "policy": policy,
                             "latency_us": value + round_index} for policy, value in base.items()
                            for round_index in range(3)])
    row = module.summary(timings).iloc[0]
    assert (row["batch"], row["contender"]) == (1, "gate alone")
    assert [row[f"{policy}, us"] for policy in module.POLICIES] == [13.0, 11.0, 9.0]
    assert row["zero / read"] == pytest.approx(13 / 11) and row["zero / none"] == pytest.approx(13 / 9)
    assert row["read / none"] == pytest.approx(11 / 9)


@pytest.mark.skipif(torch.cuda.is_available(), reason="on a GPU the benchmark runs")
def test_the_benchmark_says_it_needs_a_gpu(module, tmp_path):
    with pytest.raises(SystemExit, match="CUDA GPU"):
        module.main(["--out", str(tmp_path / "flush.md")])
