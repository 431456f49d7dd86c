#!/usr/bin/env bash
# A same-run A/B of softk_bench. B is BUILD_DIR's bench (the tree as it is); A is the same tree
# with PATCH reversed (PATCH: `git diff A B -- src`, made where git is: the GPU machine's copy of
# the tree may have none), built beside it. Timings compare only within one run, and a GPU's
# pace drifts within one, so the filter runs A B B A: two rounds, each the median of REPS
# repetitions. Prints per benchmark A's and B's faster round (µs) and A/B (above 1: B is faster).
#
#   bench/ab.sh PATCH FILTER OUTDIR [BUILD_DIR]
# Environment: REPS (default 3); BUILD_ONLY=1 builds A and stops (to build it beside B's build).
# OUTDIR keeps A's tree and build, so a later call with another filter reuses them; ab.md holds
# the table.
set -euo pipefail

patch=$(realpath "${1:?usage: bench/ab.sh PATCH FILTER OUTDIR [BUILD_DIR]}")
filter=${2:?usage: bench/ab.sh PATCH FILTER OUTDIR [BUILD_DIR]}
out=${3:?usage: bench/ab.sh PATCH FILTER OUTDIR [BUILD_DIR]}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=$(realpath "${4:-$root/build}")
mkdir -p "$out"
out=$(realpath "$out")
a=$out/a-tree

if [[ ! -x $a/build/bench/softk_bench ]]; then
  rm -rf "$a"
  mkdir -p "$a"
  tar -C "$root" -cf - --exclude='./build*' --exclude='./out' --exclude='./.git' . | tar -C "$a" -xf -
  patch -R -p1 -s -d "$a" < "$patch"
  cmake -S "$a" -B "$a/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DSOFTK_BUILD_TESTS=OFF -DSOFTK_BUILD_BENCH=ON -DSOFTK_BUILD_SAMPLER=OFF -DSOFTK_BUILD_EXAMPLES=OFF \
    > "$out/a-configure.log"
  cmake --build "$a/build" --target softk_bench -j "$(nproc)" > "$out/a-build.log"
fi
[[ ${BUILD_ONLY:-0} == 1 ]] && exit 0

run() {
  "$1" --benchmark_filter="$filter" --benchmark_repetitions="${REPS:-3}" --benchmark_display_aggregates_only=true \
    --benchmark_out="$2" --benchmark_out_format=json > /dev/null
}
run "$a/build/bench/softk_bench" "$out/a1.json"
run "$build/bench/softk_bench" "$out/b1.json"
run "$build/bench/softk_bench" "$out/b2.json"
run "$a/build/bench/softk_bench" "$out/a2.json"

python3 - "$out" <<'EOF' | tee "$out/ab.md"
import json, sys
out = sys.argv[1]

def medians(path):
    got = {}
    for b in json.load(open(f"{out}/{path}"))["benchmarks"]:
        if b.get("aggregate_name") == "median":
            got[b["run_name"]] = float(b["us"]) if "us" in b else float(b["real_time"]) / 1e3
    return got

a = [medians("a1.json"), medians("a2.json")]
b = [medians("b1.json"), medians("b2.json")]
print("| benchmark | A µs | B µs | A/B |\n|---|---|---|---|")
for name in a[0]:
    ta = min(r.get(name, float("inf")) for r in a)
    tb = min(r.get(name, float("inf")) for r in b)
    print(f"| {name} | {ta:.2f} | {tb:.2f} | {ta / tb:.3f} |")
EOF
