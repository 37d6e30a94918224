"""The gated MLP chain: the forward pass through a selection's picks equals the uncompressed one, prefetched weights are
decoded a projection ahead (the previous layer's down decodes gate), and bad input is refused by name."""

import importlib.util
from pathlib import Path

import pandas as pd
import pytest
import torch

from tunebench.kernels import complete_config
from tunebench.kernels.compressed_matmul import compact, family, synthetic
from tunebench.kernels.compressed_matmul.autotune import BucketTuning, Choice, MlpTuning, ProjectionChoice
from tunebench.kernels.compressed_matmul.chain import GatedMlpChain, uncompressed_forward
from tunebench.kernels.compressed_matmul.device import to_device
from tunebench.kernels.compressed_matmul.dispatch import Dispatcher
from tunebench.kernels.compressed_matmul.format import bits_to_bf16
from tunebench.kernels.compressed_matmul.mlp import Mlp, Projection
from tunebench.kernels.compressed_matmul.pipelines import PIPELINES
from tunebench.kernels.compressed_matmul.schedule import POISON_BYTE
from tunebench.kernels.compressed_matmul.selection_file import SelectionFile
from tunebench.kernels.compressed_matmul.selection_study import CHAIN_CONTENDERS

CPU_ONLY = pytest.mark.skipif(torch.cuda.is_available(), reason="the GPU test below runs the chain on the device")
BATCH = 3


def cublas(schedule: str) -> dict:
    return complete_config(family.NAME, {"pipeline": "decode_then_cublas", "decode_schedule": schedule,
                                         "decode_sm_percent": 100})


def dispatcher_of(configs: dict, hidden: int, width: int, names=("gate", "up", "down")) -> Dispatcher:
    """A selection for a tiny gated MLP (`width` in and out, `hidden` between) at one batch size."""
    shapes = {"gate": (hidden, width), "up": (hidden, width), "down": (width, hidden)}
    mlp = Mlp("Tiny gated", tuple(Projection(name, *shapes.get(name, (hidden, width))) for name in names))
    choices = {name: ProjectionChoice(Choice(configs[name], 1.0), {pipeline: None for pipeline in PIPELINES})
               for name in names}
    return Dispatcher(SelectionFile("Synthetic GPU", MlpTuning(mlp, (BucketTuning(BATCH, choices, (1.0,), True),),
                                                                1, 0.0), {}))


def weights_of(hidden: int, width: int, device: str):
    bits = {"gate": synthetic.synthetic_bits((width, hidden), 1), "up": synthetic.synthetic_bits((width, hidden), 2),
            "down": synthetic.synthetic_bits((hidden, width), 3)}
    return ({name: to_device(compact.compress(value), device) for name, value in bits.items()},
            {name: bits_to_bf16(value).to(device) for name, value in bits.items()})


@CPU_ONLY
@pytest.mark.parametrize("schedule", ["dispatched", "serial"])
def test_the_chain_is_the_uncompressed_forward_pass_call_after_call(schedule):
    compressed, uncompressed = weights_of(96, 64, "cpu")
    configs = {"gate": cublas("overlapped"), "up": cublas("serial"), "down": cublas("overlapped")}
    chain = GatedMlpChain(dispatcher_of(configs, 96, 64), compressed, BATCH, "cpu", schedule)
    x = torch.randn((BATCH, 64), generator=torch.Generator().manual_seed(0)).to(torch.bfloat16)
    expected = uncompressed_forward(x, uncompressed)
    for _ in range(2):
        assert torch.equal(chain.forward(x), expected)
    prefetched = "prefetched" if schedule == "dispatched" else "serial"
    assert chain.choices() == {"gate": f"decode_then_cublas ({prefetched})", "up": "decode_then_cublas (serial)",
                               "down": f"decode_then_cublas ({prefetched})"}


@CPU_ONLY
def test_a_prefetched_weight_is_decoded_while_the_projection_before_it_multiplies():
    """Gate's buffer, spoiled after one pass, spoils the next pass's gate (nothing decodes it before its matmul) and is
    whole again in the pass after (the spoiled pass's down decoded it); a serial gate decodes its own every pass."""
    compressed, uncompressed = weights_of(96, 64, "cpu")
    x = torch.randn((BATCH, 64), generator=torch.Generator().manual_seed(1)).to(torch.bfloat16)
    expected = uncompressed_forward(x, uncompressed)
    for schedule, spoiled in (("overlapped", True), ("serial", False)):
        configs = {"gate": cublas(schedule), "up": cublas("serial"), "down": cublas("serial")}
        chain = GatedMlpChain(dispatcher_of(configs, 96, 64), compressed, BATCH, "cpu")
        chain.forward(x)
        chain.steps[0].buffer.view(torch.uint8).fill_(POISON_BYTE)
        assert torch.equal(chain.forward(x), expected) is not spoiled
        assert torch.equal(chain.forward(x), expected)


