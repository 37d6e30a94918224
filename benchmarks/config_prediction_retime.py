"""Config prediction checked on the GPU, side by side: per held-out shape, the model's picks and the recorded fastest
candidates are timed again together, in interleaved rounds, and each pick is judged against the fastest of them.

The replay in benchmarks/config_prediction.py judges a pick against the minimum of 600 noisy timings from one
sitting, which favours the measured best (winner's curse). Here, per shape, the set timed is the out-of-fold top 10 of
the `selected` model (per_shape.csv, best first), the dispatcher's pick and the recorded 20 fastest candidates (a
later sitting's best is within 0.01 % of the best of the recorded 20 fastest on average, 0.27 % at worst, on the 31
retest shapes). Round 0
is the "time the top 10, keep the fastest" dispatcher's own sitting; rounds 1.. are the judge: every efficiency is
(fastest median over the set) / (median of the pick) over those rounds, so the hybrid's choice and its judgement use
independent timings.

The picks are frozen beside the journal (J.picks.csv, a copy of --per-shape made by the first sitting), so that a
resumed sitting times the same picks and the summary judges them, whatever per_shape.csv holds later.

GPU:  PYTHONPATH=lib python3 benchmarks/config_prediction_retime.py measure --journal J --stop-after-s 520
CPU:  .venv/bin/python benchmarks/config_prediction_retime.py summarize --journal results/config_prediction/retime_h100.csv
      [--picks P: judge another predictor's picks, all timed by the same sitting]
      .venv/bin/python benchmarks/config_prediction_retime.py pool --journals J1 J2 ... --out P.md: several sittings'
      shapes pooled (each journal judged by the picks frozen beside it)
      .venv/bin/python benchmarks/config_prediction_retime.py compare --journals J1 J2 ... --out C.md: the same picks
      judged by several journals (say, one per L2 flush, `measure --flush`), per family side by side
      .venv/bin/python benchmarks/config_prediction_retime.py noise --journals J1 J2 ... --out N.md: how much one
      round's timings move, per journal and family (say, one journal per L2 flush)
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from tunebench.files import write_text_atomically
from tunebench.kernels import matmul
from tunebench.measure.result import Status
from tunebench.measure.timing import FLUSHES, TimingPolicy, recorded_flush
from tunebench.predict.evaluation import (FAMILIES, family, percent_summary, retimed_efficiency,
                                          untimed_picks)

REPO = Path(__file__).resolve().parents[1]
DATASET = REPO / "results" / "datasets" / "matmul_bfloat16_h100_prediction.parquet"
PER_SHAPE = REPO / "results" / "config_prediction" / "per_shape.csv"
SUMMARY = REPO / "results" / "config_prediction" / "retime.md"
RECORDED_FASTEST = 20  # recorded fastest candidates per shape added to the timed set
ROUNDS = 4  # round 0: the top-k dispatcher's sitting; rounds 1..: the judge
TOP_K = 10
SEED = 0
BOOTSTRAP_RESAMPLES = 10_000  # compare: resamples of the shapes for the paired difference's interval
SPREAD_POINTS = 2  # compare: a shape whose efficiency moved by more than this many points between journals is counted
KEYS = tuple(matmul.config_space().names)  # the order of a config written 'a,b,...' in per_shape.csv


def parse_config(text: str) -> dict[str, int]:
    return dict(zip(KEYS, (int(value) for value in text.split(","))))


def timed_sets(per_shape: pd.DataFrame, dataset_path: Path) -> dict[tuple[int, int, int], list[str]]:
    """Per shape, the configs to time (as 'a,b,...' strings): model's top k, dispatcher pick, recorded fastest."""
    from tunebench.measure.dataset import load_dataset

    frame = load_dataset(dataset_path).measurements
    frame = frame[frame["status"] == Status.OK.value]
    sets = {}
    for row in per_shape.itertuples(index=False):
        shape = (int(row.M), int(row.N), int(row.K))
        recorded = frame[(frame["M"] == shape[0]) & (frame["N"] == shape[1]) & (frame["K"] == shape[2])]
        fastest = recorded.nsmallest(RECORDED_FASTEST, "latency_ms")[list(KEYS)].astype(int).to_numpy()
        configs = [*str(getattr(row, f"top{TOP_K}_configs")).split(";"), row.dispatcher_config,
                   *(",".join(map(str, values)) for values in fastest)]
        sets[shape] = list(dict.fromkeys(configs))
    return sets


