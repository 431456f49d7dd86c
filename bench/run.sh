#!/usr/bin/env bash
# Runs a named slice of softk_bench, optionally the torch baseline on the same shapes, and
# summarises the results. Run from anywhere; needs a built softk_bench.
#
#   bench/run.sh SLICE OUTDIR [BUILD_DIR]
#   bench/run.sh --filter SLICE        print the slice's --benchmark_filter regex
#
# SLICE:
#   headline  ~2 min: every softmax algorithm at the decode and seed-table shapes (f32, bf16, llm;
#             no CUB at 4 rows x >= 16K, where the block-per-row reference takes seconds), and
#             top-k at rows {1,8,256} x V {32000,128256,256000} x K {1,50,1024} with all algorithms,
#             plus rows {1,4} x V {4M,64M} x K {1,50} without the CUB baselines.
#   softmax   every softmax benchmark (both dists, every registered dtype)
#   topk      issue 3: rows {1,8,64,128,256,1024} x V up to 1M, 8-8192 rows of 1000-16000 and
#             16384 rows of 8-256 (MoE routing),
#             every K, algorithm and dist
#   splitk    issue 4: rows {1,2,4,8,16} x V up to 64M, every K, algorithm and dist
#   short     256 and 8192 rows of 1000 and 4000 tokens, 16384 rows of 8-256 (MoE routing): auto,
#             fused and copy, llm logits, every registered K and dtype
#   matrix    issue 3's bench matrix under auto only, both dists (with TORCH=1: its 10x-torch line
#             at every shape): rows {1,8,64,256,1024} x V {32000..1048576} x K {1,50,256,1024}
#   sample    softk::sample at rows {1,8,64,256} x V {32000,50257,128256,256000} (llm logits), beside
#             top-k K=50 auto at the same shapes
#   full      everything (hours: the CUB baselines at large shapes are slow)
# OUTDIR gets: names.txt (the slice), softk.json, softk.txt (console), torch.json/torch.md if
# TORCH=1, summary.md, and PNG plots when matplotlib is installed.
# Environment: REPS (default 3) repetitions; TORCH=1 also runs bench/torch_baseline.py;
# BENCH_ARGS extra softk_bench flags (e.g. --softk_dists=llm,normal).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

slice_filter() {
  case $1 in
    headline)
      local f='^(softmax/(f32|bf16)/llm/rows:(1|8|16|32|64|96|128|256|2048)/'
      f+='|softmax/(f32|bf16)/llm/rows:4/V:[0-9]+/(auto|register|smem|two_pass|split_k|copy)/'
      f+='|topk/(f32|bf16)/llm/rows:(1|8|256)/V:(32000|128256|256000)/K:(1|50|1024)/'
      f+='|topk/(f32|bf16)/llm/rows:(1|4)/V:(4194304|67108864)/K:(1|50)/(auto|fused|radix_select|split_k|copy)/)'
      echo "$f"
      ;;
    softmax) echo '^softmax/' ;;
    topk) echo '^topk/[a-z0-9]+/[a-z]+/(rows:(1|8|64|128|256|1024)/V:(32000|50257|128256|151936|201088|256000|1048576)|rows:(8|64|256|512|1024|2048|8192)/V:(1000|2000|4000|8000|16000)|rows:16384/V:(8|64|128|256))/' ;;
    splitk) echo '^topk/[a-z0-9]+/[a-z]+/rows:(1|2|4|8|16)/' ;;
    short) echo '^topk/[a-z0-9]+/llm/(rows:(256|8192)/V:(1000|4000)|rows:16384/V:(8|64|128|256))/K:[0-9]+/(auto|fused|copy)/' ;;
    matrix) echo '^topk/(f32|bf16)/[a-z]+/rows:(1|8|64|256|1024)/V:(32000|50257|128256|151936|201088|256000|1048576)/K:(1|50|256|1024)/auto/' ;;
    sample) echo '^(sample/[a-z0-9]+/llm/|topk/[a-z0-9]+/llm/rows:(1|8|64|256)/V:(32000|128256|256000)/K:50/auto/)' ;;
    full) echo '.' ;;
    *) echo "run.sh: unknown slice '$1' (headline, softmax, topk, splitk, short, matrix, sample, full)" >&2; return 2 ;;
  esac
}

# `bench/run.sh --filter SLICE` prints the slice's --benchmark_filter regex and exits.
if [[ ${1:-} == --filter ]]; then
  slice_filter "${2:?usage: bench/run.sh --filter SLICE}"
  exit
fi

slice=${1:?usage: bench/run.sh SLICE OUTDIR [BUILD_DIR]}
out=${2:?usage: bench/run.sh SLICE OUTDIR [BUILD_DIR]}
build=${3:-$here/../build}
bin=$build/bench/softk_bench
filter=$(slice_filter "$slice")
[[ -x $bin ]] || { echo "run.sh: $bin not found; build the softk_bench target first" >&2; exit 2; }

mkdir -p "$out"
# shellcheck disable=SC2086  # BENCH_ARGS is a list of flags
"$bin" --benchmark_list_tests --benchmark_filter="$filter" ${BENCH_ARGS:-} > "$out/names.txt"
echo "run.sh: slice '$slice': $(wc -l < "$out/names.txt") benchmarks, ${REPS:-3} repetitions" >&2
# shellcheck disable=SC2086
"$bin" --benchmark_filter="$filter" --benchmark_repetitions="${REPS:-3}" \
  --benchmark_display_aggregates_only=true \
  --benchmark_out="$out/softk.json" --benchmark_out_format=json ${BENCH_ARGS:-} | tee "$out/softk.txt"

jsons=("$out/softk.json")
if [[ ${TORCH:-0} == 1 ]]; then
  python3 "$here/torch_baseline.py" --names "$out/names.txt" --reps "${REPS:-3}" \
    --out "$out/torch.json" --md "$out/torch.md"
  jsons+=("$out/torch.json")
fi

python3 "$here/summarize.py" "${jsons[@]}" --pivot --out "$out/summary.md" > /dev/null
for kind in softmax topk; do
  for dtype in f32 bf16; do
    python3 "$here/plot.py" "${jsons[@]}" --kind "$kind" --dtype "$dtype" \
      --out "$out/plot-$kind-$dtype.png" 2> /dev/null || true
  done
done
# The short verdict last: dispatcher counts and the issue targets.
grep -h '^\*\*.*✓.*✗\*\*\|^## .*dispatcher' "$out/summary.md" || true
awk '/^## Targets/ {p = 1; print; next} /^## / {p = 0} p' "$out/summary.md"
echo "run.sh: results in $out (summary.md, softk.json)" >&2
