#!/usr/bin/env python3
"""Time torch.softmax and torch.softmax + torch.topk on softk_bench's shapes; write JSON that
bench/summarize.py merges with softk_bench's.

    python3 bench/torch_baseline.py --out OUT/torch.json [--names OUT/names.txt | --filter REGEX]

Rows it writes (same names as softk_bench, algorithm field):
  softmax/<dtype>/<dist>/rows:R/V:V/torch          torch.softmax(x, -1, dtype=torch.float32)
  topk/<dtype>/<dist>/rows:R/V:V/K:K/torch         p = torch.softmax(x, -1, dtype=float32);
                                                   torch.topk(p, K)  (same contract as softk.topk)
  topk/<dtype>/<dist>/rows:R/V:V/K:K/torch_topk    torch.topk(x, K) on the raw logits: ranking only,
                                                   no probabilities (a lower bound for torch)
  sample/<dtype>/<dist>/rows:R/V:V/K:K/torch_<bound>  one token a row as softk_bench's sample/.../<bound>
                                                   (top_k K alone, with top_p 0.9 or min_p 0.05; K:0 no
                                                   top_k) the usual torch way: torch.topk (K > 0) or
                                                   torch.sort (top_p with no top_k), softmax, the bound
                                                   as a mask, then an exponential race (argmax of
                                                   p / Exp(1)), which needs no host sync
Counters us / GB/s / pct_copy mean what they mean in softk_bench: bytes = logits read once +
the contract's output written (fp32 probs [+ int32 indices]; sample: int32 tokens), and pct_copy is against a
device-to-device copy measured by this script at start-up, counting read + write bytes.

Method (mirrors softk_bench): inputs are generated on the GPU (never zeros) in L2-rotation
copies whose total exceeds 2x the L2 size; a burst of N ops, each on the next copy, is captured
in a CUDA graph (several graphs when the copies outnumber N) and replayed between two CUDA
events, so the time is GPU time without Python/launch overhead; per-op time = burst / N; warm-up
first; the median of --iters bursts per repetition, --reps repetitions, median aggregate. If
graph capture fails, it falls back to eager bursts behind torch.cuda._sleep (label says so).
"""
from __future__ import annotations

import argparse
import datetime
import json
import math
import re
import socket
import statistics
import sys

import torch

DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}


# ------------------------------------------------------------------------------------------
# Shapes: the same lists softk_bench registers (keep in sync with bench/softk_bench.cu), or
# exactly the shapes named in a softk_bench --benchmark_list_tests output (--names).

def softmax_shapes():
    s = [(128, 1024)] + [(2048, v) for v in (1024, 2048, 4096, 8192)]
    v = 16384
    while v <= 33554432:
        s.append((4, v))
        v *= 2
    s += [(r, v) for r in (1, 8, 64, 256) for v in (32000, 128256, 151936, 256000)]
    return s


def topk_shapes():
    ks = (1, 50, 256, 1024)
    s = {(r, v, k) for k in ks for r in (1, 8, 64, 256, 1024)
         for v in (32000, 50257, 128256, 151936, 201088, 256000, 1048576)}
    s |= {(r, v, k) for k in ks for r in (1, 2, 4, 8, 16)
          for v in (32000, 128256, 151936, 201088, 256000, 1048576, 4194304, 16777216, 67108864)}
    return sorted(s)


def sample_cases():
    """(rows, V, K, bound) as softk_bench's register_sample."""
    s = []
    for r in (1, 8, 64, 256):
        for v in (32000, 128256, 256000):
            s += [(r, v, 50, b) for b in ("top_k", "top_p", "min_p")]
            s += [(r, v, 0, b) for b in ("top_p", "min_p")]
    return s


def all_cases(dtypes, dists, max_input_gib):
    """Cases as (kind, dtype, dist, rows, V, K, bound): K 0 for softmax, bound "" but for sample."""
    cases = []
    for dt in dtypes:
        for dist in dists:
            for rows, v in softmax_shapes():
                cases.append(("softmax", dt, dist, rows, v, 0, ""))
            for rows, v, k in topk_shapes():
                if k <= v:
                    cases.append(("topk", dt, dist, rows, v, k, ""))
            for rows, v, k, bound in sample_cases():
                cases.append(("sample", dt, dist, rows, v, k, bound))
    esize = {"f32": 4, "bf16": 2, "f16": 2}
    return [c for c in cases if c[3] * c[4] * esize[c[1]] <= max_input_gib * 2**30]