def picks_path(journal: Path) -> Path:
    """The per-shape picks a journal times, frozen beside it."""
    return journal.with_suffix(".picks.csv")


def measure(args: argparse.Namespace) -> None:
    """Time every shape's set, round by round, appending each result to the journal (resumable)."""
    from tqdm import tqdm

    from tunebench.measure.live import GpuBench

    journal = Path(args.journal)
    provenance = journal.with_suffix(".provenance.json")
    if provenance.exists() and (flush := journal_flush(provenance)) != args.flush:
        raise SystemExit(f"error: {journal} was timed with --flush {flush}, not --flush {args.flush}: one journal "
                         f"holds one timing policy; continue it with --flush {flush} or name another --journal")
    picks = picks_path(journal)
    if not picks.exists():
        shutil.copyfile(args.per_shape, picks)
    sets = timed_sets(pd.read_csv(picks), args.dataset)
    done = set()
    if journal.exists():
        existing = pd.read_csv(journal)
        done = set(zip(existing["round"], existing["M"], existing["N"], existing["K"]))
    started = time.monotonic()
    with GpuBench("matmul", "bfloat16", timing=TimingPolicy(flush=args.flush)) as bench:
        if not provenance.exists():
            write_text_atomically(provenance, json.dumps(bench.provenance(["python3", *sys.argv]), indent=1))
        new_file = not journal.exists()
        with journal.open("a") as out:
            if new_file:
                out.write("round,M,N,K,config,status,latency_ms\n")
            todo = [(r, shape) for r in range(args.rounds) for shape in sets if (r, *shape) not in done]
            for round_index, shape in tqdm(todo, desc="shape-rounds", unit="shape"):
                if time.monotonic() - started > args.stop_after_s:
                    print(f"stopping after {args.stop_after_s} s; rerun to resume")
                    break
                configs = list(sets[shape])
                random.Random(f"{SEED}-{round_index}-{shape}").shuffle(configs)
                results = bench.measure([parse_config(text) for text in configs], shape)
                out.write("".join(f'{round_index},{shape[0]},{shape[1]},{shape[2]},"{text}",{result.status.value},'
                                  f"{result.latency_ms if result.ok else ''}\n" for text, result in zip(configs, results)))
                out.flush()  # one write per shape and round: a kill loses at most the shape being timed


def summarize(args: argparse.Namespace) -> None:
    from tunebench.tables import markdown_table

    journal = pd.read_csv(args.journal)
    picks = args.picks or picks_path(Path(args.journal))
    if not picks.exists():
        raise FileNotFoundError(f"no frozen picks at {picks}: `measure` writes them beside the journal")
    per_shape = pd.read_csv(picks)
    untimed = untimed_picks(journal, per_shape, TOP_K)
    if untimed:
        raise SystemExit(f"{len(untimed)} picks of {picks.name} were never timed in {Path(args.journal).name}, "
                         f"e.g. {untimed[0]}: judge only picks whose configs the sitting timed")
    start, stop = args.rows
    per_shape = per_shape.iloc[start:stop]
    table = retimed_efficiency(journal, per_shape, TOP_K)
    if table.empty:
        raise SystemExit(f"no shape of {picks.name} was timed in {Path(args.journal).name}")
    provenance = json.loads(Path(args.journal).with_suffix(".provenance.json").read_text())
    columns = judged_columns(table)
    rounds = int(journal["round"].max()) + 1
    worst = table.nsmallest(10, "prediction")
    rows_note = f" (rows {start} to {stop - 1} of the frozen picks)" if args.rows != (0, None) else ""
    text = f"""# Config prediction re-timed side by side on the GPU

Command: `{provenance['command']}` on {provenance['gpu_name']} (Triton {provenance['triton']}, first sitting
{provenance['date']}; a run stopped by `--stop-after-s` resumes from the journal, `{Path(args.journal).name}`); summary:
`.venv/bin/python {' '.join(sys.argv)}`.

{len(table)} held-out shapes{rows_note}; per shape {RECORDED_FASTEST} recorded fastest candidates, the model's
top {TOP_K} and the dispatcher's pick (median {table['configs timed'].median():.0f} configs), timed in {rounds} interleaved
rounds (configs shuffled per round). Round 0 is the sitting in which "top {TOP_K} timed" picks its fastest; every
efficiency is judged on the median of rounds 1 to {rounds - 1}: fastest median in the set / the pick's median. The
picks are those of `{picks.name}`, each made by a model that never saw the shape (out of fold, GroupKFold by shape,
or frozen before the shape was measured). "(replay)" rows judge the same picks by the recorded dataset, as benchmarks/config_prediction.py does.
"recorded best" is the replay's measured best, judged here.

{markdown_table(judged_summary(table))}

The 10 shapes with the lowest re-timed prediction efficiency:

{markdown_table(worst.assign(**{name: worst[name].map('{:.2%}'.format) for name in columns}))}
"""
    write_text_atomically(args.out, text)
    print(text)


