"""A gated MLP's forward pass through the dispatcher's picks, as a model runs it: gate and up on x, SiLU(gate) * up,
then down, each weight decoded into a buffer of its own before or while the projection ahead of it multiplies.

The recorded steps (`schedule.PrefetchedProjection`) each decode a stand-in of their own weight; this chain decodes the
next projection's real one, so timing it whole checks the sum the autotuner and the replay add up.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import torch

from tunebench.kernels import complete_config
from tunebench.kernels.compressed_matmul.device import DeviceWeight
from tunebench.kernels.compressed_matmul.dispatch import Dispatcher
from tunebench.kernels.compressed_matmul.family import NAME
from tunebench.kernels.compressed_matmul.pipelines import Pipeline, get_pipeline
from tunebench.kernels.compressed_matmul.reconstruct import SplitBuffers
from tunebench.kernels.compressed_matmul.schedule import decoder_programs, overlapped, sm_count

PROJECTIONS = ("gate", "up", "down")  # a gated MLP's, in the order a forward pass runs them
SCHEDULES = ("dispatched", "serial")


@dataclass
class _Step:
    """One projection of the chain: its pipeline and config, its own decode buffer, output and split-K buffers."""

    name: str
    pipeline: Pipeline
    weight: DeviceWeight
    matmul_config: Mapping[str, Any] | None  # None: decode_then_cublas's torch.matmul
    programs: int  # decoder programs, for the selection's share of the SMs
    prefetched: bool  # its weight is decoded while the projection before it multiplies
    buffer: torch.Tensor | None
    out: torch.Tensor
    split: SplitBuffers

    def decode(self) -> None:
        self.pipeline.preprocess(self.weight, self.buffer, self.programs)

    def multiply(self, x: torch.Tensor) -> torch.Tensor:
        return self.pipeline.multiply(x, self.weight, self.buffer, self.matmul_config, self.out, self.split)


class GatedMlpChain:
    """The forward pass of a gated MLP (`PROJECTIONS`) at one batch size, its buffers allocated once.

    schedule "dispatched": each projection as its selection says. An overlapped one's weight is decoded on a side CUDA
    stream while the projection before it multiplies (gate's while the previous layer's down does: a loop of forward
    passes is a stack of layers with the same weights); a serial one's just before its own matmul. "serial": every
    weight decoded just before its matmul, as `Dispatcher.multiply` does."""

    def __init__(self, dispatcher: Dispatcher, weights: Mapping[str, DeviceWeight], batch: int,
                 device: torch.device | str = "cuda", schedule: str = "dispatched") -> None:
        names = tuple(projection.name for projection in dispatcher.selection.tuning.mlp.projections)
        if names != PROJECTIONS:
            raise ValueError(f"a gated MLP chain needs the projections {PROJECTIONS} in that order; the selection's "
                             f"model {dispatcher.selection.model!r} has {names}")
        if schedule not in SCHEDULES:
            raise ValueError(f"unknown schedule {schedule!r}; allowed: {', '.join(SCHEDULES)}")
        if sorted(weights) != sorted(PROJECTIONS):
            raise ValueError(f"weights must be given for exactly {PROJECTIONS}, got {tuple(weights)}")
        gate, up, down = (weights[name].shape for name in PROJECTIONS)
        if gate != up or down != (gate[1], gate[0]):
            raise ValueError(f"gate and up must be K x N and down N x K, got gate {gate}, up {up}, down {down}")
        device = torch.device(device)
        sms = sm_count(device)
        self.batch, self.schedule = batch, schedule
        self.steps = [self._step(dispatcher, name, weights[name], batch, device, sms) for name in PROJECTIONS]
        self.hidden = torch.empty((batch, gate[1]), dtype=torch.bfloat16, device=device)
        prefetching = any(step.prefetched for step in self.steps)
        self.side_stream = torch.cuda.Stream(device) if prefetching and device.type == "cuda" else None
        for step in self.steps:
            if step.prefetched:
                step.decode()  # the first forward's prefetched weights; later ones are decoded a step ahead

    def _step(self, dispatcher: Dispatcher, name: str, weight: DeviceWeight, batch: int, device: torch.device,
              sms: int) -> _Step:
        selection = dispatcher.choose(name, batch)
        config = complete_config(NAME, selection.config)
        pipeline = get_pipeline(selection.pipeline)
        prefetched = (self.schedule == "dispatched" and pipeline.preprocesses
                      and config["decode_schedule"] == "overlapped")
        return _Step(name, pipeline, weight, config if pipeline.matmul_source is not None else None,
                     decoder_programs(config["decode_sm_percent"], sms), prefetched, pipeline.scratch(weight),
                     torch.empty((batch, weight.shape[1]), dtype=torch.bfloat16, device=device),
                     SplitBuffers.zeroed(batch, weight.shape[1], device))

    def choices(self) -> dict[str, str]:
        """Each projection's pipeline, and whether its weight is decoded ahead (prefetched) or just before."""
        return {step.name: step.pipeline.name if not step.pipeline.preprocesses
                else f"{step.pipeline.name} ({'prefetched' if step.prefetched else 'serial'})" for step in self.steps}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """down(SiLU(gate(x)) * up(x)), into the chain's own output buffer (overwritten by the next call)."""
        if tuple(x.shape) != (self.batch, self.steps[0].weight.shape[0]):
            raise ValueError(f"x must be ({self.batch}, {self.steps[0].weight.shape[0]}), got {tuple(x.shape)}")
        gate = self._run(0, x)
        up = self._run(1, x)
        torch.mul(torch.nn.functional.silu(gate), up, out=self.hidden)
        return self._run(2, self.hidden)

    def _run(self, index: int, x: torch.Tensor) -> torch.Tensor:
        step, following = self.steps[index], self.steps[(index + 1) % len(self.steps)]
        if step.pipeline.preprocesses and not step.prefetched:
            step.decode()
        if following.prefetched:
            overlapped(following.decode, lambda: step.multiply(x), self.side_stream)
        else:
            step.multiply(x)
        return step.out


def uncompressed_forward(x: torch.Tensor, weights: Mapping[str, torch.Tensor]) -> torch.Tensor:
    """The same forward pass with torch.matmul (cuBLAS) on the uncompressed BF16 weights (K x N each)."""
    hidden = torch.nn.functional.silu(x @ weights["gate"]) * (x @ weights["up"])
    return hidden @ weights["down"]