NAME_RX = re.compile(r"^(softmax|topk|sample)/(\w+)/(\w+)/rows:(\d+)/V:(\d+)/(?:K:(\d+)/)?(top_k|top_p|min_p)?")


def cases_from_names(path):
    seen, cases = set(), []
    with open(path) as f:
        for line in f:
            m = NAME_RX.match(line.strip())
            if not m:
                continue
            if (m[1] == "sample") != bool(m[7]):
                continue
            c = (m[1], m[2], m[3], int(m[4]), int(m[5]), int(m[6] or 0), m[7] or "")
            if c not in seen:
                seen.add(c)
                cases.append(c)
    return cases


def case_name(c, algo):
    kind, dt, dist, rows, v, k, _ = c
    n = f"{kind}/{dt}/{dist}/rows:{rows}/V:{v}/"
    return n + (f"K:{k}/" if kind != "softmax" else "") + algo


def torch_sample(x, k, bound):
    """One token a row: top_k k (0: none) alone, or with top_p 0.9 or min_p 0.05, at temperature 1."""
    logits = x.float()
    if k > 0:
        logits, order = torch.topk(logits, k, dim=-1)
    elif bound == "top_p":
        logits, order = torch.sort(logits, dim=-1, descending=True)
    else:
        order = None
    p = torch.softmax(logits, -1)
    if bound == "top_p":  # a token is kept while the mass before it is below top_p
        p = p.masked_fill(p.cumsum(-1) - p >= 0.9, 0.0)
    elif bound == "min_p":
        p = p.masked_fill(p < 0.05 * p.amax(-1, keepdim=True), 0.0)
    choice = (p / torch.empty_like(p).exponential_()).argmax(-1, keepdim=True)
    return (order.gather(-1, choice) if order is not None else choice).to(torch.int32)


# ------------------------------------------------------------------------------------------
# Inputs.

def make_logits(slots, rows, v, dtype, dist, gen):
    """[slots, rows, v] on the GPU. llm: N(0, 2^2) tail + 8 dominant logits per row; normal: N(0, 1)."""
    x = torch.empty((slots, rows, v), dtype=torch.float32, device="cuda")
    if dist == "llm":
        x.normal_(0.0, 2.0, generator=gen)
        cols = torch.randint(0, v, (slots, rows, 8), device="cuda", generator=gen)
        vals = 16.0 - 1.5 * torch.arange(8, device="cuda", dtype=torch.float32)
        vals = vals + torch.rand((slots, rows, 8), device="cuda", generator=gen)
        x.scatter_(2, cols, vals)
    else:
        x.normal_(0.0, 1.0, generator=gen)
    return x.to(DTYPES[dtype]) if dtype != "f32" else x


