// The sampler executable end to end on the CPU backend: real files in, real files and text out,
// checked against softk::cpu; and every bad input gives one line, a non-zero exit, no output.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/gpu.hpp"
#include "cpu/half_convert.hpp"
#include "softk/cpu.hpp"
#include "test_support.hpp"

namespace {

using sampler_test::bytes_of;
using sampler_test::run_sampler;
using sampler_test::RunResult;
using sampler_test::TempDir;

constexpr int64_t kVocab = 50;

/// What softk::cpu::topk says for `rows` rows of `data` (dtype), the oracle for the CLI's output.
struct TopkResult {
  std::vector<float> probs;
  std::vector<int32_t> indices;
};
TopkResult cpu_topk(const std::string& data, softk::DType dtype, int64_t rows, int64_t vocab, int32_t k,
                    float temperature = 1.0f, bool log_probs = false) {
  softk::LogitsView view;
  view.data = data.data();
  view.dtype = dtype;
  view.batch = rows;
  view.vocab = vocab;
  TopkResult result{std::vector<float>(static_cast<std::size_t>(rows * k)),
                    std::vector<int32_t>(static_cast<std::size_t>(rows * k))};
  softk::TopkOptions options;
  options.temperature = temperature;
  options.log_probs = log_probs;
  softk::cpu::topk(view, k, result.probs.data(), result.indices.data(), options);
  return result;
}

std::vector<float> cpu_softmax(const std::string& data, softk::DType dtype, int64_t rows, int64_t vocab,
                               float temperature = 1.0f) {
  softk::LogitsView view;
  view.data = data.data();
  view.dtype = dtype;
  view.batch = rows;
  view.vocab = vocab;
  std::vector<float> probs(static_cast<std::size_t>(rows * vocab));
  softk::SoftmaxOptions options;
  options.temperature = temperature;
  softk::cpu::softmax(view, probs.data(), options);
  return probs;
}

std::string to_bf16_bytes(const std::vector<float>& values) {
  std::vector<uint16_t> halves;
  for (float value : values) halves.push_back(softk::detail::f32_to_bf16(value));
  return bytes_of(halves);
}

std::string to_f16_bytes(const std::vector<float>& values) {
  std::vector<uint16_t> halves;
  for (float value : values) halves.push_back(softk::detail::f32_to_f16(value));
  return bytes_of(halves);
}

/// Runs the sampler and expects success with nothing on stderr (no progress bar off a terminal).
RunResult run_ok(const std::vector<std::string>& args) {
  RunResult result = run_sampler(args);
  std::string command;
  for (const std::string& arg : args) command += " " + arg;
  EXPECT_EQ(result.exit_code, 0) << "sampler" << command << "\nstderr: " << result.err;
  EXPECT_EQ(result.err, "") << "sampler" << command;
  return result;
}

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    logits_ = sampler_test::make_logits(6, kVocab, 11);
    f32_bytes_ = bytes_of(logits_);
    sampler_test::write_file(input(), sampler_test::npy_file("<f4", {2, 3, kVocab}, f32_bytes_));
  }
  /// The standard input: f32 [2, 3, 50], LLM-like with ties.
  std::string input() const { return dir_.file("logits.npy"); }
  std::string file(const std::string& name) const { return dir_.file(name); }

  TempDir dir_;
  std::vector<float> logits_;
  std::string f32_bytes_;
};

