"""A frozen check of the config profile (`predict/profile.py`): two predictors fitted on every H100 shape, alike but
for the profile, judged on the 138 H200 training shapes, which neither saw: by their recorded H200 sitting, and by a
re-timing of both predictors' picks side by side on an H200.

Run: `.venv/bin/python benchmarks/profile_frozen_check.py` fits both predictors in one process of 2 threads, their
shortlists for the H200 shapes only (kept under build/profile_frozen_check/ and reused, so a killed run resumes after
its last finished fit), freezes their picks (PICKS, never overwritten) and the set to time (TIMED_SET: both predictors'
top 10 and `best_config` on the shapes whose `best_config` differs), and writes
results/config_prediction/profile_frozen_check.md and its _per_shape.csv. Each re-timing, on the GPU: `PYTHONPATH=lib
python3 benchmarks/config_prediction_retime.py measure --journal J --per-shape TIMED_SET --dataset
results/datasets/matmul_bfloat16_h200_training.parquet --rounds 5 --stop-after-s 470`, J one of RETIMES; run this script
again to add them.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pandas as pd

from config_prediction import COMPILED_RESOURCES, DATASET, fit_deployed, mean_p10_min
from h200_held_out import held_out_picks
from h200_training_shapes import DATASET as H200_DATASET
from preregistered_picks import TOP_K
from tunebench.files import write_text_atomically
from tunebench.measure.dataset import Dataset, load_dataset
from tunebench.predict import ALIGNMENTS, FAMILIES, alignment, family, load_predictor, save_predictor, training_data
from tunebench.predict.compiled import load_table
from tunebench.predict.evaluation import retimed_efficiency, untimed_picks
from tunebench.predict.model import TUNING_GRID
from tunebench.tables import markdown_table

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "results" / "config_prediction"
OUT = RESULTS / "profile_frozen_check.md"
FITS = REPO / "build" / "profile_frozen_check"
ARMS = {"without": 0, "with": 8}  # the profile's components; "with" is stop 55's cross-validated option
PICKS = {arm: RESULTS / f"profile_frozen_picks_{arm}.csv" for arm in ARMS}
TIMED_SET = RESULTS / "profile_frozen_timed_set.csv"
RETIMES = (RESULTS / "retime_h200_profile.csv", RESULTS / "retime_h200_profile_second.csv")  # two sittings
OBJECTIVE = "relative"  # the objective every fold of the cross-validations chose (stops 32 to 55)


def fitted(profile_factors: int, threads: int, asked: list[tuple[int, int, int]]) -> Path:
    """The predictor fitted on every H100 shape with `profile_factors` components (0: none), fitted now unless a
    finished fit of it is on disk. Its shortlist covers only the grid points around the shapes it will be `asked`
    (`fit_predictor`'s shortlist_shapes): their picks are those of the whole grid, which takes some 45 minutes more
    to score on 2 cores."""
    path = FITS / f"profile{profile_factors}.predictor"
    if path.exists():
        print(f"reusing {os.path.relpath(path, REPO)}", flush=True)
        return path
    dataset = load_dataset(DATASET, kernel="matmul")
    data = training_data(dataset, load_table(COMPILED_RESOURCES, dataset.parameter_names))
    print(f"fitting with profile_factors={profile_factors} on {len(data.shapes)} shapes x {len(data.candidates)} "
          "candidates", flush=True)
    started = time.perf_counter()
    predictor = fit_deployed(data, (OBJECTIVE,), {"note": "fitted for the profile's frozen check; no cross-validation"},
                             threads, grid={**TUNING_GRID, "profile_factors": (profile_factors,)},
                             shortlist_shapes=asked)
    FITS.mkdir(parents=True, exist_ok=True)
    save_predictor(predictor, path)  # atomic: a fit killed before this line is redone
    print(f"fitted in {time.perf_counter() - started:.0f} s", flush=True)
    return path


def freeze(paths: dict[str, Path], h200: Dataset, command: str) -> dict[str, pd.DataFrame]:
    """Each arm's picks, written to PICKS (with their predictor's hash) unless frozen there before, and TIMED_SET:
    the shapes whose `best_config` differs between the arms (elsewhere the arms score alike whatever the timing), each
    with every config of both arms' picks in `top10_configs`, which the re-timing times in full."""
    frozen = {}
    for arm, path in paths.items():
        if not PICKS[arm].exists():
            frame = held_out_picks(load_predictor(path), h200, os.path.relpath(path, REPO))
            write_text_atomically(PICKS[arm], frame.to_csv(index=False))
            provenance = {"command": command, "date": datetime.now(timezone.utc).isoformat(),
                          "predictor": os.path.relpath(path, REPO),
                          "predictor_sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
                          "profile_factors": ARMS[arm], "held_out": f"every shape of {H200_DATASET.name}"}
            write_text_atomically(PICKS[arm].with_suffix(".provenance.json"), json.dumps(provenance, indent=1) + "\n")
        frozen[arm] = pd.read_csv(PICKS[arm])
    if not TIMED_SET.exists():
        first, *others = frozen.values()
        union = first.copy()
        union["top10_configs"] = [";".join(dict.fromkeys(config for frame in frozen.values() for config in [
            *frame.iloc[index]["top10_configs"].split(";"), frame.iloc[index]["dispatcher_config"]]))
            for index in range(len(first))]
        if any((other[["M", "N", "K"]].to_numpy() != first[["M", "N", "K"]].to_numpy()).any() for other in others):
            raise AssertionError("the arms' picks list different shapes")
        differs = (first["dispatcher_config"] != frozen["with"]["dispatcher_config"]).to_numpy()
        write_text_atomically(TIMED_SET, union[differs].to_csv(index=False))
    return frozen