def journal_flush(provenance: Path) -> str:
    """How the sitting whose provenance file this is evicted the L2."""
    return recorded_flush(json.loads(provenance.read_text()).get("timing"))


def journal_label(journal: Path) -> str:
    """A journal's name with the flush its sitting timed under."""
    return f"{journal.stem} (flush {journal_flush(journal.with_suffix('.provenance.json'))})"


def shared_shapes_by_family(tables: dict[str, pd.DataFrame], none_shared: str
                            ) -> tuple[list[tuple[int, int, int]], list[tuple[str, list[tuple[int, int, int]]]]]:
    """The shapes every table (indexed by M, N, K) holds, and those shapes per family, "all" first, empty families
    left out; SystemExit with `none_shared` where they share none."""
    shapes = sorted(set.intersection(*(set(table.index) for table in tables.values())))
    if not shapes:
        raise SystemExit(none_shared)
    groups = [("all", shapes), *((name, [s for s in shapes if family(s[0]) == name]) for name, _, _ in FAMILIES)]
    return shapes, [(name, members) for name, members in groups if members]


def compare(args: argparse.Namespace) -> None:
    """The picks frozen beside the first journal, judged by every journal on the shapes all of them timed in full
    (say, one sitting per L2 flush): per family, each journal's mean / P10 / min efficiency of the prediction and the
    dispatcher, and the median latency of each shape's fastest config in the set."""
    from tunebench.tables import markdown_table

    if not args.journals or len(args.journals) < 2:
        raise SystemExit("compare needs --journals with two or more re-timing journals")
    per_shape = pd.read_csv(picks_path(args.journals[0]))
    tables, bests = {}, {}
    for journal in args.journals:
        label = journal_label(journal)
        frame = pd.read_csv(journal)
        ok = frame[(frame["status"] == Status.OK.value) & (frame["round"] > 0)]
        bests[label] = ok.groupby(["M", "N", "K", "config"])["latency_ms"].median().groupby(["M", "N", "K"]).min()
        table = retimed_efficiency(frame, per_shape, TOP_K)
        if table.empty:
            raise SystemExit(f"{journal.name} timed none of the shapes of {picks_path(args.journals[0]).name}")
        tables[label] = table.set_index(["M", "N", "K"])
    labels = list(tables)
    shapes, groups = shared_shapes_by_family(tables, "the journals share no re-timed shape")
    rows = []
    for name, members in groups:
        row = {"shapes": name, "count": len(members)}
        for label, table in tables.items():
            for column in ("prediction", "dispatcher"):
                values = table.loc[members, column]
                row[f"{column}, {label}"] = percent_summary(values)
            row[f"fastest's median latency, {label}"] = f"{1000 * bests[label].loc[members].median():.1f} us"
        first = tables[labels[0]].loc[members, "prediction"]
        for label in labels[1:]:
            differences = tables[label].loc[members, "prediction"] - first
            row[f"prediction, {label} - the first (points, 95 % interval)"] = paired_difference(differences)
            row[f"prediction, {label} vs the first: median |difference|, shapes beyond {SPREAD_POINTS} points"] = (
                f"{100 * differences.abs().median():.2f}, {int((100 * differences.abs() > SPREAD_POINTS).sum())}")
        rows.append(row)
    text = (f"# Re-timed picks judged by several sittings\n\nCommand: `.venv/bin/python {' '.join(sys.argv)}`.\n\n"
            f"The picks frozen beside `{args.journals[0].name}` on the {len(shapes)} shapes every journal timed, each "
            "judged as `summarize` judges it (rounds 1.. of the journal's own sitting): mean / P10 / min efficiency, "
            "the median over shapes of the fastest config's latency, and each later journal's efficiency of the "
            "prediction minus the first's, shape by shape: the mean in points, with its 95 % bootstrap interval "
            f"(seed {SEED}, {BOOTSTRAP_RESAMPLES:,} resamples of the shapes), the median of its absolute value and "
            f"how many shapes it moved by more than {SPREAD_POINTS} points.\n\n{markdown_table(pd.DataFrame(rows))}\n")
    write_text_atomically(args.out, text)
    print(text)


