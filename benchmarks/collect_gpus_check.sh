#!/usr/bin/env bash
# On a GPU machine: `python -m tunebench.collect --gpus <every GPU>` with its parent killed outright (SIGKILL)
# mid-sweep. No collector, compile or timing process may go on; a second collector is refused while one runs; the
# rerun finishes with no config measured twice. Then the GPU-marked tests.
# Run: `bash benchmarks/collect_gpus_check.sh DIR` (about 4 minutes on one H200); report and logs go to DIR.
set -u
OUT=${1:?usage: bash benchmarks/collect_gpus_check.sh OUTPUT_DIR}
mkdir -p "$OUT"
exec > >(tee "$OUT/summary.txt") 2>&1
export PYTHONPATH=lib${PYTHONPATH:+:$PYTHONPATH}
nvidia-smi --query-gpu=index,name,uuid --format=csv,noheader
GPUS=$(nvidia-smi --query-gpu=index --format=csv,noheader | paste -sd, -)
D=$(mktemp -d)
SHAPES=64x512x512,128x1024x1000,8x4096x4096,1000x2048x1536,3x3000x777
ARGS="--shapes $SHAPES --limit-configs 250 --seed 5 --out $D/ds.parquet --gpus $GPUS"
processes() { ps -eo pid,ppid,stat,etimes,args | grep -E "multiprocessing|tunebench" | grep -v grep; }
journal_lines() { cat "$D"/*.journal/journal.jsonl | wc -l; }

python3 -m tunebench.collect $ARGS > "$OUT/first.log" 2>&1 &
PARENT=$!
sleep 30
echo "== before the kill: journal lines $(journal_lines), processes $(processes | wc -l)"
echo "== a second collector while the first runs:"
python3 -m tunebench.collect $ARGS > "$OUT/second_while_running.log" 2>&1
echo "rc=$?"; tail -2 "$OUT/second_while_running.log"
kill -9 $PARENT; wait $PARENT 2>/dev/null
KILLED=$(date +%s)
while :; do
  sleep 1; LEFT=$(processes | wc -l); echo "$(( $(date +%s) - KILLED )) s after the kill: $LEFT processes left"
  [ "$LEFT" -eq 0 ] || [ $(( $(date +%s) - KILLED )) -ge 60 ] && break
done
processes
BEFORE=$(journal_lines); sleep 3
echo "journal lines after the kill: $BEFORE, 3 s later: $(journal_lines)"
START=$(date +%s)
python3 -m tunebench.collect $ARGS > "$OUT/rerun.log" 2>&1
echo "rerun rc=$? in $(( $(date +%s) - START )) s"
grep -a -E "measured before|wrote|GPU" "$OUT/rerun.log" | tail -4
python3 - "$D" <<'PY'
import collections, json, sys
from pathlib import Path
from tunebench.collect import Journal
from tunebench.measure.dataset import load_dataset

folder = Path(sys.argv[1])
dataset = load_dataset(folder / "ds.parquet", kernel="matmul")
print("rows", len(dataset.measurements), "shapes", len(dataset.shapes()),
      "status", dataset.measurements.status.value_counts().to_dict())
for path in sorted(folder.glob("*.journal/journal.jsonl")):
    counts = collections.Counter((tuple(r["shape"]), json.dumps(r["config"], sort_keys=True))
                                 for r in Journal(path).read() if r["kind"] == "config")
    print(path.parent.name, "config records", sum(counts.values()), "distinct", len(counts),
          "most of one", max(counts.values()))
provenance = dataset.provenance
print("gpu_uuid", provenance.get("gpu_uuid"), "timing_core", provenance.get("timing_core"),
      "sittings", json.dumps(provenance.get("sittings")))
PY
START=$(date +%s)
timeout 360 python3 -m pytest -q -m gpu -p no:cacheprovider --continue-on-collection-errors tests \
  > "$OUT/pytest_gpu.log" 2>&1
echo "gpu tests rc=$? in $(( $(date +%s) - START )) s"
grep -E "passed|failed" "$OUT/pytest_gpu.log" | tail -1; grep -E "^FAILED|^ERROR" "$OUT/pytest_gpu.log"