TEST_F(CliTest, InfoDescribesFileAndRows) {
  const RunResult result = run_ok({"info", input(), "--backend", "cpu"});
  EXPECT_NE(result.out.find("format       npy\n"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("dtype        f32\n"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("shape        [2, 3, 50]  [B, T, V]\n"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("backend      cpu\n"), std::string::npos) << result.out;
  EXPECT_EQ(sampler_test::count_lines(result.out), 7 + 1 + 1 + 6);  // summary, blank, heading, rows
}

TEST_F(CliTest, InfoRowSummaryValues) {
  // Row 0 uniform: entropy log 8, top-1 1/8 at id 0 (ties go to the smaller id). Row 1 masked.
  std::vector<float> rows(16, 0.0f);
  for (int v = 8; v < 16; ++v) rows[static_cast<std::size_t>(v)] = -INFINITY;
  sampler_test::write_file(file("uniform.npy"), sampler_test::npy_file("<f4", {2, 8}, bytes_of(rows)));
  const RunResult result = run_ok({"info", file("uniform.npy"), "--backend", "cpu"});
  EXPECT_NE(result.out.find("     0      0.0000      2.0794    0.125000         0\n"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("     1  every logit is -inf\n"), std::string::npos) << result.out;
}

TEST_F(CliTest, InfoOnExampleFilesWithVocab) {
  for (const char* name : {"logits_f32.npy", "logits_f16.npy", "logits_bf16.safetensors"}) {
    const RunResult result = run_ok({"info", std::string(SOFTK_EXAMPLE_DATA "/") + name, "--backend", "cpu", "--vocab",
                                     SOFTK_EXAMPLE_DATA "/vocab.txt"});
    EXPECT_NE(result.out.find("top1_token"), std::string::npos) << result.out;
  }
}

TEST_F(CliTest, SoftmaxWritesInputShapedF32MatchingCpu) {
  run_ok({"softmax", input(), "-o", file("probs.npy"), "--backend", "cpu"});
  const auto probs = sampler_test::read_npy<float>(file("probs.npy"), "<f4");
  EXPECT_EQ(probs.header.shape, (std::vector<int64_t>{2, 3, kVocab}));
  EXPECT_EQ(probs.values, cpu_softmax(f32_bytes_, softk::DType::f32, 6, kVocab));
  for (int r = 0; r < 6; ++r) {
    double sum = 0;
    for (int v = 0; v < kVocab; ++v) sum += probs.values[static_cast<std::size_t>(r * kVocab + v)];
    EXPECT_NEAR(sum, 1.0, 1e-5);
  }
}

TEST_F(CliTest, SoftmaxStreamsInChunksWithTemperatureAndF16) {
  const std::string f16 = to_f16_bytes(logits_);
  sampler_test::write_file(file("half.npy"), sampler_test::npy_file("<f2", {6, kVocab}, f16));
  // 4 rows per chunk: a full chunk then a partial one.
  run_ok({"softmax", file("half.npy"), "-o", file("probs.npy"), "--backend", "cpu", "--chunk-rows", "4",
          "--temperature", "0.7", "--algorithm", "two_pass"});
  const auto probs = sampler_test::read_npy<float>(file("probs.npy"), "<f4");
  EXPECT_EQ(probs.header.shape, (std::vector<int64_t>{6, kVocab}));
  EXPECT_EQ(probs.values, cpu_softmax(f16, softk::DType::f16, 6, kVocab, 0.7f));
}

TEST_F(CliTest, TopkNpyOutputsMatchCpuTopk) {
  for (const std::string chunk_rows : {"0", "1", "4"}) {
    run_ok({"topk", input(), "-k", "7", "-o", file("top"), "--backend", "cpu", "--chunk-rows", chunk_rows});
    const auto indices = sampler_test::read_npy<int32_t>(file("top.indices.npy"), "<i4");
    const auto probs = sampler_test::read_npy<float>(file("top.probs.npy"), "<f4");
    EXPECT_EQ(indices.header.shape, (std::vector<int64_t>{2, 3, 7}));
    EXPECT_EQ(probs.header.shape, (std::vector<int64_t>{2, 3, 7}));
    const TopkResult expected = cpu_topk(f32_bytes_, softk::DType::f32, 6, kVocab, 7);
    EXPECT_EQ(indices.values, expected.indices) << "chunk rows " << chunk_rows;
    EXPECT_EQ(probs.values, expected.probs) << "chunk rows " << chunk_rows;
  }
  EXPECT_EQ(dir_.entries(), (std::vector<std::string>{"logits.npy", "top.indices.npy", "top.probs.npy"}));
}

TEST_F(CliTest, TopkOfOneDimensionalInputWithKEqualToV) {
  const std::string row = f32_bytes_.substr(0, kVocab * 4);
  sampler_test::write_file(file("row.npy"), sampler_test::npy_file("<f4", {kVocab}, row));
  run_ok({"topk", file("row.npy"), "-k", std::to_string(kVocab), "-o", file("top"), "--backend", "cpu", "--temperature",
          "2"});
  const auto indices = sampler_test::read_npy<int32_t>(file("top.indices.npy"), "<i4");
  const auto probs = sampler_test::read_npy<float>(file("top.probs.npy"), "<f4");
  EXPECT_EQ(indices.header.shape, (std::vector<int64_t>{kVocab}));
  const TopkResult expected = cpu_topk(row, softk::DType::f32, 1, kVocab, kVocab, 2.0f);
  EXPECT_EQ(indices.values, expected.indices);
  EXPECT_EQ(probs.values, expected.probs);
}

TEST_F(CliTest, TopkRawBf16AndSafetensorsTensor) {
  const std::string bf16 = to_bf16_bytes(logits_);
  const TopkResult expected = cpu_topk(bf16, softk::DType::bf16, 6, kVocab, 5);
  sampler_test::write_file(file("logits.raw"), bf16);
  run_ok({"topk", file("logits.raw"), "--shape", "2,3,50", "--dtype", "bf16", "-k", "5", "-o", file("raw"), "--backend",
          "cpu"});
  EXPECT_EQ(sampler_test::read_npy<int32_t>(file("raw.indices.npy"), "<i4").values, expected.indices);
  EXPECT_EQ(sampler_test::read_npy<float>(file("raw.probs.npy"), "<f4").values, expected.probs);

  sampler_test::write_file(file("two.safetensors"),
                           sampler_test::safetensors_file(
                               {{"hidden", "F32", {3}, std::string(12, '\0')}, {"logits", "BF16", {6, kVocab}, bf16}}));
  run_ok({"topk", file("two.safetensors"), "--tensor", "logits", "-k", "5", "-o", file("st"), "--backend", "cpu"});
  const auto indices = sampler_test::read_npy<int32_t>(file("st.indices.npy"), "<i4");
  EXPECT_EQ(indices.header.shape, (std::vector<int64_t>{6, 5}));
  EXPECT_EQ(indices.values, expected.indices);
}

TEST_F(CliTest, TopkTableJsonAndTsvAgreeWithCpu) {
  const int32_t k = 4;
  const TopkResult expected = cpu_topk(f32_bytes_, softk::DType::f32, 6, kVocab, k, 1.0f, /*log_probs=*/true);

  const RunResult json = run_ok({"topk", input(), "-k", "4", "--format", "json", "--backend", "cpu"});
  std::istringstream lines(json.out);
  std::string line;
  for (int r = 0; r < 6; ++r) {
    ASSERT_TRUE(std::getline(lines, line));
    const auto row = nlohmann::json::parse(line);
    EXPECT_EQ(row["batch"], r / 3);
    EXPECT_EQ(row["step"], r % 3);
    ASSERT_EQ(row["topk"].size(), static_cast<std::size_t>(k));
    for (int j = 0; j < k; ++j) {
      const auto& entry = row["topk"][static_cast<std::size_t>(j)];
      const std::size_t at = static_cast<std::size_t>(r * k + j);
      EXPECT_EQ(entry["rank"], j + 1);
      EXPECT_EQ(entry["id"], expected.indices[at]);
      EXPECT_EQ(entry["logprob"].get<float>(), expected.probs[at]);
      EXPECT_NEAR(entry["prob"].get<double>(), std::exp(expected.probs[at]), 1e-6);
    }
  }
  EXPECT_FALSE(std::getline(lines, line));

  const RunResult tsv = run_ok({"topk", input(), "-k", "4", "--format", "tsv", "--backend", "cpu"});
  std::istringstream tsv_lines(tsv.out);
  ASSERT_TRUE(std::getline(tsv_lines, line));
  EXPECT_EQ(line, "batch\tstep\trank\ttoken_id\tprob\tlogprob");
  for (int r = 0; r < 6; ++r) {
    for (int j = 0; j < k; ++j) {
      ASSERT_TRUE(std::getline(tsv_lines, line));
      std::istringstream fields(line);
      int batch = 0, step = 0, rank = 0, id = 0;
      fields >> batch >> step >> rank >> id;
      EXPECT_EQ(batch * 3 + step, r);
      EXPECT_EQ(rank, j + 1);
      EXPECT_EQ(id, expected.indices[static_cast<std::size_t>(r * k + j)]);
    }
  }

  const RunResult table = run_ok({"topk", input(), "-k", "4", "--backend", "cpu"});
  EXPECT_EQ(table.out.rfind("batch 0, step 0:\n  rank     id        prob    log_prob\n", 0), 0u) << table.out;
  EXPECT_NE(table.out.find("\nbatch 1, step 2:\n"), std::string::npos);
  EXPECT_EQ(sampler_test::count_lines(table.out), 6 * (2 + k) + 5);  // heading, columns, K rows; blank between
}

TEST_F(CliTest, TopkTokensFromAllThreeVocabularyForms) {
  std::string lines, map = "{", tokenizer_vocab = "{";
  for (int id = 0; id < kVocab; ++id) {
    const std::string token = "tok" + std::to_string(id);
    lines += token + "\n";
    map += (id ? ", \"" : "\"") + token + "\": " + std::to_string(id);
  }
  sampler_test::write_file(file("vocab.txt"), lines);
  sampler_test::write_file(file("vocab.json"), map + "}");
  sampler_test::write_file(
      file("tokenizer.json"),
      R"({"version":"1.0","added_tokens":[],"model":{"type":"BPE","vocab":)" + map + R"(},"merges":[]}})");
  const TopkResult expected = cpu_topk(f32_bytes_, softk::DType::f32, 6, kVocab, 3);
  for (const char* vocab : {"vocab.txt", "vocab.json", "tokenizer.json"}) {
    const RunResult result =
        run_ok({"topk", input(), "-k", "3", "--format", "json", "--vocab", file(vocab), "--backend", "cpu"});
    std::istringstream rows(result.out);
    std::string line;
    for (int r = 0; r < 6 && std::getline(rows, line); ++r) {
      const auto row = nlohmann::json::parse(line);
      for (int j = 0; j < 3; ++j) {
        const int32_t id = expected.indices[static_cast<std::size_t>(r * 3 + j)];
        EXPECT_EQ(row["topk"][static_cast<std::size_t>(j)]["token"], "tok" + std::to_string(id)) << vocab;
      }
    }
    const RunResult table = run_ok({"topk", input(), "-k", "1", "--vocab", file(vocab), "--backend", "cpu"});
    EXPECT_NE(table.out.find("  \"tok" + std::to_string(expected.indices[0]) + "\"\n"), std::string::npos) << table.out;
  }
}

TEST_F(CliTest, NanAndFullyMaskedRowsAreReportedNotFatal) {
  std::vector<float> rows = {1.0f,      2.0f,      3.0f,      0.0f,        // ok
                             NAN,       1.0f,      2.0f,      3.0f,        // has NaN
                             -INFINITY, -INFINITY, -INFINITY, -INFINITY};  // fully masked
  sampler_test::write_file(file("odd.npy"), sampler_test::npy_file("<f4", {3, 4}, bytes_of(rows)));

  RunResult result = run_sampler({"softmax", file("odd.npy"), "-o", file("p.npy"), "--backend", "cpu"});
  EXPECT_EQ(result.exit_code, 0);
  EXPECT_EQ(
      result.err,
      "sampler: note: 1 row(s) hold NaN logits (NaN results); 1 row(s) are all -inf (zero probabilities, index -1)\n");
  const auto probs = sampler_test::read_npy<float>(file("p.npy"), "<f4");
  EXPECT_NEAR(probs.values[2], std::exp(3.0) / (std::exp(1.0) + std::exp(2.0) + std::exp(3.0) + 1.0), 1e-6);
  EXPECT_TRUE(std::isnan(probs.values[4]));
  EXPECT_EQ(probs.values[8], 0.0f);

  result = run_sampler({"topk", file("odd.npy"), "-k", "2", "--backend", "cpu"});
  EXPECT_EQ(result.exit_code, 0);
  EXPECT_NE(result.out.find("batch 1: holds NaN logits; no ranking\n"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("batch 2: every logit is -inf (fully masked row)\n"), std::string::npos) << result.out;

  result = run_sampler({"info", file("odd.npy"), "--backend", "cpu"});
  EXPECT_EQ(result.exit_code, 0);
  EXPECT_NE(result.out.find("     1  holds NaN logits\n     2  every logit is -inf\n"), std::string::npos)
      << result.out;
}

TEST_F(CliTest, ReadmeCommandOnExampleData) {
  const RunResult result = run_ok({"topk", SOFTK_EXAMPLE_DATA "/logits_f32.npy", "-k", "10", "--vocab",
                                   SOFTK_EXAMPLE_DATA "/vocab.txt", "--backend", "cpu"});
  EXPECT_NE(result.out.find("\" mat\""), std::string::npos) << result.out;   // "The cat sat on the" -> " mat"
  EXPECT_NE(result.out.find("\" time\""), std::string::npos) << result.out;  // "Once upon a" -> " time"
}

TEST_F(CliTest, HelpAndUsage) {
  const RunResult help = run_sampler({"--help"});
  EXPECT_EQ(help.exit_code, 0);
  for (const char* command : {"info", "softmax", "topk"}) EXPECT_NE(help.out.find(command), std::string::npos);
  const RunResult topk_help = run_sampler({"topk", "--help"});
  EXPECT_EQ(topk_help.exit_code, 0);
  EXPECT_NE(topk_help.out.find("--algorithm"), std::string::npos);
}

// ---- bad input: one line on stderr, non-zero exit, no output file ------------------------------

// ---------------------------------------------------------------------------------------------
// sample: the CLI's draws are softk::cpu::sample's, row (b, t)'s draw d at seed S + b and offset
// O + t x N + d.

std::vector<int32_t> cpu_samples(const std::string& data, int64_t rows, int64_t steps, int64_t vocab, int64_t draws,
                                 softk::SamplingParams params, uint64_t seed, uint64_t offset) {
  std::vector<int32_t> tokens;
  for (int64_t r = 0; r < rows; ++r) {
    softk::LogitsView row;
    row.data = data.data() + r * vocab * 4;
    row.vocab = vocab;
    for (int64_t d = 0; d < draws; ++d) {
      params.seed = seed + static_cast<uint64_t>(r / steps);
      params.offset = offset + static_cast<uint64_t>(r % steps * draws + d);
      int32_t token = -7;
      softk::cpu::sample(row, params, &token);
      tokens.push_back(token);
    }
  }
  return tokens;
}

TEST_F(CliTest, SampleNpyOutputMatchesTheCpuSampler) {
  softk::SamplingParams params;
  params.temperature = 0.8f;
  params.top_k = 7;
  params.top_p = 0.9f;
  params.min_p = 0.01f;
  const std::vector<int32_t> expected = cpu_samples(f32_bytes_, 6, 3, kVocab, 3, params, 5, 10);
  for (const std::string chunk_rows : {"0", "1", "4"}) {
    run_ok({"sample", input(), "-o", file("draws"), "--backend", "cpu", "-n", "3", "--seed", "5", "--offset", "10",
            "--top-k", "7", "--top-p", "0.9", "--min-p", "0.01", "--temperature", "0.8", "--chunk-rows", chunk_rows});
    const auto tokens = sampler_test::read_npy<int32_t>(file("draws.tokens.npy"), "<i4");
    EXPECT_EQ(tokens.header.shape, (std::vector<int64_t>{2, 3, 3}));
    EXPECT_EQ(tokens.values, expected) << "chunk rows " << chunk_rows;
  }
  // Another seed draws other tokens somewhere in the file.
  run_ok({"sample", input(), "-o", file("other"), "-n", "3", "--seed", "6", "--offset", "10", "--top-k", "7",
          "--top-p", "0.9", "--min-p", "0.01", "--temperature", "0.8"});
  EXPECT_NE(sampler_test::read_npy<int32_t>(file("other.tokens.npy"), "<i4").values, expected);
}

TEST_F(CliTest, SampleAtTemperatureZeroIsTheTopToken) {
  run_ok({"sample", input(), "-o", file("greedy"), "--temperature", "0", "-n", "2", "--top-p", "0.5"});
  const std::vector<int32_t> top = cpu_topk(f32_bytes_, softk::DType::f32, 6, kVocab, 1).indices;
  std::vector<int32_t> twice;
  for (int32_t id : top) twice.insert(twice.end(), {id, id});
  EXPECT_EQ(sampler_test::read_npy<int32_t>(file("greedy.tokens.npy"), "<i4").values, twice);
}

TEST_F(CliTest, SamplePrintsTheSameTokensAsTableJsonAndTsv) {
  const std::vector<std::string> base = {"sample", input(), "-n", "2", "--seed", "3", "--backend", "cpu"};
  const auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = base;
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  };
  run_ok(with({"-o", file("draws")}));
  const std::vector<int32_t> tokens = sampler_test::read_npy<int32_t>(file("draws.tokens.npy"), "<i4").values;

  const RunResult table = run_ok(base);
  std::istringstream table_lines(table.out);
  std::string line;
  for (int r = 0; r < 6; ++r) {
    ASSERT_TRUE(std::getline(table_lines, line));
    const std::string heading = "batch " + std::to_string(r / 3) + ", step " + std::to_string(r % 3) + ":";
    EXPECT_EQ(line, heading + "  " + std::to_string(tokens[2 * r]) + "  " + std::to_string(tokens[2 * r + 1]));
  }
  EXPECT_FALSE(std::getline(table_lines, line)) << line;

  const RunResult json = run_ok(with({"--format", "json"}));
  std::istringstream json_lines(json.out);
  for (int r = 0; r < 6; ++r) {
    ASSERT_TRUE(std::getline(json_lines, line));
    const nlohmann::json row = nlohmann::json::parse(line);
    EXPECT_EQ(row["batch"], r / 3);
    EXPECT_EQ(row["step"], r % 3);
    EXPECT_EQ(row["status"], "ok");
    EXPECT_EQ(row["tokens"], (std::vector<int32_t>{tokens[2 * r], tokens[2 * r + 1]}));
    EXPECT_FALSE(row.contains("texts"));
  }

  const RunResult tsv = run_ok(with({"--format", "tsv"}));
  std::string expected_tsv = "batch\tstep\tdraw\ttoken_id\n";
  for (int r = 0; r < 6; ++r)
    for (int d = 0; d < 2; ++d)
      expected_tsv += std::to_string(r / 3) + "\t" + std::to_string(r % 3) + "\t" + std::to_string(d) + "\t" +
                      std::to_string(tokens[2 * r + d]) + "\n";
  EXPECT_EQ(tsv.out, expected_tsv);
}

TEST_F(CliTest, SampleWithVocabOnExampleFiles) {
  for (const char* name : {"logits_f32.npy", "logits_f16.npy", "logits_bf16.safetensors"}) {
    const RunResult result = run_ok({"sample", std::string(SOFTK_EXAMPLE_DATA "/") + name, "--format", "json",
                                     "--vocab", SOFTK_EXAMPLE_DATA "/vocab.txt", "-n", "4", "--top-p", "0.9"});
    std::istringstream lines(result.out);
    std::string line;
    int rows = 0;
    for (; std::getline(lines, line); ++rows) {
      const nlohmann::json row = nlohmann::json::parse(line);
      ASSERT_EQ(row["tokens"].size(), 4u) << line;
      ASSERT_EQ(row["texts"].size(), 4u) << line;
      for (const auto& text : row["texts"]) EXPECT_TRUE(text.is_string()) << line;
    }
    EXPECT_GT(rows, 0) << name;
  }
}

TEST_F(CliTest, SampleOfNanAndMaskedRowsSaysSo) {
  std::vector<float> rows = sampler_test::make_logits(3, 8, 5);
  rows[8 + 2] = NAN;
  for (int v = 16; v < 24; ++v) rows[static_cast<std::size_t>(v)] = -INFINITY;
  sampler_test::write_file(file("odd.npy"), sampler_test::npy_file("<f4", {3, 8}, bytes_of(rows)));
  const RunResult table = run_sampler({"sample", file("odd.npy"), "--backend", "cpu"});
  EXPECT_EQ(table.exit_code, 0) << table.err;
  EXPECT_NE(table.out.find("batch 1: holds NaN logits; no token\n"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("batch 2: every logit is -inf (fully masked row); no token\n"), std::string::npos)
      << table.out;
  EXPECT_NE(table.err.find("1 row(s) hold NaN"), std::string::npos) << table.err;
  const RunResult saved = run_sampler({"sample", file("odd.npy"), "-o", file("odd"), "-n", "2"});
  EXPECT_EQ(saved.exit_code, 0) << saved.err;
  const std::vector<int32_t> tokens = sampler_test::read_npy<int32_t>(file("odd.tokens.npy"), "<i4").values;
  ASSERT_EQ(tokens.size(), 6u);
  EXPECT_GE(tokens[0], 0);
  EXPECT_EQ(std::vector<int32_t>(tokens.begin() + 2, tokens.end()), std::vector<int32_t>(4, -1));
}

struct BadCase {
  std::string name;
  std::string file;               ///< input file name in the scratch dir ("" = the standard input)
  std::string bytes;              ///< its content (ignored when empty and file is "")
  std::vector<std::string> args;  ///< options after the input
  std::string needle;             ///< must appear in the error line
  bool softmax_too = true;        ///< also run `softmax -o` (false for top-k-only options)
};

class CliBadInputTest : public CliTest {
 protected:
  /// Runs `command input args`, writing into an "out" directory that must stay empty.
  void expect_failure(const BadCase& c, const std::vector<std::string>& command) {
    TempDir out;
    std::vector<std::string> args = command;
    for (const std::string& arg : c.args) args.push_back(arg == "NEW" ? out.file("new") : arg);
    if (std::find(c.args.begin(), c.args.end(), "-o") == c.args.end() &&
        std::find(c.args.begin(), c.args.end(), "--vocab") == c.args.end() &&
        std::find(c.args.begin(), c.args.end(), "--format") == c.args.end()) {
      args.push_back("-o");
      args.push_back(out.file(command[0] == "softmax" ? "probs.npy" : "top"));
    } else if (command[0] == "softmax") {
      return;  // a top-k printing option
    }
    const RunResult result = run_sampler(args);
    std::string line = c.name + ": sampler";
    for (const std::string& arg : args) line += " " + arg;
    EXPECT_TRUE(result.exit_code == 1 || result.exit_code == 2) << line << "\nexit " << result.exit_code;
    EXPECT_EQ(sampler_test::count_lines(result.err), 1) << line << "\nstderr: " << result.err;
    EXPECT_EQ(result.err.rfind("sampler: error: ", 0), 0u) << line << "\nstderr: " << result.err;
    EXPECT_NE(result.err.find(c.needle), std::string::npos) << line << "\nwant '" << c.needle << "' in: " << result.err;
    EXPECT_EQ(result.out, "") << line;
    EXPECT_TRUE(out.entries().empty()) << line << ": left " << out.entries().front();
  }

  void check(const BadCase& c) {
    std::string path = input();
    if (!c.file.empty()) {
      path = file(c.file);
      if (!c.bytes.empty()) sampler_test::write_file(path, c.bytes);
    }
    expect_failure(c, {"topk", path, "-k", "3", "--backend", "cpu"});
    if (c.softmax_too) expect_failure(c, {"softmax", path, "--backend", "cpu"});
  }
};

TEST_F(CliBadInputTest, BadFiles) {
  const std::string data = bytes_of(logits_);
  const std::string good = sampler_test::npy_file("<f4", {6, kVocab}, data);
  const std::vector<BadCase> cases = {
      {"missing file", "absent.npy", "", {}, "absent.npy: No such file or directory"},
      {"wrong magic", "text.npy", "this is not numpy", {}, "not a .npy file (bad magic"},
      {"truncated data", "short.npy", good.substr(0, good.size() - 10), {}, "(truncated?)"},
      {"header claims more",
       "claims.npy",
       sampler_test::npy_file("<f4", {60, kVocab}, data),
       {},
       "needs 12000 (truncated?)"},
      {"fortran order", "fortran.npy", sampler_test::npy_file("<f4", {6, kVocab}, data, true), {}, "Fortran-order"},
      {"unsupported npy dtype",
       "f8.npy",
       sampler_test::npy_file("<f8", {3, kVocab}, data),
       {},
       "unsupported dtype '<f8'"},
      {"unsupported safetensors dtype",
       "i32.safetensors",
       sampler_test::safetensors_file({{"x", "I32", {6, kVocab}, data}}),
       {},
       "unsupported dtype I32"},
      {"several tensors",
       "two.safetensors",
       sampler_test::safetensors_file({{"a", "F32", {6, kVocab}, data}, {"b", "F32", {6, kVocab}, data}}),
       {},
       "choose one with --tensor (a, b)"},
      {"unknown tensor",
       "one.safetensors",
       sampler_test::safetensors_file({{"a", "F32", {6, kVocab}, data}}),
       {"--tensor", "b"},
       "no tensor named 'b'"},
      {"shape mismatch", "", "", {"--shape", "6,50"}, "shape [2, 3, 50] does not match --shape [6, 50]"},
      {"raw size mismatch", "logits.raw", data, {"--shape", "2,3,51", "--dtype", "f32"}, "the raw file holds 1200"},
      {"raw without shape", "logits.raw", data, {}, "give --shape and --dtype"},
      {"raw without dtype", "logits.raw", data, {"--shape", "6,50"}, "give --shape and --dtype"},
  };
  for (const BadCase& c : cases) check(c);
}

TEST_F(CliBadInputTest, BadParameters) {
  const std::vector<BadCase> cases = {
      {"k zero", "", "", {"-k", "0"}, "-k 0 is out of range: must be in [1, 50]", false},
      {"k above V", "", "", {"-k", "51"}, "-k 51 is out of range", false},
      {"k negative", "", "", {"-k", "-2"}, "-k -2 is out of range", false},
      {"k not a number", "", "", {"-k", "ten"}, "-k", false},
      {"temperature zero", "", "", {"--temperature", "0"}, "--temperature must be finite and > 0 (got 0)"},
      {"temperature negative", "", "", {"--temperature", "-1"}, "--temperature must be finite and > 0 (got -1)"},
      {"temperature nan", "", "", {"--temperature", "nan"}, "--temperature"},
      {"temperature inf", "", "", {"--temperature", "inf"}, "--temperature"},
      {"temperature text", "", "", {"--temperature", "warm"}, "--temperature"},
      {"temperature subnormal", "", "", {"--temperature", "1e-40"}, "temperature"},
      {"unknown backend", "", "", {"--backend", "gpu"}, "--backend: gpu not in {auto,cuda,cpu}"},
      {"unknown algorithm", "", "", {"--algorithm", "bogo"}, "--algorithm: bogo not in"},
      {"bad shape text", "", "", {"--shape", "2x3"}, "--shape: expected 1 to 3 positive integers"},
      {"bad dtype", "", "", {"--dtype", "f64"}, "--dtype: expected f32, f16 or bf16 (got 'f64')"},
      {"bad chunk rows", "", "", {"--chunk-rows", "-1"}, "--chunk-rows must be >= 1"},
      {"unknown format", "", "", {"--format", "xml"}, "--format: xml not in", false},
      {"format with -o", "", "", {"--format", "json", "-o", "NEW"}, "excludes", false},
      {"missing vocab", "", "", {"--vocab", "/nonexistent/vocab.txt"}, "/nonexistent/vocab.txt: No such file", false},
      {"unknown option", "", "", {"--top-p", "0.9"}, "--top-p"},
  };
  for (const BadCase& c : cases) check(c);
}

TEST_F(CliBadInputTest, SampleBadParameters) {
  const std::vector<BadCase> cases = {
      {"top-k above V", "", "", {"--top-k", "51"}, "--top-k 51 is out of range: must be 0 (no bound) or in [1, 50]"},
      {"top-k negative", "", "", {"--top-k", "-1"}, "--top-k -1 is out of range"},
      {"top-p zero", "", "", {"--top-p", "0"}, "--top-p must be in (0, 1] (got 0)"},
      {"top-p above one", "", "", {"--top-p", "1.5"}, "--top-p must be in (0, 1] (got 1.5)"},
      {"top-p nan", "", "", {"--top-p", "nan"}, "--top-p"},
      {"min-p negative", "", "", {"--min-p", "-0.5"}, "--min-p must be in [0, 1] (got -0.5)"},
      {"min-p above one", "", "", {"--min-p", "2"}, "--min-p must be in [0, 1] (got 2)"},
      {"no draws", "", "", {"-n", "0"}, "--num-samples must be in [1, 1048576] (got 0)"},
      {"temperature negative",
       "",
       "",
       {"--temperature", "-1"},
       "--temperature must be finite and >= 0 (0: greedy) (got -1)"},
      {"temperature inf", "", "", {"--temperature", "inf"}, "--temperature"},
      {"temperature subnormal", "", "", {"--temperature", "1e-40"}, "temperature"},
      {"seed negative", "", "", {"--seed", "-1"}, "--seed"},
      {"unknown format", "", "", {"--format", "xml"}, "--format: xml not in"},
      {"missing vocab", "", "", {"--vocab", "/nonexistent/vocab.txt"}, "/nonexistent/vocab.txt: No such file"},
  };
  for (const BadCase& c : cases) expect_failure(c, {"sample", input(), "--backend", "cpu"});
}

TEST_F(CliBadInputTest, UnwritableOutputs) {
  check({"missing directory", "", "", {"-o", "/nonexistent-dir/out"}, "/nonexistent-dir/out", true});

  TempDir out;
  RunResult result = run_sampler({"softmax", input(), "-o", out.path(), "--backend", "cpu"});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_EQ(result.err, "sampler: error: " + out.path() + ": cannot write output: it is a directory\n");
  EXPECT_TRUE(out.entries().empty());

  // The second of topk's two outputs is unwritable: the first, already created, is removed too.
  ASSERT_EQ(::mkdir(out.file("top.probs.npy").c_str(), 0755), 0);
  result = run_sampler({"topk", input(), "-k", "3", "-o", out.file("top"), "--backend", "cpu"});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_EQ(result.err, "sampler: error: " + out.file("top.probs.npy") + ": cannot write output: it is a directory\n");
  EXPECT_EQ(out.entries(), std::vector<std::string>{"top.probs.npy"});
}

// A call the library refuses on the first chunk (a subnormal temperature, which passes the CLI's
// own check; on CUDA also a forced algorithm that cannot hold V) leaves stdout empty: the TSV
// header and info's file summary go out with the first rows, not before.
TEST_F(CliBadInputTest, RefusedOpsPrintNothing) {
  const std::vector<std::vector<std::string>> commands = {
      {"topk", input(), "-k", "3"},
      {"topk", input(), "-k", "3", "--format", "json"},
      {"topk", input(), "-k", "3", "--format", "tsv"},
      {"info", input()}};
  for (std::vector<std::string> args : commands) {
    args.insert(args.end(), {"--temperature", "1e-40", "--backend", "cpu"});
    const RunResult result = run_sampler(args);
    EXPECT_EQ(result.exit_code, 1) << args[0] << " " << args.back();
    EXPECT_EQ(result.out, "") << args[0];
    EXPECT_EQ(sampler_test::count_lines(result.err), 1) << result.err;
    EXPECT_NE(result.err.find("temperature must be >= 4.3e-39"), std::string::npos) << result.err;
  }
}

TEST_F(CliBadInputTest, EmptyOutputPathIsACommandLineError) {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"softmax", input(), "-o", "", "--backend", "cpu"},
        std::vector<std::string>{"topk", input(), "-k", "3", "-o", "", "--backend", "cpu"}}) {
    const RunResult result = run_sampler(args);
    EXPECT_EQ(result.exit_code, 2) << args[0];
    EXPECT_EQ(result.out, "") << args[0];
    EXPECT_NE(result.err.find("--output"), std::string::npos) << result.err;
    EXPECT_NE(result.err.find("must not be empty"), std::string::npos) << result.err;
  }
}

TEST_F(CliBadInputTest, CudaBackendWithoutDevice) {
  if (softk_test::cuda_device_available()) GTEST_SKIP() << "a CUDA device is present";
  check({"no device", "", "", {"--backend", "cuda"}, "--backend cuda: no usable CUDA device"});
}

TEST_F(CliBadInputTest, FailedRunKeepsAnExistingOutput) {
  sampler_test::write_file(file("probs.npy"), "previous");
  const RunResult result = run_sampler({"softmax", input(), "-o", file("probs.npy"), "--temperature", "0"});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_EQ(sampler_test::read_file(file("probs.npy")), "previous");
  EXPECT_EQ(dir_.entries(), (std::vector<std::string>{"logits.npy", "probs.npy"}));
}

TEST_F(CliBadInputTest, DamagedFilesThroughTheExecutable) {
  // A few seeded damaged files through the real process: exit 0 or one error line, never a crash.
  const std::string good = sampler_test::npy_file("<f4", {6, kVocab}, bytes_of(logits_));
  uint32_t state = 99;
  const auto next = [&state] { return state = state * 1664525u + 1013904223u; };
  for (int trial = 0; trial < 24; ++trial) {
    std::string damaged = good;
    if (trial % 3 == 0)
      damaged.resize(next() % good.size());
    else
      damaged[next() % 128] = static_cast<char>(next());
    sampler_test::write_file(file("damaged.npy"), damaged);
    const RunResult result =
        run_sampler({"topk", file("damaged.npy"), "-k", "2", "--format", "tsv", "--backend", "cpu"});
    EXPECT_TRUE(result.exit_code == 0 || result.exit_code == 1) << "trial " << trial << " exit " << result.exit_code;
    if (result.exit_code != 0) {
      EXPECT_EQ(sampler_test::count_lines(result.err), 1) << result.err;
    }
  }
}

}  // namespace
