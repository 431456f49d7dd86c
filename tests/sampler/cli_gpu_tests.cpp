// The sampler's cuda backend agrees with its cpu backend on the example files, for every
// algorithm. Needs a CUDA device; skips (with the reason) without one.
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

#include "common/gpu.hpp"
#include "test_support.hpp"

namespace {

using sampler_test::run_sampler;
using sampler_test::TempDir;

const char* const kExampleFiles[] = {"logits_f32.npy", "logits_f16.npy", "logits_bf16.safetensors"};

void run_or_fail(const std::vector<std::string>& args) {
  const sampler_test::RunResult result = run_sampler(args);
  std::string command;
  for (const std::string& arg : args) command += " " + arg;
  ASSERT_EQ(result.exit_code, 0) << "sampler" << command << "\n" << result.err;
}

/// |a - b| <= 1e-6 + 1e-5 |b| everywhere, NaN matching NaN.
void expect_close(const std::vector<float>& actual, const std::vector<float>& expected, const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  for (std::size_t i = 0; i < actual.size(); ++i) {
    if (std::isnan(expected[i])) {
      EXPECT_TRUE(std::isnan(actual[i])) << what << " at " << i;
      continue;
    }
    ASSERT_NEAR(actual[i], expected[i], 1e-6 + 1e-5 * std::fabs(expected[i])) << what << " at " << i;
  }
}

/// Each TSV line without its last two columns (prob, logprob): position, rank and token id.
std::vector<std::string> ranked_ids(const std::string& tsv) {
  std::vector<std::string> lines;
  std::istringstream in(tsv);
  std::string line;
  while (std::getline(in, line)) lines.push_back(line.substr(0, line.rfind('\t', line.rfind('\t') - 1)));
  return lines;
}

TEST(CliGpu, TopkCudaAgreesWithCpuOnExampleFiles) {
  SOFTK_TEST_REQUIRE_GPU();
  TempDir dir;
  for (const char* name : kExampleFiles) {
    const std::string input = std::string(SOFTK_EXAMPLE_DATA "/") + name;
    for (const std::string k : {"1", "50", "2000"}) {
      run_or_fail({"topk", input, "-k", k, "-o", dir.file("cpu"), "--backend", "cpu"});
      const auto cpu_indices = sampler_test::read_npy<int32_t>(dir.file("cpu.indices.npy"), "<i4");
      const auto cpu_probs = sampler_test::read_npy<float>(dir.file("cpu.probs.npy"), "<f4");
      for (const std::string algorithm : {"auto", "fused", "radix_select", "split_k"}) {
        // Past kMaxFastTopK the fused and split-k paths refuse (tested in the library's suite).
        if ((algorithm == "fused" || algorithm == "split_k") && k == "2000") continue;
        const std::string what = std::string(name) + " k=" + k + " " + algorithm;
        run_or_fail({"topk", input, "-k", k, "-o", dir.file("gpu"), "--backend", "cuda", "--algorithm", algorithm,
                     "--chunk-rows", "3"});
        EXPECT_EQ(sampler_test::read_npy<int32_t>(dir.file("gpu.indices.npy"), "<i4").values, cpu_indices.values)
            << what;
        expect_close(sampler_test::read_npy<float>(dir.file("gpu.probs.npy"), "<f4").values, cpu_probs.values, what);
      }
    }
  }
}

TEST(CliGpu, SoftmaxCudaAgreesWithCpuOnExampleFiles) {
  SOFTK_TEST_REQUIRE_GPU();
  TempDir dir;
  for (const char* name : kExampleFiles) {
    const std::string input = std::string(SOFTK_EXAMPLE_DATA "/") + name;
    run_or_fail({"softmax", input, "-o", dir.file("cpu.npy"), "--backend", "cpu", "--temperature", "0.8"});
    const auto cpu = sampler_test::read_npy<float>(dir.file("cpu.npy"), "<f4");
    for (const std::string algorithm : {"auto", "register", "smem", "two_pass", "split_k"}) {
      run_or_fail({"softmax", input, "-o", dir.file("gpu.npy"), "--backend", "cuda", "--algorithm", algorithm,
                   "--temperature", "0.8"});
      const auto gpu = sampler_test::read_npy<float>(dir.file("gpu.npy"), "<f4");
      EXPECT_EQ(gpu.header.shape, cpu.header.shape);
      expect_close(gpu.values, cpu.values, std::string(name) + " " + algorithm);
    }
  }
}

// The default chunk of short rows (256 MiB of them) holds more rows than a grid's y extent
// (65535), where forced split-k puts a row each: one call over them all, launched in runs.
TEST(CliGpu, ForcedSplitKTakesFilesOfMoreRowsThanAGridHolds) {
  SOFTK_TEST_REQUIRE_GPU();
  TempDir dir;
  const int64_t rows = 65535 + 4, vocab = 64;
  sampler_test::write_file(dir.file("tall.npy"), sampler_test::npy_file("<f4", {rows, vocab},
                                                                        sampler_test::bytes_of(
                                                                            sampler_test::make_logits(rows, vocab, 7))));
  run_or_fail({"topk", dir.file("tall.npy"), "-k", "5", "-o", dir.file("cpu"), "--backend", "cpu"});
  run_or_fail({"topk", dir.file("tall.npy"), "-k", "5", "-o", dir.file("gpu"), "--backend", "cuda", "--algorithm",
               "split_k"});
  EXPECT_EQ(sampler_test::read_npy<int32_t>(dir.file("gpu.indices.npy"), "<i4").values,
            sampler_test::read_npy<int32_t>(dir.file("cpu.indices.npy"), "<i4").values);
  expect_close(sampler_test::read_npy<float>(dir.file("gpu.probs.npy"), "<f4").values,
               sampler_test::read_npy<float>(dir.file("cpu.probs.npy"), "<f4").values, "split_k over 65539 rows");
}

// The cuda backend's draws are the cpu backend's, but where u lies within fp32 rounding of a
// boundary between two candidates (softk/sample.hpp): a handful of 50 draws a row at most.
TEST(CliGpu, SampleOnCudaDrawsTheCpuTokens) {
  SOFTK_TEST_REQUIRE_GPU();
  TempDir dir;
  for (const char* name : kExampleFiles) {
    const std::string input = std::string(SOFTK_EXAMPLE_DATA "/") + name;
    for (const char* bounds : {"--top-p=0.9", "--top-k=20", "--min-p=0.05"}) {
      const std::vector<std::string> args = {"sample", input, "-n", "50", "--seed", "11", "--temperature", "0.8", bounds};
      std::vector<std::string> cpu_args = args, gpu_args = args;
      cpu_args.insert(cpu_args.end(), {"--backend", "cpu", "-o", dir.file("cpu")});
      gpu_args.insert(gpu_args.end(), {"--backend", "cuda", "-o", dir.file("gpu")});
      run_or_fail(cpu_args);
      run_or_fail(gpu_args);
      const auto cpu = sampler_test::read_npy<int32_t>(dir.file("cpu.tokens.npy"), "<i4");
      const auto gpu = sampler_test::read_npy<int32_t>(dir.file("gpu.tokens.npy"), "<i4");
      ASSERT_EQ(gpu.header.shape, cpu.header.shape);
      std::size_t differ = 0;
      for (std::size_t i = 0; i < cpu.values.size(); ++i) differ += cpu.values[i] != gpu.values[i];
      EXPECT_LE(differ, 2u) << name << " " << bounds << ": " << differ << " of " << cpu.values.size() << " draws differ";
    }
  }
}

TEST(CliGpu, InfoAndPrintedTopkRunOnCuda) {
  SOFTK_TEST_REQUIRE_GPU();
  for (const char* name : kExampleFiles) {
    const std::string input = std::string(SOFTK_EXAMPLE_DATA "/") + name;
    const auto cpu = run_sampler({"topk", input, "-k", "5", "--format", "tsv", "--backend", "cpu"});
    const auto gpu = run_sampler({"topk", input, "-k", "5", "--format", "tsv", "--backend", "cuda"});
    ASSERT_EQ(gpu.exit_code, 0) << gpu.err;
    // Same ids in the same order; the printed floats may differ in their last digits.
    EXPECT_EQ(ranked_ids(gpu.out), ranked_ids(cpu.out)) << name;
    const auto info = run_sampler({"info", input, "--backend", "cuda"});
    EXPECT_EQ(info.exit_code, 0) << info.err;
    EXPECT_NE(info.out.find("backend      cuda"), std::string::npos);
  }
}

}  // namespace
