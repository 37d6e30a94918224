"""Where the palette matmul's split sum in the kernel spends its time: variants of `split_k.add_split` that leave one
step out or order it more weakly, timed side by side with the sum as built and the sum by launches after the kernel.

    PYTHONPATH=lib python3 benchmarks/compressed_split_variants.py --out results/compressed_split_k/variants_h100.csv

Each variant is a copy of `split_k.py` and `reconstruct.py` with one text substitution, written to a temporary folder
and imported from there (the kernels' hashes never see them). Variants marked "wrong by design" skip a step the result
needs; they are timed unchecked, to price that step. The others are checked against the fp32 product first. All
take the compiler's choice of registers (`register_cap` "none").
"""

from __future__ import annotations

import functools
import importlib
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable, Mapping

from tunebench.measure.probe_rounds import Contender, checked_contenders, probe_command

SHAPES = ((1, 14336, 4096), (16, 14336, 4096), (1, 4096, 14336))
TILES = ((16, 64, 64, 4, 4, 3), (16, 64, 64, 16, 4, 3))  # (BLOCK_M, BLOCK_N, BLOCK_K, SPLIT_K, num_warps, num_stages)
TITLE = "The palette matmul's split sum in the kernel, one step at a time"
KERNELS = Path(__file__).resolve().parents[1] / "lib" / "tunebench" / "kernels"
COUNT_IN = 'arrived = tl.atomic_add(tile_count_ptr, 1, sem="acq_rel")'
# name: (substitutions in split_k.py, whether the result is still right)
VARIANTS: dict[str, tuple[tuple[tuple[str, str], ...], bool]] = {
    "count in with release; the last split acquires by a second atomic":
        (((COUNT_IN, COUNT_IN.replace("acq_rel", "release")),
          ("    if arrived == SPLIT_K - 1:\n",
           '    if arrived == SPLIT_K - 1:\n        tl.atomic_add(tile_count_ptr, 0, sem="acquire")\n')), True),
    "count in relaxed (no fences; wrong by design)": (((COUNT_IN, COUNT_IN.replace("acq_rel", "relaxed")),), False),
    "no barrier before the count (wrong by design)":
        ((('sem="relaxed")\n    tl.debug_barrier()\n', 'sem="relaxed")\n'),), False),
    "count in, the last split does nothing (wrong by design)":
        ((("    if arrived == SPLIT_K - 1:\n", "    if arrived == -1:\n"),), False),
    "adds only, no count (wrong by design)":
        ((("    tl.debug_barrier()\n    arrived", "    return\n    arrived"),), False),
}


def substituted(text: str, substitutions: tuple[tuple[str, str], ...], path: Path) -> str:
    """`text` with each (old, new) replaced; refuses an `old` that does not occur exactly once in it."""
    for old, new in substitutions:
        if text.count(old) != 1:
            raise ValueError(f"{path.name}: expected {old!r} once, found it {text.count(old)} times")
        text = text.replace(old, new)
    return text


@functools.cache
def _variants_folder() -> tempfile.TemporaryDirectory:
    """One folder for every variant's copies, on the import path, removed when the process ends."""
    folder = tempfile.TemporaryDirectory(prefix="split_variants_")
    sys.path.insert(0, folder.name)
    return folder


@functools.cache
def variant_module(index: int) -> Any:
    """`reconstruct` compiled against VARIANTS' `index`-th copy of `split_k`, imported from a temporary folder."""
    substitutions, _ = list(VARIANTS.values())[index]
    folder = Path(_variants_folder().name)
    split_source = KERNELS / "split_k.py"
    (folder / f"split_k_variant{index}.py").write_text(
        substituted(split_source.read_text(), substitutions, split_source))
    reconstruct_source = KERNELS / "compressed_matmul" / "reconstruct.py"
    (folder / f"reconstruct_variant{index}.py").write_text(substituted(
        reconstruct_source.read_text(),
        (("from tunebench.kernels.split_k import", f"from split_k_variant{index} import"),), reconstruct_source))
    return importlib.import_module(f"reconstruct_variant{index}")


def contenders(shape: tuple[int, int, int], multiprocessors: int) -> Mapping[str, Contender]:
    """cuBLAS; per tile of TILES, the sum as built, by launches, and each of VARIANTS."""
    import torch

    from tunebench.kernels.compressed_matmul import family, reconstruct

    inputs = family.make_inputs(shape, "bfloat16")
    checked: dict[str, Callable[[], Any]] = {
        "cuBLAS": lambda: torch.matmul(inputs.x, inputs.bf16_weight, out=inputs.out)}
    unchecked: dict[str, Callable[[], Any]] = {}
    for tile in TILES:
        config = dict(zip(reconstruct.MATMUL_PARAMETERS, tile))
        label = f"{tile[0]}x{tile[1]}x{tile[2]} split {tile[3]} w{tile[4]} s{tile[5]}"
        for way, name in (("in_kernel", "in the kernel, as built"), ("separate_launches", "by launches after it")):
            checked[f"{label}: {name}"] = functools.partial(
                reconstruct.multiply, inputs.x, "palette", dict(config, split_reduction=way), inputs.out,
                inputs.split, inputs.weight)
        for index, (name, (_, right)) in enumerate(VARIANTS.items()):
            # a variant that leaves its buffers dirty gets its own, so the others still start from zero
            split = inputs.split if right else reconstruct.SplitBuffers.zeroed(shape[0], shape[1], inputs.x.device)
            run = functools.partial(variant_module(index).multiply, inputs.x, "palette",
                                    dict(config, split_reduction="in_kernel"), inputs.out, split, inputs.weight)
            (checked if right else unchecked)[f"{label}: {name}"] = run
    called = checked_contenders(checked, inputs.out, family.reference(inputs))
    for run in unchecked.values():
        run()  # compiled before the rounds time it
    return {**called, **unchecked}


if __name__ == "__main__":
    raise SystemExit(probe_command(__doc__.split("\n\n")[0], "benchmarks/compressed_split_variants.py", TITLE, SHAPES,
                                   contenders))