def round_noise(frame: pd.DataFrame) -> pd.DataFrame:
    """Per shape of a re-timing journal, what one round's timings are worth, judged by rounds 1..: `spread`, the
    median over the shape's configs of their timings' coefficient of variation across those rounds; `one-round
    ceiling`, the mean over those rounds of (the fastest median of the other rounds) / (the other rounds' median of
    the config fastest in this round): a perfect pick by one timing each, judged by the rest. Configs not timed ok in
    every judged round are left out; shapes with fewer than three judged rounds too."""
    ok = frame[(frame["status"] == Status.OK.value) & (frame["round"] > 0)]
    rows = []
    for shape, timings in ok.groupby(["M", "N", "K"]):
        table = timings.pivot_table(index="config", columns="round", values="latency_ms").dropna()
        rounds = list(table.columns)
        if len(rounds) < 3 or table.empty:
            continue
        ceilings = []
        for judged in rounds:
            others = table[[r for r in rounds if r != judged]].median(axis=1)
            ceilings.append(others.min() / others[table[judged].idxmin()])
        spread = (table.std(axis=1) / table.mean(axis=1)).median()
        rows.append({"M": shape[0], "N": shape[1], "K": shape[2], "configs": len(table), "rounds": len(rounds),
                     "spread": spread, "one-round ceiling": float(np.mean(ceilings))})
    return pd.DataFrame(rows)


def noise(args: argparse.Namespace) -> None:
    """Per journal and family, `round_noise` over the shapes every journal timed in three or more judged rounds: the
    median spread and the one-round ceiling's mean / P10 / min, and each later journal's ceiling minus the first's,
    shape by shape (mean in points, bootstrap interval)."""
    from tunebench.tables import markdown_table

    if not args.journals:
        raise SystemExit("noise needs --journals: one or more re-timing journals")
    tables = {}
    for journal in args.journals:
        label = journal_label(journal)
        table = round_noise(pd.read_csv(journal))
        if table.empty:
            raise SystemExit(f"{journal.name} has no shape timed ok in three or more rounds after round 0")
        tables[label] = table.set_index(["M", "N", "K"])
    labels = list(tables)
    shapes, groups = shared_shapes_by_family(tables, "the journals share no shape timed in three or more rounds")
    rows = []
    for name, members in groups:
        row = {"shapes": name, "count": len(members)}
        for label, table in tables.items():
            ceiling = table.loc[members, "one-round ceiling"]
            row[f"spread (median CV), {label}"] = f"{table.loc[members, 'spread'].median():.2%}"
            row[f"one-round ceiling, {label}"] = percent_summary(ceiling)
        first = tables[labels[0]].loc[members, "one-round ceiling"]
        for label in labels[1:]:
            differences = tables[label].loc[members, "one-round ceiling"] - first
            row[f"ceiling, {label} - the first (points, 95 % interval)"] = paired_difference(differences)
        rows.append(row)
    rounds = {label: int(table["rounds"].min()) for label, table in tables.items()}
    text = (f"# How much one round's timings move\n\nCommand: `.venv/bin/python {' '.join(sys.argv)}`.\n\n"
            f"Each journal's rounds after round 0 ({', '.join(f'{label}: {count}' for label, count in rounds.items())}"
            f" at least), on the {len(shapes)} shapes every journal timed. Spread: per shape, the median over its "
            "configs (the set `measure` times: the recorded fastest candidates and the picks) of their timings' "
            "coefficient of variation across the rounds; the median of that over shapes. One-round ceiling: per "
            "shape, the config fastest in one round, judged by the median of the other rounds against the fastest "
            "median there, averaged over the rounds: the efficiency a perfect pick gets from one timing a config; "
            "mean / P10 / min over shapes. Each later journal's ceiling minus the first's, shape by shape: the mean "
            f"in points with its 95 % bootstrap interval (seed {SEED}, {BOOTSTRAP_RESAMPLES:,} resamples of the "
            f"shapes).\n\n{markdown_table(pd.DataFrame(rows))}\n")
    write_text_atomically(args.out, text)
    print(text)


