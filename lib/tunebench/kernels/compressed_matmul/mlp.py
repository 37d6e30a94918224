"""The MLP projections a pipeline selection is tuned for: each projection's name and weight shape, in the order a
forward pass runs them, so that the step of one overlaps the decode of the next one's weight.
"""

from __future__ import annotations

from dataclasses import dataclass

from tunebench.kernels.compressed_matmul import synthetic


@dataclass(frozen=True)
class Projection:
    """One weight of an MLP: out = x @ W with W of in_features x out_features."""

    name: str
    out_features: int  # N
    in_features: int  # K

    def shape(self, batch: int) -> tuple[int, int, int]:
        """The compressed_matmul shape (M, N, K) of this projection at `batch` rows."""
        return (batch, self.out_features, self.in_features)


@dataclass(frozen=True)
class Mlp:
    """A model's MLP: its projections in execution order. The step of each decodes the next one's weight; the last
    one's step decodes the first one's weight of the next layer."""

    model: str
    projections: tuple[Projection, ...]

    def __post_init__(self) -> None:
        names = [projection.name for projection in self.projections]
        if not names or len(set(names)) != len(names):
            raise ValueError(f"an MLP needs projections with distinct names, got {names}")

    def projection(self, name: str) -> Projection:
        """The projection called `name`; a clear error lists the known ones."""
        for projection in self.projections:
            if projection.name == name:
                return projection
        raise ValueError(f"model {self.model!r} has no projection {name!r}; "
                         f"known: {', '.join(p.name for p in self.projections)}")


LLAMA_3_1_8B = Mlp("Llama-3.1-8B", tuple(Projection(name, out_features=n, in_features=k)
                                         for name, (k, n) in synthetic.LLAMA_3_1_8B_MLP.items()))
MODELS = {mlp.model: mlp for mlp in (LLAMA_3_1_8B,)}
