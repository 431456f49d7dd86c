#!/usr/bin/env python3
"""Summarise softk_bench (and torch_baseline.py) Google Benchmark JSON as markdown.

    python3 bench/summarize.py OUT/softk.json [OUT/torch.json ...] [--out OUT/summary.md]

Reads any number of JSON files written with --benchmark_out=FILE --benchmark_out_format=json
(torch_baseline.py writes the same format) and merges them by benchmark name. For each
benchmark it takes the `median` aggregate when the run had --benchmark_repetitions > 1, else
the median of the repetitions present. Times are the `us` counter (per-op GPU time: the median
over a repetition's bursts), falling back to real_time.

Sections: context (GPU, copy bandwidth), all results (shape, dtype, dist, algorithm, median us,
GB/s, % of copy), per shape the best algorithm and how far `auto` is from it (the dispatcher
check: auto within --tolerance of the best forced algorithm), the crossovers of the best forced
algorithm along V, the issue targets, softk::sample against torch's sampling (sample/ names), and
what was skipped. Python 3 standard library only.
"""
from __future__ import annotations

import argparse
import json
import math
import re
import statistics
import sys
from collections import defaultdict
from dataclasses import dataclass, field

# Forced softk algorithms: the candidates for "best" in the dispatcher check.
FORCED = {
    "softmax": ["register", "smem", "two_pass", "split_k"],
    "topk": ["fused", "radix_select", "split_k"],
}
BASELINES = ["cub", "unfused", "torch", "torch_topk"]
ALGO_ORDER = ["auto", "register", "smem", "two_pass", "split_k", "fused", "radix_select",
              "cub", "unfused", "torch", "torch_topk", "copy"]
DTYPE_BYTES = {"f32": 4, "f16": 2, "bf16": 2}
DTYPE_ORDER = {"f32": 0, "bf16": 1, "f16": 2}
DIST_ORDER = {"llm": 0, "normal": 1}


def shape_sort_key(key):
    kind, dtype, dist, rows, vocab, k = key
    return (kind, DTYPE_ORDER.get(dtype, 9), DIST_ORDER.get(dist, 9), rows, vocab, k)


@dataclass
class Result:
    kind: str
    dtype: str
    dist: str
    rows: int
    vocab: int
    k: int  # 0 for softmax
    algo: str
    us: float = math.nan
    gbps: float = math.nan
    pct_copy: float = math.nan
    host_us: float = math.nan  # host time of one enqueue (softk_bench's host_us), where measured
    reps: int = 0
    error: str = ""
    source: str = ""
    label: str = ""

    @property
    def shape_key(self):
        return (self.kind, self.dtype, self.dist, self.rows, self.vocab, self.k)

    @property
    def input_bytes(self):
        return self.rows * self.vocab * DTYPE_BYTES.get(self.dtype, 4)


@dataclass
class Dataset:
    results: dict = field(default_factory=dict)      # run name (no suffix) -> Result
    contexts: list = field(default_factory=list)      # (file, context dict)
    duplicates: int = 0


def parse_name(run_name: str):
    """'topk/f32/llm/rows:8/V:128256/K:50/fused/iterations:10/manual_time' -> fields, or None."""
    parts = run_name.split("/")
    if len(parts) < 5 or parts[0] not in ("softmax", "topk", "sample"):
        return None
    fields = {"kind": parts[0], "dtype": parts[1], "dist": parts[2], "rows": 0, "vocab": 0, "k": 0, "algo": None}
    for p in parts[3:]:
        if ":" in p:
            key, _, val = p.partition(":")
            if key == "rows":
                fields["rows"] = int(val)
            elif key == "V":
                fields["vocab"] = int(val)
            elif key == "K":
                fields["k"] = int(val)
            # iterations:, repeats:, threads: are Google Benchmark's own suffixes
        elif p in ("manual_time", "real_time", "process_time"):
            continue
        elif fields["algo"] is None:
            fields["algo"] = p
    if fields["algo"] is None:
        return None
    base = "/".join(parts[:3] + [f"rows:{fields['rows']}", f"V:{fields['vocab']}"] +
                    ([f"K:{fields['k']}"] if fields["kind"] != "softmax" else []) + [fields["algo"]])
    return base, fields


