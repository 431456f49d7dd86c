#!/usr/bin/env python3
"""bench/summarize.py on small synthetic runs: names of every kind parse, softk's and torch's
files merge by name, and softk::sample's section sets each bound beside torch's (CPU only)."""
import json
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
import summarize  # noqa: E402


def median_entry(run_name, us):
    return {"name": run_name + "_median", "run_name": run_name, "run_type": "aggregate",
            "aggregate_name": "median", "us": us, "GB/s": 1.0, "pct_copy": 1.0}


class SummarizeTest(unittest.TestCase):
    def write(self, name, context, entries):
        path = os.path.join(self.dir.name, name)
        with open(path, "w") as f:
            json.dump({"context": context, "benchmarks": entries}, f)
        return path

    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.softk = self.write("softk.json", {"gpu": "GPU X", "copy_GBps": "4000"}, [
            median_entry("sample/f32/llm/rows:1/V:128256/K:50/top_k/iterations:1/manual_time", 20.0),
            median_entry("sample/f32/llm/rows:1/V:128256/K:0/top_p/iterations:1/manual_time", 40.0),
            median_entry("topk/f32/llm/rows:1/V:128256/K:50/auto/iterations:1/manual_time", 5.0),
            median_entry("softmax/f32/llm/rows:1/V:32000/auto/iterations:1/manual_time", 6.0),
        ])
        self.torch = self.write("torch.json", {"gpu": "GPU X"}, [
            median_entry("sample/f32/llm/rows:1/V:128256/K:50/torch_top_k", 50.0),
            median_entry("sample/f32/llm/rows:1/V:128256/K:0/torch_top_p", 120.0),
        ])

    def tearDown(self):
        self.dir.cleanup()

    def test_names_of_every_kind_parse(self):
        base, fields = summarize.parse_name("sample/bf16/llm/rows:8/V:32000/K:0/min_p/iterations:1/manual_time")
        self.assertEqual(base, "sample/bf16/llm/rows:8/V:32000/K:0/min_p")
        self.assertEqual((fields["kind"], fields["rows"], fields["vocab"], fields["k"], fields["algo"]),
                         ("sample", 8, 32000, 0, "min_p"))
        self.assertEqual(summarize.parse_name("topk/f32/llm/rows:1/V:7/K:2/fused")[0],
                         "topk/f32/llm/rows:1/V:7/K:2/fused")
        self.assertEqual(summarize.parse_name("softmax/f32/llm/rows:1/V:7/auto")[0], "softmax/f32/llm/rows:1/V:7/auto")
        self.assertIsNone(summarize.parse_name("other/f32/llm/rows:1/V:7/auto"))

    def test_sample_section_sets_each_bound_beside_torch(self):
        section = summarize.section_sample(summarize.load([self.softk, self.torch]))
        self.assertIn("| 1×128256 | f32 | llm | 50 | top_k | 20.00 | 50.00 | 2.50× |", section)
        self.assertIn("| 1×128256 | f32 | llm | none | top_p | 40.00 | 120.0 | 3.00× |", section)

    def test_sample_section_without_torch_leaves_its_columns_empty(self):
        section = summarize.section_sample(summarize.load([self.softk]))
        self.assertIn("| 1×128256 | f32 | llm | 50 | top_k | 20.00 | – | – |", section)

    def test_the_whole_summary_holds_every_kind(self):
        out = os.path.join(self.dir.name, "summary.md")
        with open(os.devnull, "w") as devnull:
            stdout, sys.stdout = sys.stdout, devnull
            try:
                self.assertEqual(summarize.main([self.softk, self.torch, "--pivot", "--out", out]), 0)
            finally:
                sys.stdout = stdout
        with open(out) as f:
            md = f.read()
        for heading in ("## softmax: all results", "## topk: all results", "## sample: softk::sample against torch"):
            self.assertIn(heading, md)


if __name__ == "__main__":
    unittest.main()