def copy_bandwidth(trials=15):
    free, _ = torch.cuda.mem_get_info()
    n = min(1 << 30, free // 4) // (1 << 20) * (1 << 20)
    src = torch.full((n,), 0x3C, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    vals = []
    for t in range(trials + 2):
        a.record()
        dst.copy_(src)
        b.record()
        b.synchronize()
        if t >= 2:
            vals.append(2 * n / (a.elapsed_time(b) * 1e-3) / 1e9)
    del src, dst
    torch.cuda.empty_cache()
    return statistics.median(vals), n


# ------------------------------------------------------------------------------------------
# Timing.

def time_bursts(op, slots, burst_target_us, max_burst, iters, reps, mode, max_op_s):
    """op(slot) enqueues one op. Returns (list of per-repetition median per-op seconds, burst, label)."""
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    # Warm-up (allocator, cuBLAS-free but topk/softmax kernels load lazily) and calibration.
    for s in range(min(3, slots)):
        op(s)
    torch.cuda.synchronize()
    start.record()
    op(0)
    stop.record()
    stop.synchronize()
    one = max(start.elapsed_time(stop) * 1e-3, 1e-7)
    if one > max_op_s:  # too slow to repeat: one sample is precise enough at this length
        return [one], 1, "slow: one sample, not repeated"
    burst = int(min(max(math.ceil(burst_target_us * 1e-6 / one), 1), max_burst))

    label = ""
    graphs = []
    if mode == "graph":
        try:
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for s in range(min(3, slots)):
                    op(s)
            torch.cuda.current_stream().wait_stream(side)
            torch.cuda.synchronize()
            # Enough graphs that consecutive replays walk through every rotation slot.
            n_graphs = max(1, min(math.ceil(slots / burst), 64))
            keep = []  # keep outputs alive so each captured op writes its own buffer
            for gi in range(n_graphs):
                g = torch.cuda.CUDAGraph()
                with torch.cuda.graph(g):
                    for j in range(burst):
                        keep.append(op((gi * burst + j) % slots))
                graphs.append(g)
            torch.cuda.synchronize()
        except Exception as e:  # capture unsupported: fall back to eager bursts
            graphs = []
            label = f"eager (graph capture failed: {type(e).__name__})"
            torch.cuda.synchronize()
    else:
        label = "eager"

    def one_burst(i):
        if graphs:
            g = graphs[i % len(graphs)]
            start.record()
            g.replay()
            stop.record()
        else:
            # Hold the stream so the host can enqueue the whole burst before the GPU starts:
            # ~50 us of host time per op at 1.5 GHz is generous for softmax + topk.
            torch.cuda._sleep(int(burst * 50e-6 * 1.5e9))
            start.record()
            for j in range(burst):
                op((i * burst + j) % slots)
            stop.record()
        stop.synchronize()
        return start.elapsed_time(stop) * 1e-3 / burst

    one_burst(0)  # warm replay
    results = []
    i = 1
    for _ in range(reps):
        per = []
        for _ in range(iters):
            per.append(one_burst(i))
            i += 1
        results.append(statistics.median(per))
    del graphs
    return results, burst, label


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="JSON output (Google Benchmark format)")
    ap.add_argument("--md", help="also write a markdown table here")
    ap.add_argument("--names", help="file of softk_bench names (--benchmark_list_tests output): time exactly those shapes")
    ap.add_argument("--filter", help="regex on names like topk/f32/llm/rows:8/V:128256/K:50/torch")
    ap.add_argument("--dtypes", default="f32,bf16")
    ap.add_argument("--dists", default="llm,normal")
    ap.add_argument("--kinds", default="softmax,topk,sample")
    ap.add_argument("--no-topk-only", action="store_true", help="skip the torch_topk (raw logits) rows")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--burst-us", type=float, default=500.0)
    ap.add_argument("--max-burst", type=int, default=64)
    ap.add_argument("--mode", choices=["graph", "eager"], default="graph")
    ap.add_argument("--max-op-s", type=float, default=0.25, help="an op slower than this is timed once")
    ap.add_argument("--max-input-gib", type=float, default=4.0)
    ap.add_argument("--rotation-gib", type=float, default=2.0, help="cap on the L2-rotation copies")
    args = ap.parse_args(argv)

    if not torch.cuda.is_available():
        print("torch_baseline.py: no CUDA device; nothing to time", file=sys.stderr)
        return 1
    dev = torch.cuda.get_device_properties(0)
    l2 = int(getattr(dev, "L2_cache_size", 50 << 20) or (50 << 20))
    copy_gbps, copy_bytes = copy_bandwidth()
    print(f"torch_baseline: {dev.name}, L2 {l2 / 2**20:.0f} MiB, copy {copy_gbps:.1f} GB/s "
          f"(D2D of {copy_bytes >> 20} MiB, read+write), torch {torch.__version__}", file=sys.stderr)

    if args.names:
        cases = cases_from_names(args.names)
    else:
        cases = all_cases(args.dtypes.split(","), args.dists.split(","), args.max_input_gib)
    kinds = set(args.kinds.split(","))
    cases = [c for c in cases if c[0] in kinds]
    rx = re.compile(args.filter) if args.filter else None

    gen = torch.Generator(device="cuda")
    gen.manual_seed(0x5EED)
    benchmarks, md_rows = [], []
    cache_key, cache = None, None
    for c in cases:
        kind, dt, dist, rows, v, k, bound = c
        if kind == "sample":
            algos = ["torch_" + bound]
        elif kind == "softmax" or args.no_topk_only:
            algos = ["torch"]
        else:
            algos = ["torch", "torch_topk"]
        algos = [a for a in algos if not rx or rx.search(case_name(c, a))]
        if not algos:
            continue
        esize = 4 if dt == "f32" else 2
        in_bytes = rows * v * esize
        out_bytes = rows * v * 4 if kind == "softmax" else rows * k * 8 if kind == "topk" else rows * 4
        slot_bytes = in_bytes + out_bytes
        slots = max(1, min(2 * l2 // slot_bytes + 1, max(int(args.rotation_gib * 2**30) // slot_bytes, 1)))
        key = (dt, dist, rows, v, slots)
        try:
            if key != cache_key:
                cache = None
                torch.cuda.empty_cache()
                cache = make_logits(slots, rows, v, dt, dist, gen)
                cache_key = key
            x = cache
            for algo in algos:
                name = case_name(c, algo)
                if kind == "softmax":
                    op = lambda s: torch.softmax(x[s], -1, dtype=torch.float32)
                elif kind == "sample":
                    op = lambda s: torch_sample(x[s], k, bound)
                elif algo == "torch":
                    op = lambda s: torch.topk(torch.softmax(x[s], -1, dtype=torch.float32), k, dim=-1)
                else:
                    op = lambda s: torch.topk(x[s], k, dim=-1)
                try:
                    per_rep, burst, label = time_bursts(op, slots, args.burst_us, args.max_burst, args.iters,
                                                        args.reps, args.mode, args.max_op_s)
                except Exception as e:  # out of memory, or torch rejecting the shape
                    torch.cuda.empty_cache()
                    benchmarks.append(error_entry(name, args, e))
                    continue
                nbytes = in_bytes + out_bytes
                for ri, t in enumerate(per_rep):
                    benchmarks.append(entry(name, "iteration", t, nbytes, copy_gbps, burst, slots, args, label, ri))
                med = statistics.median(per_rep)
                benchmarks.append(entry(name, "aggregate", med, nbytes, copy_gbps, burst, slots, args, label))
                md_rows.append((name, med * 1e6, nbytes / med / 1e9, 100 * nbytes / med / 1e9 / copy_gbps))
                print(f"{name:60s} {med * 1e6:10.2f} us {nbytes / med / 1e9:8.0f} GB/s "
                      f"{100 * nbytes / med / 1e9 / copy_gbps:6.1f}% {label}", file=sys.stderr)
        except Exception as e:  # generating the inputs failed (out of memory)
            cache, cache_key = None, None
            torch.cuda.empty_cache()
            for algo in algos:
                benchmarks.append(error_entry(case_name(c, algo), args, e))

    context = {
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "host_name": socket.gethostname(),
        "executable": "bench/torch_baseline.py",
        "gpu": dev.name,
        "sm_count": str(dev.multi_processor_count),
        "l2_bytes": str(l2),
        "copy_GBps": f"{copy_gbps:.1f}",
        "copy_bytes": str(copy_bytes),
        "torch_version": torch.__version__,
        "cuda_version": str(torch.version.cuda),
        "timing": f"per-op GPU time = CUDA-event time of a {args.mode} burst / burst length; "
                  "inputs rotate over > 2x L2",
    }
    with open(args.out, "w") as f:
        json.dump({"context": context, "benchmarks": benchmarks}, f, indent=1)
    if args.md:
        with open(args.md, "w") as f:
            f.write(f"torch {torch.__version__} on {dev.name}; copy {copy_gbps:.1f} GB/s\n\n")
            f.write("| benchmark | median µs | GB/s | % copy |\n|---|---|---|---|\n")
            for n, us, gbps, pct in md_rows:
                f.write(f"| {n} | {us:.2f} | {gbps:.0f} | {pct:.1f} |\n")
    print(f"torch_baseline: wrote {len(md_rows)} results to {args.out}", file=sys.stderr)
    return 0


def error_entry(name, args, e):
    msg = f"failed: {type(e).__name__}: {e}".replace("\n", " ")[:300]
    print(f"{name:60s} {msg}", file=sys.stderr)
    return {"name": name, "run_name": name, "run_type": "iteration", "repetitions": args.reps,
            "repetition_index": 0, "threads": 1, "error_occurred": True, "error_message": msg}


def entry(name, run_type, t, nbytes, copy_gbps, burst, slots, args, label, rep=0):
    gbps = nbytes / t / 1e9
    e = {
        "name": name + ("_median" if run_type == "aggregate" else ""),
        "run_name": name,
        "run_type": run_type,
        "repetitions": args.reps,
        "threads": 1,
        "iterations": args.iters,
        "real_time": t * 1e6,
        "cpu_time": t * 1e6,
        "time_unit": "us",
        "us": t * 1e6,
        "GB/s": gbps,
        "pct_copy": 100 * gbps / copy_gbps,
        "burst": burst,
        "slots": slots,
        "MB": nbytes / 1e6,
    }
    if run_type == "aggregate":
        e["aggregate_name"] = "median"
        e["aggregate_unit"] = "time"
    else:
        e["repetition_index"] = rep
    if label:
        e["label"] = label
    return e


if __name__ == "__main__":
    sys.exit(main())