def paired_difference(differences: pd.Series) -> str:
    """The mean of per-shape differences in efficiency, in points, with its 95 % percentile bootstrap interval over
    shapes (seeded); 'n/a' for the interval with fewer than two shapes."""
    from scipy.stats import bootstrap

    values = np.sort(100 * differences.to_numpy(dtype=float))  # the interval independent of the shapes' order
    if len(values) < 2:
        return f"{values.mean():+.2f} (n/a)"
    interval = bootstrap((values,), np.mean, n_resamples=BOOTSTRAP_RESAMPLES, method="percentile",
                         random_state=SEED).confidence_interval
    return f"{values.mean():+.2f} [{interval.low:+.2f}, {interval.high:+.2f}]"


def judged_columns(table: pd.DataFrame) -> list[str]:
    """The efficiency columns of a `retimed_efficiency` table (every one but the shape and the count timed)."""
    return [name for name in table.columns if name not in ("M", "N", "K", "configs timed")]


def judged_summary(table: pd.DataFrame) -> pd.DataFrame:
    """Mean, P10, min and median of each judged column over the table's shapes, as percentages."""
    return pd.DataFrame([{"judged": name, "mean": f"{table[name].mean():.2%}",
                          "P10": f"{np.percentile(table[name], 10):.2%}", "min": f"{table[name].min():.2%}",
                          "median": f"{table[name].median():.2%}"} for name in judged_columns(table)])


def pool(args: argparse.Namespace) -> None:
    """Mean / P10 / min of every judged column over the shapes of several sittings together (checks of one
    predictor, say), each sitting's picks those frozen beside its journal."""
    from tunebench.tables import markdown_table

    if not args.journals:
        raise SystemExit("pool needs --journals: one or more re-timing journals")
    tables = []
    for journal in args.journals:
        per_shape = pd.read_csv(picks_path(journal))
        table = retimed_efficiency(pd.read_csv(journal), per_shape, TOP_K)
        if len(table) != len(per_shape):
            raise SystemExit(f"{journal.name}: {len(per_shape) - len(table)} of its {len(per_shape)} frozen shapes "
                             "were not timed: pool only finished sittings")
        tables.append(table)
    table = pd.concat(tables, ignore_index=True)
    text = (f"# Re-timed checks pooled\n\nCommand: `.venv/bin/python {' '.join(sys.argv)}`.\n\n{len(table)} shapes "
            f"from {len(args.journals)} sittings ({', '.join(f'`{j.name}`' for j in args.journals)}), each judged as "
            f"`summarize` judges it (rounds 1.. of its own sitting), pooled before the mean, P10 and min.\n\n"
            f"{markdown_table(judged_summary(table))}\n")
    write_text_atomically(args.out, text)
    print(text)


def row_range(text: str) -> tuple[int, int]:
    """'START:STOP' as two ints, 0 <= START < STOP; a clear error otherwise."""
    start, _, stop = text.partition(":")
    try:
        bounds = int(start), int(stop)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--rows takes START:STOP with two integers, got {text!r}") from None
    if not 0 <= bounds[0] < bounds[1]:
        raise argparse.ArgumentTypeError(f"--rows {text!r}: need 0 <= START < STOP")
    return bounds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("mode", choices=("measure", "summarize", "pool", "compare", "noise"))
    parser.add_argument("--journal", type=Path, default=REPO / "results" / "config_prediction" / "retime_h100.csv")
    parser.add_argument("--per-shape", type=Path, default=PER_SHAPE, help="the picks to time (first sitting only)")
    parser.add_argument("--dataset", type=Path, default=DATASET)
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    parser.add_argument("--stop-after-s", type=float, default=float("inf"))
    parser.add_argument("--out", type=Path, default=SUMMARY)
    parser.add_argument("--picks", type=Path, default=None,
                        help="summarize: judge these picks instead of those frozen beside the journal (a sitting that "
                             "timed the union of two predictors' picks judges each); every pick must have been timed")
    parser.add_argument("--rows", type=row_range, default=(0, None), metavar="START:STOP",
                        help="summarize only these rows of the frozen picks (0-based, STOP excluded)")
    parser.add_argument("--journals", type=Path, nargs="+",
                        help="pool, compare, noise: the re-timing journals to pool, to judge the first one's picks by "
                             "or to measure the noise of")
    parser.add_argument("--flush", choices=FLUSHES, default="zero",
                        help="measure: how the timer evicts the L2 before each run (docs/measuring.md)")
    args = parser.parse_args()
    {"measure": measure, "summarize": summarize, "pool": pool, "compare": compare, "noise": noise}[args.mode](args)


if __name__ == "__main__":
    main()