def group_rows(table: pd.DataFrame, columns: dict[str, str]) -> pd.DataFrame:
    """Per group of shapes (all, alignment classes, M families): mean / P10 / min of each column (label: column),
    and how many shapes the profile's `best_config` raises or lowers."""
    without, with_ = (f"{arm}: best_config" for arm in ARMS)
    groups = [("all", table), *((name, table[table["alignment"] == name]) for name in ALIGNMENTS),
              *((name, table[table["family"] == name]) for name, _, _ in FAMILIES)]
    return pd.DataFrame([{"shapes": name, "count": len(part),
                          **{label: mean_p10_min(part[column]) for label, column in columns.items()},
                          "raised / lowered by the profile": f"{(part[with_] > part[without]).sum()} / "
                                                             f"{(part[with_] < part[without]).sum()}"}
                         for name, part in groups if len(part)])


def with_groups(table: pd.DataFrame) -> pd.DataFrame:
    """`table` (with M, N, K columns) with each shape's alignment class and M family."""
    return table.assign(alignment=[alignment(n, k) for n, k in zip(table["N"], table["K"])],
                        family=[family(m) for m in table["M"]])


def replayed(frozen: dict[str, pd.DataFrame]) -> str:
    """The arms' picks judged by the recorded H200 sitting."""
    table = with_groups(frozen["without"][["M", "N", "K"]])
    for arm, frame in frozen.items():
        table[f"{arm}: best_config"] = frame["dispatcher_replay"].to_numpy()
        table[f"{arm}: top 10 timed"] = frame["selected_top10_timed_efficiency"].to_numpy()
    columns = {f"{arm} the profile: `best_config`": f"{arm}: best_config" for arm in ARMS}
    return "\n\n".join([
        "## Judged by the recorded sitting", "Mean / P10 / min efficiency (the sitting's best / the pick's latency):",
        markdown_table(group_rows(table, columns)),
        "The full ranking's top 10 timed in that sitting (not pure prediction): " + "; ".join(
            f"{arm} the profile {mean_p10_min(table[f'{arm}: top 10 timed'])}" for arm in ARMS) + "."])


