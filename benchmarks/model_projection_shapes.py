"""The draw of prediction shapes from real models' linear layers, for a held-out check decided before it was measured:
prints them in draw order, in batches of BATCH (the order the device sittings measure them in).

Run: `.venv/bin/python benchmarks/model_projection_shapes.py` (well under a second). `--check` exits 1 unless the
shapes of `matmul.PREDICTION_SHAPES` after the narrow-hinted draw are the first whole batches of this draw.
"""

from __future__ import annotations

import random

from hinted_shapes import MAX_FLOP, later_draw_main
from narrow_hinted_shapes import COUNT as NARROW_HINTED_COUNT
from both_hinted_shapes import both_hinted_draw_end

SEED = 2035
COUNT = 1008  # the first 96 checked the 697-shape predictor (stop 22); the next 48, the same stream, the 793-shape one;
# the next 48 the 841-shape ones of stop 22 and stop 23; the next 48 stop 23's (frozen before they were measured)
# and stop 24's 889-shape one (written after, by the pipeline committed before); the next 48 stop 24's 889-shape one
# (frozen before they were measured); the next 48 stop 25's 985-shape one (frozen before they were measured); the
# next 48 the same 985-shape one again (stop 26, frozen before they were measured); the next 48 stop 26's 1,081-shape
# one (frozen before they were measured); the next 96 stop 27's 1,129-shape one (frozen before they were measured);
# the next 48 that same 1,129-shape one again (stop 28, frozen before they were measured); the next 48 stop 29's
# 1,225-shape one, averaging two models (frozen before they were measured); the next 48 stop 30's 1,321-shape one
# (frozen before they were measured); the next 48 that same 1,321-shape one again (stop 31, frozen before they were
# measured); the next 48 that same one a third time (stop 32, frozen before they were measured); the next 48 that
# same one a fourth time (stop 33, frozen before they were measured); the next 48 that same one a fifth time (stop 34,
# frozen before they were measured); the next 48 stop 33's 1,513-shape one, deployed in stop 34 (stop 35, frozen
# before they were measured); the next 48 that same 1,513-shape one again (stop 35, frozen before they were measured);
# the next 48 that same one a third time (stop 36, frozen before they were measured). The unaligned draw's shapes
# (`unaligned_check_shapes.py`) follow these 1,008 in matmul.PREDICTION_SHAPES, so raising COUNT for another check
# also needs its shapes listed after that draw, and `--check` taught to find them there.
BATCH = 16
# (hidden size, intermediate size, attention heads, key-value heads, head dim), from each model's config.json on the
# Hugging Face Hub. Most are not among the real-model sizes of the earlier draws (hinted_shapes.REAL_MODEL_SIZES).
MODELS = {
    "Llama-3.1-8B": (4096, 14336, 32, 8, 128),
    "Llama-3.1-70B": (8192, 28672, 64, 8, 128),
    "Llama-3.2-1B": (2048, 8192, 32, 8, 64),
    "Llama-3.2-3B": (3072, 8192, 24, 8, 128),
    "Qwen2.5-0.5B": (896, 4864, 14, 2, 64),
    "Qwen2.5-1.5B": (1536, 8960, 12, 2, 128),
    "Qwen2.5-7B": (3584, 18944, 28, 4, 128),
    "Qwen2.5-14B": (5120, 13824, 40, 8, 128),
    "Gemma-2-9B": (3584, 14336, 16, 8, 256),
    "Phi-3-mini": (3072, 8192, 32, 32, 96),
    "Phi-3-medium": (5120, 17920, 40, 10, 128),
}
PROJECTIONS = ("qkv", "o", "gate_up", "down")
TENSOR_PARALLEL = (1, 2, 4, 8)  # column-parallel layers (qkv, gate_up) shard N, row-parallel ones (o, down) shard K


def projection_nk(model: str, projection: str, tensor_parallel: int) -> tuple[int, int] | None:
    """(N, K) of a model's projection on one of `tensor_parallel` GPUs; None if the sharded size is not whole."""
    hidden, intermediate, heads, kv_heads, head_dim = MODELS[model]
    n, k = {"qkv": ((heads + 2 * kv_heads) * head_dim, hidden), "o": (hidden, heads * head_dim),
            "gate_up": (2 * intermediate, hidden), "down": (hidden, intermediate)}[projection]
    sharded = "n" if projection in ("qkv", "gate_up") else "k"
    size = n if sharded == "n" else k
    if size % tensor_parallel:
        return None
    return (n // tensor_parallel, k) if sharded == "n" else (n, k // tensor_parallel)


def draw(taken: set[tuple[int, int, int]], count: int = COUNT, seed: int = SEED) -> list[tuple[int, int, int]]:
    """`count` new shapes of at most MAX_FLOP with random.Random(seed): a model, projection and tensor-parallel degree
    drawn uniformly, M (tokens) = round(2 ** uniform(0, 13)). A larger count continues the same stream."""
    rng = random.Random(seed)
    shapes: list[tuple[int, int, int]] = []
    while len(shapes) < count:
        model, projection = rng.choice(sorted(MODELS)), rng.choice(PROJECTIONS)
        tensor_parallel, m = rng.choice(TENSOR_PARALLEL), round(2 ** rng.uniform(0, 13))
        nk = projection_nk(model, projection, tensor_parallel)
        if nk is None:
            continue
        shape = (m, *nk)
        if 2 * m * nk[0] * nk[1] <= MAX_FLOP and shape not in taken and shape not in shapes:
            shapes.append(shape)
    return shapes


def narrow_hinted_draw_end() -> int:
    """The index in matmul.PREDICTION_SHAPES just past the narrow-hinted draw (this draw follows it)."""
    return both_hinted_draw_end() + NARROW_HINTED_COUNT


def main() -> int:
    return later_draw_main(__doc__.split("\n\n")[0], draw, narrow_hinted_draw_end(), BATCH)


if __name__ == "__main__":
    raise SystemExit(main())
