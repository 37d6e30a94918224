"""The SM split: a decoder limited to a share of the SMs runs on a side CUDA stream, decoding the next
projection's weight while the current projection's matmul runs, and the steady-state step of such a chain (or of
the serial one, each weight decoded just before its matmul).
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

import torch

from tunebench.kernels.compressed_matmul.decoders import DECODER, DecoderSettings
from tunebench.kernels.compressed_matmul.device import DeviceWeight
from tunebench.kernels.compressed_matmul.pipelines import Pipeline
from tunebench.kernels.compressed_matmul.reconstruct import SplitBuffers

POISON_BYTE = 0xFF  # exponent 255 (inf/NaN) or code 15: a buffer the decoder failed to write fails the check


def sm_count(device: torch.device | str) -> int:
    """Streaming multiprocessors of a CUDA device; 1 elsewhere (the Triton interpreter runs programs serially)."""
    device = torch.device(device)
    return torch.cuda.get_device_properties(device).multi_processor_count if device.type == "cuda" else 1


def decoder_programs(sm_percent: int, sms: int, settings: DecoderSettings = DECODER) -> int:
    """Programs of the persistent decoder grid for a share of `sms` SMs: `settings.programs_per_sm` for each SM it
    may use."""
    if not 1 <= sm_percent <= 100:
        raise ValueError(f"sm_percent={sm_percent!r} is not allowed; allowed: 1 to 100")
    return max(1, sms * sm_percent // 100) * settings.programs_per_sm


def overlapped(decode_next: Callable[[], object], multiply_current: Callable[[], object],
               side_stream: torch.cuda.Stream | None) -> None:
    """Queue `decode_next` on `side_stream` and `multiply_current` on the current stream, and make the current
    stream wait for both; without a side stream (CPU) run them one after the other."""
    if side_stream is None:
        decode_next()
        multiply_current()
        return
    main = torch.cuda.current_stream(side_stream.device)
    side_stream.wait_stream(main)  # the buffer decoded into was read by earlier work on the main stream
    with torch.cuda.stream(side_stream):
        decode_next()
    multiply_current()
    main.wait_stream(side_stream)


class PrefetchedProjection:
    """A projection in steady state: each step multiplies with the weight the previous step decoded, while it
    decodes the next projection's weight into the other buffer on the side stream. The next weight is `weight`
    again, a stand-in of the same shape (a chain of distinct projections is phase 2's)."""

    def __init__(self, pipeline: Pipeline, weight: DeviceWeight, side_stream: torch.cuda.Stream | None) -> None:
        self.pipeline, self.weight, self.side_stream = pipeline, weight, side_stream
        self.buffers = [pipeline.scratch(weight), pipeline.scratch(weight)]
        self.current = 0

    def prime(self, programs: int) -> None:
        """Poison the current buffer, then decode into it on the current stream, so that the next step's output
        depends on this decoder (as the first step of a chain does)."""
        buffer = self.buffers[self.current]
        if buffer is not None:
            buffer.view(torch.uint8).fill_(POISON_BYTE)
            self.pipeline.preprocess(self.weight, buffer, programs)

    def step(self, x: torch.Tensor, config: Mapping[str, Any] | None, programs: int, out: torch.Tensor,
             split: SplitBuffers) -> torch.Tensor:
        """out = x @ W with the current buffer, while the other buffer is decoded; then the buffers swap."""
        current, following = self.buffers[self.current], self.buffers[1 - self.current]
        if not self.pipeline.preprocesses:
            return self.pipeline.multiply(x, self.weight, None, config, out, split)
        overlapped(lambda: self.pipeline.preprocess(self.weight, following, programs),
                   lambda: self.pipeline.multiply(x, self.weight, current, config, out, split), self.side_stream)
        self.current = 1 - self.current
        return out

    def serial_step(self, x: torch.Tensor, config: Mapping[str, Any] | None, programs: int, out: torch.Tensor,
                    split: SplitBuffers) -> torch.Tensor:
        """out = x @ W, the current buffer decoded first, on the current stream: no prefetch and no side stream."""
        current = self.buffers[self.current]
        if self.pipeline.preprocesses:
            self.pipeline.preprocess(self.weight, current, programs)
        return self.pipeline.multiply(x, self.weight, current, config, out, split)