def test_bad_input_is_refused_by_name():
    compressed, _ = weights_of(96, 64, "cpu")
    configs = {name: cublas("serial") for name in ("gate", "up", "down", "out")}
    with pytest.raises(ValueError, match="needs the projections \\('gate', 'up', 'down'\\).*has \\('gate', 'up', "
                                         "'down', 'out'\\)"):
        GatedMlpChain(dispatcher_of(configs, 96, 64, ("gate", "up", "down", "out")), compressed, BATCH, "cpu")
    dispatcher = dispatcher_of(configs, 96, 64)
    with pytest.raises(ValueError, match="unknown schedule 'prefetch'; allowed: dispatched, serial"):
        GatedMlpChain(dispatcher, compressed, BATCH, "cpu", "prefetch")
    with pytest.raises(ValueError, match="weights must be given for exactly .* got \\('gate', 'up'\\)"):
        GatedMlpChain(dispatcher, {name: compressed[name] for name in ("gate", "up")}, BATCH, "cpu")
    with pytest.raises(ValueError, match="gate and up must be K x N and down N x K, got gate \\(64, 96\\), up "
                                         "\\(64, 96\\), down \\(64, 96\\)"):
        GatedMlpChain(dispatcher, {**compressed, "down": compressed["gate"]}, BATCH, "cpu")
    chain = GatedMlpChain(dispatcher, compressed, BATCH, "cpu")
    with pytest.raises(ValueError, match="x must be \\(3, 64\\), got \\(3, 96\\)"):
        chain.forward(torch.zeros((BATCH, 96), dtype=torch.bfloat16))


@pytest.mark.gpu
@pytest.mark.parametrize("schedule", ["dispatched", "serial"])
def test_gpu_a_chain_of_three_pipelines_stays_right(schedule):
    """Gate straight from the palette form, up and down decoded ahead on the side stream (exponent bytes, 4-bit codes),
    split-K summed in the kernel: every pass of a loop matches the uncompressed forward up to fp32 sum order."""
    compressed, uncompressed = weights_of(1024, 512, "cuda")

    def config(pipeline, **settings):
        return complete_config(family.NAME, {"pipeline": pipeline, "BLOCK_M": 16, "BLOCK_N": 64, "BLOCK_K": 64,
                                             "SPLIT_K": 1, "num_warps": 4, "num_stages": 3, "decode_sm_percent": 100,
                                             **settings})

    configs = {"gate": config("direct_palette", SPLIT_K=4, split_reduction="in_kernel"),
               "up": config("decode_exponents", decode_sm_percent=50),
               "down": config("transcode_palette", SPLIT_K=4, split_reduction="in_kernel")}
    chain = GatedMlpChain(dispatcher_of(configs, 1024, 512), compressed, BATCH, "cuda", schedule)
    x = torch.randn((BATCH, 512), generator=torch.Generator().manual_seed(2)).to("cuda", torch.bfloat16)
    expected = uncompressed_forward(x.float(), {name: value.float() for name, value in uncompressed.items()})
    for _ in range(5):
        out = chain.forward(x).float()
        assert float((out - expected).norm() / expected.norm()) < 2e-2


def test_the_benchmark_sums_the_steps_and_compares_the_chain():
    module = benchmark_module()
    configs = {name: cublas("serial") for name in ("gate", "up", "down")}
    dispatcher = dispatcher_of(configs, 96, 64)
    times = {"gate alone": 10.0, "up alone": 10.0, "down alone": 20.0, "activation alone": 2.0,
             CHAIN_CONTENDERS["dispatched"]: 45.0, CHAIN_CONTENDERS["serial"]: 50.0, "uncompressed pass": 30.0,
             "gate uncompressed alone": 8.0, "up uncompressed alone": 8.0, "down uncompressed alone": 9.0}
    timings = pd.DataFrame([{"batch": BATCH, "round": round_index, "contender": name,
                             "latency_us": value * (1 + 0.1 * round_index)} for name, value in times.items()
                            for round_index in range(3)])
    row = module.summary(timings, dispatcher).iloc[0]
    assert row["picks"] == "gate decode_then_cublas, up decode_then_cublas, down decode_then_cublas"
    assert row["recorded sum (replay)"] == pytest.approx(3000.0)  # three choices of 1 ms each
    assert row["steps alone, summed"] == pytest.approx(44.0)  # the middle round's
    assert row["dispatched / (steps + activation)"] == pytest.approx(49.5 / (44.0 + 2.2))
    assert row["dispatched / uncompressed"] == pytest.approx(1.5)
    assert row["uncompressed steps alone, summed"] == pytest.approx(27.5)


@CPU_ONLY
def test_the_benchmark_says_it_needs_a_gpu(tmp_path):
    with pytest.raises(SystemExit, match="needs|CUDA GPU"):
        benchmark_module().main(["--out", str(tmp_path / "chain.md")])
    with pytest.raises(SystemExit, match="--rounds 0: time at least one round"):
        benchmark_module().main(["--out", str(tmp_path / "chain.md"), "--rounds", "0"])


def benchmark_module():
    script = Path(__file__).resolve().parents[1] / "benchmarks" / "compressed_mlp_chain.py"
    spec = importlib.util.spec_from_file_location("compressed_mlp_chain", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_report_is_a_table_with_every_round_beside_it(tmp_path):
    module = benchmark_module()
    timings = pd.DataFrame([{"batch": 1, "round": 0, "contender": "gate alone", "latency_us": 80.5}])
    out = tmp_path / "chain" / "h100.md"
    module.write_report(out, "A title", "Command: `x`.", pd.DataFrame({"batch": [1], "us": [80.5]}), timings)
    assert out.read_text() == "# A title\n\nCommand: `x`.\n\n| batch | us |\n| --- | --- |\n| 1 | 80.5 |\n"
    assert pd.read_csv(out.with_suffix(".csv")).equals(timings)
    assert module.command_line("compressed_mlp_chain.py", ["--out", "D"]) == (
        "python3 benchmarks/compressed_mlp_chain.py --out D")