def _to_us(entry):
    if "us" in entry:
        return float(entry["us"])
    t = float(entry.get("real_time", math.nan))
    unit = entry.get("time_unit", "ns")
    return t * {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}.get(unit, 1e-3)


def load(paths, name_filter=None) -> Dataset:
    ds = Dataset()
    rx = re.compile(name_filter) if name_filter else None
    for path in paths:
        with open(path) as f:
            data = json.load(f)
        ds.contexts.append((path, data.get("context", {})))
        per_name = defaultdict(lambda: {"median": None, "iters": [], "error": ""})
        label = {}
        for b in data.get("benchmarks", []):
            run_name = b.get("run_name") or b.get("name", "")
            parsed = parse_name(run_name)
            if parsed is None:
                continue
            base, _ = parsed
            if rx and not rx.search(base):
                continue
            slot = per_name[base]
            if b.get("error_occurred"):
                slot["error"] = b.get("error_message", "error")
                continue
            if b.get("label"):
                label[base] = b["label"]
            if b.get("run_type") == "aggregate":
                if b.get("aggregate_name") == "median":
                    slot["median"] = b
            else:
                slot["iters"].append(b)
        for base, slot in per_name.items():
            if base in ds.results:
                ds.duplicates += 1
                continue
            _, fl = parse_name(base)
            r = Result(fl["kind"], fl["dtype"], fl["dist"], fl["rows"], fl["vocab"], fl["k"], fl["algo"],
                       source=path, label=label.get(base, ""))
            if slot["median"] is not None:
                m = slot["median"]
                r.us = _to_us(m)
                r.gbps = float(m.get("GB/s", math.nan))
                r.pct_copy = float(m.get("pct_copy", math.nan))
                r.host_us = float(m.get("host_us", math.nan))
                r.reps = int(m.get("repetitions", 0) or len(slot["iters"]))
            elif slot["iters"]:
                its = slot["iters"]
                r.us = statistics.median(_to_us(e) for e in its)
                r.gbps = statistics.median(float(e.get("GB/s", math.nan)) for e in its)
                r.pct_copy = statistics.median(float(e.get("pct_copy", math.nan)) for e in its)
                r.host_us = statistics.median(float(e.get("host_us", math.nan)) for e in its)
                r.reps = len(its)
            else:
                r.error = slot["error"] or "no result"
            ds.results[base] = r
    return ds


# ------------------------------------------------------------------------------------------
# Formatting helpers.

def fmt(x, digits=1):
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    if abs(x) >= 100:
        return f"{x:.{min(digits, 1)}f}"
    return f"{x:.{digits}f}"


def fmt_v(v):
    """1048576 -> 1M, 16384 -> 16K; vocabularies that are not powers of two stay exact."""
    if v >= 1 << 20 and v % (1 << 20) == 0:
        return f"{v >> 20}M"
    if v >= 1024 and v & (v - 1) == 0:
        return f"{v >> 10}K"
    return str(v)


def shape_str(r_or_key):
    kind, _, _, rows, vocab, k = r_or_key if isinstance(r_or_key, tuple) else r_or_key.shape_key
    s = f"{rows}×{fmt_v(vocab)}"
    return s + (f", K={k}" if kind == "topk" else "")


def algo_rank(a):
    return ALGO_ORDER.index(a) if a in ALGO_ORDER else len(ALGO_ORDER)


