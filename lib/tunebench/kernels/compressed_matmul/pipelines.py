"""The four execution pipelines computing x @ W from a compressed W: a preprocessing step that writes a decoded
form to HBM (or none), then a matmul that reads it.

| pipeline | preprocessing writes | matmul reads |
| --- | --- | --- |
| decode_then_cublas | W in BF16 (16 bits a weight) | torch.matmul (cuBLAS) |
| decode_exponents | exponent bytes (8 bits) | reconstructive matmul: sign+mantissa + exponent bytes |
| transcode_palette | packed palette codes (4 bits) | reconstructive matmul: sign+mantissa + codes + verbatim groups |
| direct_palette | nothing | the same, on the resident palette form |
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import torch

from tunebench.kernels.compressed_matmul import decoders, reconstruct
from tunebench.kernels.compressed_matmul.device import DeviceWeight

PIPELINES = ("decode_then_cublas", "decode_exponents", "transcode_palette", "direct_palette")


@dataclass(frozen=True)
class Pipeline:
    """One way to compute x @ W from a `DeviceWeight`."""

    name: str
    decoder_output: str | None  # what preprocessing writes (a decoders.OUTPUTS name); None: no preprocessing
    matmul_source: str | None  # the reconstructive matmul's source; None: torch.matmul on the decoded BF16 weight

    @property
    def preprocesses(self) -> bool:
        return self.decoder_output is not None

    def scratch(self, weight: DeviceWeight) -> torch.Tensor | None:
        """The buffer preprocessing writes (uninitialised), or None."""
        return None if self.decoder_output is None else decoders.output_buffer(weight, self.decoder_output)

    def preprocess(self, weight: DeviceWeight, scratch: torch.Tensor | None, programs: int) -> None:
        """Decode `weight` into `scratch` on `programs` persistent programs; nothing for direct_palette."""
        if self.decoder_output is not None:
            decoders.decode(weight, self.decoder_output, scratch, programs)

    def multiply(self, x: torch.Tensor, weight: DeviceWeight, scratch: torch.Tensor | None,
                 config: Mapping[str, Any] | None, out: torch.Tensor,
                 split: reconstruct.SplitBuffers | None) -> torch.Tensor:
        """out = x @ W from what preprocessing left in `scratch` (and the resident arrays of `weight`); `config`
        and `split` are the reconstructive matmul's (unused by decode_then_cublas)."""
        if self.matmul_source is None:
            return torch.matmul(x, scratch, out=out)
        extra = {"exponents": scratch} if self.matmul_source == "exponents" else {"codes": scratch}
        return reconstruct.multiply(x, self.matmul_source, config, out, split, weight, **extra)

    def __call__(self, x: torch.Tensor, weight: DeviceWeight, config: Mapping[str, Any] | None = None,
                 programs: int = 1) -> torch.Tensor:
        """x @ W into a new tensor: preprocess into a new buffer, then multiply."""
        if self.matmul_source is not None and config is None:
            raise ValueError(f"pipeline {self.name!r} needs a reconstructive-matmul config")
        scratch = self.scratch(weight)
        self.preprocess(weight, scratch, programs)
        out = torch.empty((x.shape[0], weight.shape[1]), dtype=torch.bfloat16, device=x.device)
        split = reconstruct.SplitBuffers.zeroed(*out.shape, x.device)
        return self.multiply(x, weight, scratch, config, out, split)


_PIPELINES = {
    "decode_then_cublas": Pipeline("decode_then_cublas", "bfloat16", None),
    "decode_exponents": Pipeline("decode_exponents", "exponents", "exponents"),
    "transcode_palette": Pipeline("transcode_palette", "codes", "palette"),
    "direct_palette": Pipeline("direct_palette", None, "palette"),
}


def get_pipeline(name: str) -> Pipeline:
    """The pipeline called `name`; a clear error lists the known ones."""
    if name not in _PIPELINES:
        raise ValueError(f"unknown pipeline {name!r}; allowed: {', '.join(PIPELINES)}")
    return _PIPELINES[name]