def retimed(frozen: dict[str, pd.DataFrame], journal_path: Path) -> tuple[str, pd.DataFrame]:
    """The arms' picks judged by the side-by-side re-timing's rounds 1.. (`predict.evaluation.retimed_efficiency`),
    with the per-shape table."""
    journal = pd.read_csv(journal_path)
    for arm, frame in frozen.items():
        untimed = untimed_picks(journal, frame, TOP_K)
        if untimed:
            raise SystemExit(f"{len(untimed)} picks of {PICKS[arm].name} were never timed in {journal_path.name}")
    judged = {arm: retimed_efficiency(journal, frame, TOP_K) for arm, frame in frozen.items()}
    table = with_groups(judged["without"][["M", "N", "K", "configs timed"]])
    for arm, frame in judged.items():
        table[f"{arm}: best_config"] = frame["dispatcher"].to_numpy()
        table[f"{arm}: top 10 timed"] = frame[f"top {TOP_K} timed"].to_numpy()
    table["recorded best"] = judged["without"]["recorded best"].to_numpy()
    provenance = json.loads(journal_path.with_suffix(".provenance.json").read_text())
    rounds = int(journal["round"].max()) + 1
    columns = {**{f"{arm} the profile: `best_config`": f"{arm}: best_config" for arm in ARMS},
               "the recorded best": "recorded best"}
    change = table["with: best_config"] - table["without: best_config"]
    total = len(frozen["without"])
    keys = pd.MultiIndex.from_frame(table[["M", "N", "K"]])
    recorded = {arm: frame.set_index(["M", "N", "K"]).loc[keys, "dispatcher_replay"] for arm, frame in frozen.items()}
    recorded_change = (recorded["with"] - recorded["without"]).to_numpy()
    text = "\n\n".join([
        f"## Judged by a re-timing side by side: `{journal_path.name}`",
        f"`{provenance['command']}` on {provenance['gpu_name']} (Triton {provenance['triton']}, {provenance['date']}): "
        f"the {len(table)} shapes whose `best_config` differs between the arms (of {total}; on the others both pick "
        "one config and score alike), each one's set (both predictors' top 10 and `best_config`, and the recorded 20 "
        f"fastest; median {table['configs timed'].median():.0f} configs) timed in {rounds} interleaved rounds, "
        "configs shuffled per round. Efficiency: the fastest median over rounds 1.. in the set / the pick's median.",
        markdown_table(group_rows(table, columns)),
        "The recorded sitting judges the same shapes' `best_config`: " + "; ".join(
            f"{arm} the profile {mean_p10_min(recorded[arm])}" for arm in ARMS) + ". Top 10 timed (its fastest in "
        "round 0, judged on rounds 1..; not pure prediction): " + "; ".join(
            f"{arm} the profile {mean_p10_min(table[f'{arm}: top 10 timed'])}" for arm in ARMS) + ".",
        f"The profile's change of `best_config` on these shapes: median {100 * np.median(change):+.2f} points, mean "
        f"{100 * change.mean():+.2f} (the recorded sitting: {100 * recorded_change.mean():+.2f}); over all {total} "
        f"shapes, mean {100 * change.sum() / total:+.2f} points (the recorded sitting: "
        f"{100 * recorded_change.sum() / total:+.2f})."])
    return text, table


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=2, help="threads of the fits")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    command = " ".join([".venv/bin/python", os.path.relpath(os.path.abspath(sys.argv[0]), REPO), *sys.argv[1:]])
    started = time.perf_counter()
    h200 = load_dataset(H200_DATASET, kernel="matmul")
    paths = {arm: fitted(factors, args.threads, h200.shapes()) for arm, factors in ARMS.items()}
    frozen = freeze(paths, h200, command)
    sections = [replayed(frozen)]
    tables = []
    for journal in (path for path in RETIMES if path.exists()):
        text, table = retimed(frozen, journal)
        sections.append(text)
        tables.append(table.assign(journal=journal.name))
    if tables:
        write_text_atomically(args.out.with_name(args.out.stem + "_per_shape.csv"),
                              pd.concat(tables).to_csv(index=False))
    text = "\n\n".join([
        "# The config profile, frozen: two predictors on shapes neither saw",
        f"Command: `{command}` ({time.perf_counter() - started:.0f} s, {os.cpu_count()} cores; fits reused from an "
        f"earlier run count nothing). Both predictors are fitted on every shape of `{DATASET.name}` (its extensions "
        f"included) by `config_prediction.fit_deployed`, objective `{OBJECTIVE}`, the same seeds, and differ only in "
        f"`profile_factors` ({', '.join(f'{arm}: {factors}' for arm, factors in ARMS.items())}). Their picks for the "
        f"{len(frozen['without'])} shapes of `{H200_DATASET.name}` (hinted or odd N or K, M >= 8, measured on an H200 "
        f"only) were frozen before any re-timing (`{PICKS['without'].name}`, `{PICKS['with'].name}`, each with its "
        "predictor's sha256).",
        *sections])
    write_text_atomically(args.out, text + "\n")
    print(text, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
