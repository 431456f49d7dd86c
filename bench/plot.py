#!/usr/bin/env python3
"""Plot per-op time against V, one line per algorithm, log-log, from softk_bench (and
torch_baseline.py) JSON. One panel per row count; top-k panels use one K (--k).

    python3 bench/plot.py OUT/softk.json [OUT/torch.json] --kind topk --dtype f32 --k 50 --out OUT/topk.png

Without --out it writes bench-<kind>-<dtype>-<dist>[-k<K>].png in the current directory. Needs
matplotlib; without it, prints a note and exits 0 (the plot is optional).
"""
from __future__ import annotations

import argparse
import math
import os
import sys
from collections import defaultdict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from summarize import ALGO_ORDER, algo_rank, fmt_v, load  # noqa: E402

# One colour per algorithm in every panel; baselines dotted or dash-dotted, copy dashed grey.
PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#bcbd22", "#17becf"]
STYLE = {"auto": dict(color="black", lw=2.2), "copy": dict(color="gray", ls="--", lw=1.5)}
for _i, _a in enumerate(a for a in ALGO_ORDER if a not in STYLE):
    STYLE[_a] = dict(color=PALETTE[_i % len(PALETTE)])
for _a in ("cub", "unfused"):
    STYLE[_a]["ls"] = ":"
for _a in ("torch", "torch_topk"):
    STYLE[_a]["ls"] = "-."


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("json", nargs="+")
    ap.add_argument("--kind", choices=["softmax", "topk"], default="softmax")
    ap.add_argument("--dtype", default="f32")
    ap.add_argument("--dist", default="llm")
    ap.add_argument("--k", type=int, default=50, help="top-k: which K to plot")
    ap.add_argument("--rows", help="comma list of row counts (default: all present)")
    ap.add_argument("--metric", choices=["us", "pct_copy"], default="us")
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.ticker import FuncFormatter, NullFormatter
    except ImportError:
        print("plot.py: matplotlib is not installed; no plot written", file=sys.stderr)
        return 0

    ds = load(args.json)
    want_rows = {int(r) for r in args.rows.split(",")} if args.rows else None
    series = defaultdict(lambda: defaultdict(list))  # rows -> algo -> [(V, value)]
    for r in ds.results.values():
        if r.error or r.kind != args.kind or r.dtype != args.dtype or r.dist != args.dist:
            continue
        if args.kind == "topk" and r.k != args.k:
            continue
        if want_rows and r.rows not in want_rows:
            continue
        val = r.us if args.metric == "us" else r.pct_copy
        if val is not None and not math.isnan(val):
            series[r.rows][r.algo].append((r.vocab, val))
    # A panel needs at least two V values to draw a line.
    panels = sorted(rw for rw, algos in series.items() if any(len(p) >= 2 for p in algos.values()))
    if not panels:
        print("plot.py: no series with two or more V values matches; nothing to plot", file=sys.stderr)
        return 1
    gpu = next((c.get("gpu") for _, c in ds.contexts if c.get("gpu")), "?")

    ncol = min(3, len(panels))
    nrow = math.ceil(len(panels) / ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(5.2 * ncol, 4.0 * nrow), squeeze=False)
    for ax, rows in zip(axes.flat, panels):
        for algo in sorted(series[rows], key=algo_rank):
            pts = sorted(series[rows][algo])
            if not pts:
                continue
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", ms=3, label=algo, **STYLE.get(algo, {}))
        ax.set_xscale("log")
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: fmt_v(int(round(v))) if v >= 1 else ""))
        ax.xaxis.set_minor_formatter(NullFormatter())
        if args.metric == "us":
            ax.set_yscale("log")
            ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
            ax.yaxis.set_minor_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
            ax.tick_params(axis="y", which="minor", labelsize=6)
        ax.set_title(f"rows = {rows}")
        ax.set_xlabel("V")
        ax.set_ylabel("median µs per op" if args.metric == "us" else "% of copy bandwidth")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    for ax in list(axes.flat)[len(panels):]:
        ax.axis("off")
    title = f"{args.kind} {args.dtype} {args.dist}" + (f" K={args.k}" if args.kind == "topk" else "") + f" — {gpu}"
    fig.suptitle(title)
    fig.tight_layout()
    out = args.out or f"bench-{args.kind}-{args.dtype}-{args.dist}" + (f"-k{args.k}" if args.kind == "topk" else "") + ".png"
    fig.savefig(out, dpi=120)
    print(f"plot.py: wrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