def table(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(out)


# ------------------------------------------------------------------------------------------
# Analysis.

def group_by_shape(ds: Dataset, kind):
    groups = defaultdict(dict)
    for r in ds.results.values():
        if r.kind == kind and not r.error:
            groups[r.shape_key][r.algo] = r
    return dict(sorted(groups.items(), key=lambda kv: shape_sort_key(kv[0])))


def best_forced(kind, algos):
    cands = [algos[a] for a in FORCED[kind] if a in algos]
    return min(cands, key=lambda r: r.us) if cands else None


def section_context(ds: Dataset):
    rows = []
    for path, ctx in ds.contexts:
        rows.append([path, ctx.get("gpu", ctx.get("host_name", "?")), ctx.get("copy_GBps", "?"),
                     ctx.get("date", "?"), ctx.get("executable", "?")])
    s = "## Context\n\n" + table(["file", "GPU", "copy GB/s (read+write)", "date", "executable"], rows)
    if ds.duplicates:
        s += f"\n\n{ds.duplicates} benchmark(s) appeared in more than one file; the first file's result was kept."
    return s


def section_all(ds: Dataset, kind):
    groups = group_by_shape(ds, kind)
    rows = []
    for key, algos in groups.items():
        best = best_forced(kind, algos)
        for a in sorted(algos, key=algo_rank):
            r = algos[a]
            name = a + (" ★" if best is not None and r is best else "")
            if r.label.startswith("slow"):
                name += " (1 sample)"
            elif r.label:
                name += f" ({r.label.split(':')[0]})"
            rows.append([shape_str(key), key[1], key[2], name, fmt(r.us, 2), fmt(r.gbps, 0), fmt(r.pct_copy, 1)])
    if not rows:
        return ""
    return (f"## {kind}: all results\n\n★ = fastest forced softk algorithm for the shape.\n\n" +
            table(["shape", "dtype", "dist", "algorithm", "median µs", "GB/s", "% copy"], rows))


def section_pivot(ds: Dataset, kind):
    groups = group_by_shape(ds, kind)
    algos_present = sorted({a for g in groups.values() for a in g}, key=algo_rank)
    rows = []
    for key, algos in groups.items():
        rows.append([shape_str(key), key[1], key[2]] + [fmt(algos[a].us, 2) if a in algos else "–" for a in algos_present])
    if not rows:
        return ""
    return f"## {kind}: median µs per algorithm\n\n" + table(["shape", "dtype", "dist"] + algos_present, rows)


def dispatcher_rows(ds: Dataset, kind, tol):
    out = []
    for key, algos in group_by_shape(ds, kind).items():
        best = best_forced(kind, algos)
        auto = algos.get("auto")
        ratio = auto.us / best.us if (auto and best) else math.nan
        faster_baseline = [b for b in BASELINES if b in algos and auto and algos[b].us < auto.us and b != "torch_topk"]
        out.append((key, algos, best, auto, ratio, faster_baseline))
    return out


def section_dispatcher(ds: Dataset, kind, tol):
    drows = dispatcher_rows(ds, kind, tol)
    if not drows:
        return ""
    baselines = [b for b in BASELINES if any(b in d[1] for d in drows)]
    header = ["shape", "dtype", "dist", "best forced", "best µs", "auto µs", "auto / best", "auto % copy"]
    header += [f"{b} / auto" for b in baselines] + ["check"]
    rows = []
    n_ok = n_bad = 0
    worst = []
    for key, algos, best, auto, ratio, faster in drows:
        if auto is None or best is None:
            check = "no auto" if auto is None else "no forced"
        elif ratio <= 1.0 + tol:
            check = "✓"
            n_ok += 1
        else:
            check = f"✗ +{(ratio - 1) * 100:.0f}%"
            n_bad += 1
            worst.append((ratio, key, best.algo))
        if faster:
            check += " (" + ", ".join(faster) + " faster!)"
        row = [shape_str(key), key[1], key[2], best.algo if best else "–", fmt(best.us, 2) if best else "–",
               fmt(auto.us, 2) if auto else "–", fmt(ratio, 2) if not math.isnan(ratio) else "–",
               fmt(auto.pct_copy, 1) if auto else "–"]
        for b in baselines:
            row.append(fmt(algos[b].us / auto.us, 1) + "×" if (b in algos and auto) else "–")
        rows.append(row + [check])
    s = (f"## {kind}: best algorithm per shape and the dispatcher check\n\n"
         f"auto / best = auto's time over the fastest forced algorithm; ✓ when ≤ {1 + tol:.2f}. "
         f"`X / auto` columns are speed-ups of auto over a baseline (> 1 means auto is faster).\n\n"
         f"**{n_ok} ✓, {n_bad} ✗** of {len(drows)} shapes.\n\n" + table(header, rows))
    if worst:
        worst.sort(reverse=True)
        s += "\n\nWorst auto choices: " + "; ".join(
            f"{shape_str(k)} {k[1]} {k[2]}: {r:.2f}× ({b} is best)" for r, k, b in worst[:10])
    return s


def section_crossovers(ds: Dataset, kind):
    series = defaultdict(list)  # (dtype, dist, rows, k) -> [(V, best algo, auto/best)]
    for key, algos in group_by_shape(ds, kind).items():
        best = best_forced(kind, algos)
        if best is None:
            continue
        auto = algos.get("auto")
        series[(key[1], key[2], key[3], key[5])].append((key[4], best.algo, auto.us / best.us if auto else math.nan))
    rows = []
    for (dtype, dist, rows_, k), pts in sorted(series.items(), key=lambda kv: shape_sort_key(("", *kv[0][:3], 0, kv[0][3]))):
        pts.sort()
        runs = []  # [algo, first V, last V]
        for v, a, _ in pts:
            if runs and runs[-1][0] == a:
                runs[-1][2] = v
            else:
                runs.append([a, v, v])
        path = " → ".join(f"{a} ({fmt_v(lo)}" + (f"–{fmt_v(hi)})" if hi != lo else ")") for a, lo, hi in runs)
        label = f"rows={rows_}" + (f", K={k}" if kind == "topk" else "")
        rows.append([dtype, dist, label, path])
    if not rows:
        return ""
    return (f"## {kind}: crossovers (fastest forced algorithm along V)\n\n" +
            table(["dtype", "dist", "series", "best algorithm by V range"], rows))


def section_targets(ds: Dataset, tol):
    """The issues' numeric targets, checked on what was measured (auto unless stated)."""
    checks = []  # (description, list of (ok, text))

    def add(desc, items):
        if items:
            checks.append((desc, items))

    sm = group_by_shape(ds, "softmax")
    tk = group_by_shape(ds, "topk")
    items = []
    for key, a in sm.items():
        auto = a.get("auto")
        if auto and (auto.input_bytes >= 64e6 or (key[3] <= 8 and key[4] >= 4 * 2**20)):
            items.append((auto.pct_copy >= 85, f"{shape_str(key)} {key[1]} {key[2]}: {fmt(auto.pct_copy, 1)}%"))
    add("softmax: auto ≥ 85% of copy where logits ≥ 64 MB, and at rows ≤ 8 with V ≥ 4M (issue 2)", items)
    items = []
    for key, a in tk.items():
        auto = a.get("auto")
        if auto and key[3] >= 256 and key[4] >= 32000:
            items.append((auto.pct_copy >= 80, f"{shape_str(key)} {key[1]} {key[2]}: {fmt(auto.pct_copy, 1)}%"))
    add("top-k: auto ≥ 80% of copy at rows ≥ 256, V ≥ 32K (issue 3)", items)
    for base, factor in (("torch", 10), ("cub", 5)):
        items = []
        for key, a in tk.items():
            auto = a.get("auto")
            if auto and base in a and key[3] >= 8:
                sp = a[base].us / auto.us
                items.append((sp >= factor, f"{shape_str(key)} {key[1]} {key[2]}: {sp:.1f}×"))
        add(f"top-k: auto ≥ {factor}× faster than {base} at rows ≥ 8 (issue 3)", items)
    items = []
    for key, a in tk.items():
        auto = a.get("auto")
        if auto and key[3] == 1 and 128000 <= key[4] <= 256000 and key[5] <= 256:
            items.append((auto.us <= 5.0, f"{shape_str(key)} {key[1]} {key[2]}: {fmt(auto.us, 2)} µs"))
    add("top-k: rows = 1, V ∈ [128K, 256K], K ≤ 256 in ≤ 5 µs (issue 4)", items)
    items = []
    for key, a in tk.items():
        auto = a.get("auto")
        if auto and key[3] <= 8 and key[4] >= 4 * 2**20:
            items.append((auto.pct_copy >= 85, f"{shape_str(key)} {key[1]} {key[2]}: {fmt(auto.pct_copy, 1)}%"))
    add("top-k: auto ≥ 85% of copy at rows ≤ 8, V ≥ 4M (issue 4)", items)
    items = []
    for key, a in tk.items():
        auto, fused = a.get("auto"), a.get("fused")
        if auto and fused:
            items.append((auto.us <= fused.us * (1 + tol), f"{shape_str(key)} {key[1]} {key[2]}: {auto.us / fused.us:.2f}×"))
    add(f"top-k: auto never slower than fused block-per-row (within {tol:.0%}) (issue 4)", items)
    if not checks:
        return ""
    lines = ["## Targets (from issues 2–4)", ""]
    for desc, its in checks:
        bad = [t for ok, t in its if not ok]
        lines.append(f"- {'✓' if not bad else '✗'} {desc}: {len(its) - len(bad)}/{len(its)} pass" +
                     (". Failing: " + "; ".join(bad[:12]) + (" …" if len(bad) > 12 else "") if bad else ""))
    return "\n".join(lines)


def section_host(ds: Dataset, kind, max_rows=16):
    """Host time per enqueue against GPU time, for auto at decode batch sizes (rows <= max_rows)."""
    rows = []
    for by_algo in group_by_shape(ds, kind).values():
        r = by_algo.get("auto")
        if r is None or r.rows > max_rows or math.isnan(r.host_us):
            continue
        rows.append([shape_str(r), r.dtype, r.dist, fmt(r.us, 2), fmt(r.host_us, 2), fmt(r.host_us / r.us, 2)])
    if not rows:
        return ""
    return (f"### {kind}: host time per call (auto, rows <= {max_rows})\n\n" +
            table(["shape", "dtype", "dist", "GPU µs", "host µs", "host / GPU"], rows))


def section_sample(ds: Dataset):
    """softk::sample (algorithm: its bound) against torch_baseline.py's torch_<bound>, per shape."""
    rows = []
    for key, algos in group_by_shape(ds, "sample").items():
        _, dtype, dist, n_rows, vocab, k = key
        for bound in ("top_k", "top_p", "min_p"):
            mine, theirs = algos.get(bound), algos.get("torch_" + bound)
            if mine is None:
                continue
            rows.append([f"{n_rows}×{fmt_v(vocab)}", dtype, dist, f"{k}" if k else "none", bound, fmt(mine.us, 2),
                         fmt(theirs.us, 2) if theirs else "–", f"{theirs.us / mine.us:.2f}×" if theirs else "–"])
    if not rows:
        return ""
    return ("## sample: softk::sample against torch\n\ntop_p 0.9, min_p 0.05, temperature 1; torch: topk or sort, "
            "softmax, the bound as a mask, an exponential race (bench/torch_baseline.py).\n\n" +
            table(["shape", "dtype", "dist", "top_k", "bound", "softk µs", "torch µs", "torch / softk"], rows))


def section_skipped(ds: Dataset):
    by_msg = defaultdict(list)
    for name, r in ds.results.items():
        if r.error:
            msg = re.sub(r"\d+(\.\d+)?", "#", r.error)[:140]
            by_msg[msg].append(name)
    if not by_msg:
        return ""
    rows = [[len(v), m.replace("|", "\\|"), v[0]] for m, v in sorted(by_msg.items(), key=lambda kv: -len(kv[1]))]
    return "## Skipped or failed\n\n" + table(["count", "reason (numbers as #)", "example"], rows)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("json", nargs="+", help="Google Benchmark JSON files (softk_bench, torch_baseline.py)")
    ap.add_argument("--kind", choices=["softmax", "topk", "sample"], help="only this op")
    ap.add_argument("--filter", help="regex on benchmark names (without the iterations/manual_time suffix)")
    ap.add_argument("--tolerance", type=float, default=0.10, help="dispatcher check: auto within (1+tol)×best")
    ap.add_argument("--no-long", action="store_true", help="omit the one-row-per-algorithm tables")
    ap.add_argument("--pivot", action="store_true", help="add a table with one column per algorithm")
    ap.add_argument("--out", help="also write the markdown here")
    args = ap.parse_args(argv)

    ds = load(args.json, args.filter)
    kinds = [args.kind] if args.kind else ["softmax", "topk"]
    parts = [section_context(ds)]
    for kind in (k for k in kinds if k != "sample"):
        if not args.no_long:
            parts.append(section_all(ds, kind))
        if args.pivot:
            parts.append(section_pivot(ds, kind))
        parts.append(section_dispatcher(ds, kind, args.tolerance))
        parts.append(section_crossovers(ds, kind))
        parts.append(section_host(ds, kind))
    parts.append(section_targets(ds, args.tolerance))
    if args.kind in (None, "sample"):
        parts.append(section_sample(ds))
    parts.append(section_skipped(ds))
    md = "\n\n".join(p for p in parts if p) + "\n"
    sys.stdout.write(md)
    if args.out:
        with open(args.out, "w") as f:
            f.write(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
