"""The runtime dispatcher: from a pipeline-selection file, the pipeline and config of a projection at the nearest tuned
batch size, in about a microsecond a call; and, given the compressed weight and x, the product itself.
"""

from __future__ import annotations

import bisect
import numbers
import os
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Mapping

import torch

from tunebench.kernels.compressed_matmul.autotune import BucketTuning
from tunebench.kernels.compressed_matmul.device import DeviceWeight
from tunebench.kernels.compressed_matmul.pipelines import get_pipeline
from tunebench.kernels.compressed_matmul.schedule import decoder_programs, sm_count
from tunebench.kernels.compressed_matmul.selection_file import SelectionFile, load_selection


@dataclass(frozen=True)
class Selection:
    """What to run for one projection at one tuned batch size: the pipeline and its compressed_matmul config
    (read-only: pipeline, matmul tile, decode_sm_percent, decode_schedule; `multiply` decodes serially anyway)."""

    projection: str
    bucket: int
    pipeline: str
    config: Mapping[str, Any]

    @property
    def sm_percent(self) -> int:
        """The decoder's share of the SMs."""
        return self.config["decode_sm_percent"]


class Dispatcher:
    """Picks per call by projection and batch size. The nearest bucket is the one closest in log2(batch size); a
    batch exactly halfway in log2 between two buckets (batch^2 = lower x upper, e.g. 8 between 4 and 16) goes to the
    larger one: a config tuned for fewer rows may tile M more finely, and every extra M block of the reconstructive
    matmul rebuilds all of its weight tiles again, while a larger tile only idles some rows. Outside the tuned range the
    nearest is the smallest or the largest bucket."""

    def __init__(self, selection: SelectionFile) -> None:
        self.selection = selection
        self.buckets = tuple(bucket.batch for bucket in selection.tuning.buckets)
        # Integer midpoints in log2: batch goes above bucket i when batch^2 >= buckets[i] * buckets[i + 1].
        self._boundaries = tuple(low * high for low, high in zip(self.buckets, self.buckets[1:]))
        self._projections = {projection.name: projection for projection in selection.tuning.mlp.projections}
        self._table = {name: tuple(self._selection(name, bucket) for bucket in selection.tuning.buckets)
                       for name in self._projections}

    @staticmethod
    def _selection(name: str, bucket: BucketTuning) -> Selection:
        choice = bucket.projections[name].choice
        return Selection(name, bucket.batch, choice.pipeline, MappingProxyType(dict(choice.config)))

    @classmethod
    def load(cls, path: str | os.PathLike[str], *, model: str, gpu: str) -> Dispatcher:
        """The dispatcher of a selection file, which must be for `model` on `gpu` (e.g. torch.cuda.get_device_name())
        in this format version; a SelectionFileError says which does not match and what was expected."""
        return cls(load_selection(path, model=model, gpu=gpu))

    def _nearest(self, batch: int) -> int:
        """The index of the bucket nearest to `batch` in log2 (ties to the larger)."""
        if not isinstance(batch, numbers.Integral) or isinstance(batch, bool) or batch < 1:
            raise ValueError(f"batch size must be an integer >= 1, got {batch!r}")
        return bisect.bisect_right(self._boundaries, int(batch) * int(batch))

    def bucket(self, batch: int) -> int:
        """The tuned batch size nearest to `batch` in log2 (ties to the larger)."""
        return self.buckets[self._nearest(batch)]

    def choose(self, projection: str, batch: int) -> Selection:
        """The selection for `projection` at the bucket nearest to `batch`."""
        table = self._table.get(projection)
        if table is None:
            raise ValueError(f"unknown projection {projection!r} for model {self.selection.model!r}; "
                             f"known: {', '.join(self._table)}")
        return table[self._nearest(batch)]

    def multiply(self, projection: str, x: torch.Tensor, weight: DeviceWeight) -> torch.Tensor:
        """x @ W through the selected pipeline (decode, then matmul, on x's device; no overlap with other work: a
        gated MLP's pass with an overlapped pick's weight decoded during the projection before it is
        `chain.GatedMlpChain`)."""
        if x.dim() != 2:
            raise ValueError(f"x must be a (batch, in_features) matrix, got shape {tuple(x.shape)}")
        selection = self.choose(projection, x.shape[0])
        expected = self._projections[projection]
        if tuple(weight.shape) != (expected.in_features, expected.out_features) or x.shape[1] != weight.shape[0]:
            raise ValueError(f"projection {projection!r} takes x (batch, {expected.in_features}) and a "
                             f"{expected.in_features} x {expected.out_features} weight, got x {tuple(x.shape)} and "
                             f"a {weight.shape[0]} x {weight.shape[1]} weight")
        programs = decoder_programs(selection.sm_percent, sm_count(x.device))
        return get_pipeline(selection.pipeline)(x, weight, selection.config, programs)
