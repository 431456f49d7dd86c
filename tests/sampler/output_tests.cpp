// The output side: atomic files, .npy writing, the top-k printer's three formats, the progress bar.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include <sys/stat.h>

#include "error.hpp"
#include "output_file.hpp"
#include "progress.hpp"
#include "softk/types.hpp"
#include "test_support.hpp"
#include "topk_printer.hpp"

namespace {

using sampler_test::TempDir;

TEST(AtomicOutputFile, AppearsOnlyOnCommit) {
  TempDir dir;
  const std::string path = dir.file("out.bin");
  {
    sampler::AtomicOutputFile file(path);
    file.write("hello", 5);
    ASSERT_EQ(dir.entries().size(), 1u);
    EXPECT_NE(dir.entries()[0], "out.bin");  // only the hidden temporary exists so far
    file.commit();
  }
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"out.bin"});
  EXPECT_EQ(sampler_test::read_file(path), "hello");
}

TEST(AtomicOutputFile, UncommittedLeavesNothingAndKeepsAnOldFile) {
  TempDir dir;
  const std::string path = dir.file("out.bin");
  sampler_test::write_file(path, "previous");
  {
    sampler::AtomicOutputFile file(path);
    file.write("partial", 7);
  }  // an error unwinding through here
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"out.bin"});
  EXPECT_EQ(sampler_test::read_file(path), "previous");
}

TEST(AtomicOutputFile, UnwritableDestinationsFailUpFront) {
  TempDir dir;
  for (const std::string& path : {dir.file("no/such/dir/out.npy"), dir.path()}) {
    try {
      sampler::AtomicOutputFile file(path);
      ADD_FAILURE() << "created " << path;
    } catch (const sampler::Error& e) {
      EXPECT_EQ(std::string(e.what()).rfind(path + ": cannot write output", 0), 0u) << e.what();
    }
  }
  EXPECT_TRUE(dir.entries().empty());
}

TEST(NpyWriter, RoundTripsThroughTheReader) {
  TempDir dir;
  const std::vector<std::vector<int64_t>> shapes = {{5}, {2, 5}, {2, 3, 5}};
  for (const auto& shape : shapes) {
    int64_t count = 1;
    for (int64_t dim : shape) count *= dim;
    std::vector<float> probs(static_cast<std::size_t>(count));
    std::vector<int32_t> indices(probs.size());
    for (int64_t i = 0; i < count; ++i) {
      probs[static_cast<std::size_t>(i)] = 1.0f / static_cast<float>(i + 1);
      indices[static_cast<std::size_t>(i)] = static_cast<int32_t>(i * 7 - 3);
    }
    {
      sampler::NpyWriter f32(dir.file("p.npy"), sampler::NpyElement::f32, shape);
      sampler::NpyWriter i32(dir.file("i.npy"), sampler::NpyElement::i32, shape);
      f32.append(probs.data(), 2);  // streamed in pieces, as chunks arrive
      f32.append(probs.data() + 2, count - 2);
      i32.append(indices.data(), count);
      f32.commit();
      i32.commit();
    }
    const auto p = sampler_test::read_npy<float>(dir.file("p.npy"), "<f4");
    const auto i = sampler_test::read_npy<int32_t>(dir.file("i.npy"), "<i4");
    EXPECT_EQ(p.header.shape, shape);
    EXPECT_FALSE(p.header.fortran_order);
    EXPECT_EQ(p.header.data_offset % 64, 0);  // NumPy aligns data to 64 bytes; so do we
    EXPECT_EQ(p.values, probs);
    EXPECT_EQ(i.values, indices);
  }
}

TEST(NpyWriter, RefusesToCommitAnIncompleteArray) {
  TempDir dir;
  {
    sampler::NpyWriter writer(dir.file("short.npy"), sampler::NpyElement::f32, {2, 3});
    const float values[5] = {};
    writer.append(values, 5);
    EXPECT_THROW(writer.commit(), sampler::Error);
  }
  EXPECT_TRUE(dir.entries().empty());
}

// topk -o's two files appear together or not at all.
TEST(NpyWriter, CommitsTogetherOrNotAtAll) {
  TempDir dir;
  const float values[6] = {};
  {
    sampler::NpyWriter first(dir.file("a.npy"), sampler::NpyElement::f32, {2, 3});
    sampler::NpyWriter second(dir.file("b.npy"), sampler::NpyElement::i32, {2, 3});
    first.append(values, 6);
    second.append(values, 6);
    sampler::commit_together(first, second);
  }
  EXPECT_EQ(dir.entries(), (std::vector<std::string>{"a.npy", "b.npy"}));

  TempDir failing;
  {
    sampler::NpyWriter first(failing.file("a.npy"), sampler::NpyElement::f32, {2, 3});
    sampler::NpyWriter second(failing.file("b.npy"), sampler::NpyElement::i32, {2, 3});
    first.append(values, 6);
    second.append(values, 6);
    // The second's rename fails (its path became a directory after it was opened): the first,
    // already renamed into place, is taken back.
    ASSERT_EQ(::mkdir(failing.file("b.npy").c_str(), 0755), 0);
    EXPECT_THROW(sampler::commit_together(first, second), sampler::Error);
  }
  EXPECT_EQ(failing.entries(), std::vector<std::string>{"b.npy"});

  TempDir incomplete;
  {
    sampler::NpyWriter first(incomplete.file("a.npy"), sampler::NpyElement::f32, {2, 3});
    sampler::NpyWriter second(incomplete.file("b.npy"), sampler::NpyElement::i32, {2, 3});
    first.append(values, 6);
    second.append(values, 5);
    EXPECT_THROW(sampler::commit_together(first, second), sampler::Error);
  }
  EXPECT_TRUE(incomplete.entries().empty());
}

TEST(EscapeToken, MakesEveryByteVisibleOnOneLine) {
  EXPECT_EQ(sampler::escape_token(" the", true), "\" the\"");
  EXPECT_EQ(sampler::escape_token("a\"b\\c\n\t\r\x01\x7f", true), R"("a\"b\\c\n\t\r\x01\x7f")");
  EXPECT_EQ(sampler::escape_token("a\"b\tc", false), R"(a"b\tc)");
  EXPECT_EQ(sampler::escape_token("\xc4\xa0world", false), "\xc4\xa0world");  // UTF-8 passes through
}

/// Two rows of k = 3 for a [2, 1, 5] input: an ok row with a masked tail slot, a NaN row.
struct PrinterCase {
  std::vector<int64_t> shape = {2, 1, 5};
  std::vector<float> log_probs = {std::log(0.5f), std::log(0.25f), -std::numeric_limits<float>::infinity(),
                                  std::nanf(""),  std::nanf(""),   std::nanf("")};
  std::vector<int32_t> indices = {3, 0, -1, -1, -1, -1};
  std::vector<int32_t> status = {0, static_cast<int32_t>(softk::RowStatus::has_nan)};
};

std::string print(sampler::OutputFormat format, const sampler::Vocab* vocab) {
  const PrinterCase c;
  std::ostringstream out;
  sampler::TopkPrinter printer(out, format, c.shape, 3, vocab);
  printer.print_rows(0, 1, c.log_probs.data(), c.indices.data(), c.status.data());
  printer.print_rows(1, 1, c.log_probs.data() + 3, c.indices.data() + 3, c.status.data() + 1);  // a second chunk
  return out.str();
}

TEST(TopkPrinter, Table) {
  const std::string table = print(sampler::OutputFormat::table, nullptr);
  EXPECT_EQ(table,
            "batch 0, step 0:\n"
            "  rank     id        prob    log_prob\n"
            "     1      3    0.500000     -0.6931\n"
            "     2      0    0.250000     -1.3863\n"
            "\n"
            "batch 1, step 0: holds NaN logits; no ranking\n");
}

TEST(TopkPrinter, JsonLines) {
  const std::string text = print(sampler::OutputFormat::json, nullptr);
  std::istringstream lines(text);
  std::string line;
  std::getline(lines, line);
  const auto first = nlohmann::json::parse(line);
  EXPECT_EQ(first["batch"], 0);
  EXPECT_EQ(first["step"], 0);
  EXPECT_EQ(first["status"], "ok");
  ASSERT_EQ(first["topk"].size(), 2u);  // the masked slot is left out
  EXPECT_EQ(first["topk"][0]["rank"], 1);
  EXPECT_EQ(first["topk"][0]["id"], 3);
  EXPECT_EQ(first["topk"][0]["prob"], 0.5);
  EXPECT_FALSE(first["topk"][0].contains("token"));
  EXPECT_NE(line.find("\"prob\":0.5,"), std::string::npos) << "floats print short: " << line;
  std::getline(lines, line);
  const auto second = nlohmann::json::parse(line);
  EXPECT_EQ(second["status"], "has_nan");
  EXPECT_TRUE(second["topk"].empty());
  EXPECT_FALSE(std::getline(lines, line));
}

TEST(TopkPrinter, TsvWithTokens) {
  TempDir dir;
  sampler_test::write_file(dir.file("vocab.txt"), "zero\none\ntwo\nthree\tand a tab\n");
  const sampler::Vocab vocab = sampler::Vocab::load(dir.file("vocab.txt"));
  EXPECT_EQ(print(sampler::OutputFormat::tsv, &vocab),
            "batch\tstep\trank\ttoken_id\tprob\tlogprob\ttoken\n"
            "0\t0\t1\t3\t0.5\t-0.6931472\tthree\\tand a tab\n"
            "0\t0\t2\t0\t0.25\t-1.3862944\tzero\n");
}

TEST(TopkPrinter, OneDimensionalInputHasNoPosition) {
  const std::vector<float> log_probs = {0.0f};
  const std::vector<int32_t> indices = {2};
  const std::vector<int32_t> status = {0};
  std::ostringstream tsv, json;
  sampler::TopkPrinter(tsv, sampler::OutputFormat::tsv, {5}, 1, nullptr)
      .print_rows(0, 1, log_probs.data(), indices.data(), status.data());
  sampler::TopkPrinter(json, sampler::OutputFormat::json, {5}, 1, nullptr)
      .print_rows(0, 1, log_probs.data(), indices.data(), status.data());
  EXPECT_EQ(tsv.str(), "rank\ttoken_id\tprob\tlogprob\n1\t2\t1\t0\n");
  EXPECT_EQ(json.str(), R"({"status":"ok","topk":[{"rank":1,"id":2,"prob":1.0,"logprob":0.0}]})"
                        "\n");
}

TEST(Progress, DrawsWhenEnabledAndErasesItself) {
  std::FILE* sink = std::tmpfile();
  ASSERT_NE(sink, nullptr);
  {
    sampler::Progress progress("topk", 4, sink, /*enabled=*/true, std::chrono::milliseconds(0));
    progress.advance(2);
    progress.advance(2);  // the last step always draws, whatever the rate limit
  }
  std::rewind(sink);
  char buffer[512] = {};
  const std::size_t size = std::fread(buffer, 1, sizeof(buffer) - 1, sink);
  std::fclose(sink);
  const std::string drawn(buffer, size);
  EXPECT_NE(drawn.find("\rtopk [###############---------------]  50%  2/4 rows"), std::string::npos) << drawn;
  EXPECT_NE(drawn.find("100%  4/4 rows"), std::string::npos) << drawn;
  EXPECT_EQ(drawn.substr(drawn.size() - 4), "\r\033[K");  // erased at the end
}

TEST(Progress, SilentWhenDisabledOrShort) {
  std::FILE* sink = std::tmpfile();
  ASSERT_NE(sink, nullptr);
  {
    sampler::Progress disabled("x", 4, sink, /*enabled=*/false, std::chrono::milliseconds(0));
    disabled.advance(4);
    sampler::Progress short_run("x", 4, sink, /*enabled=*/true, std::chrono::hours(1));
    short_run.advance(4);
  }
  EXPECT_EQ(std::ftell(sink), 0);
  std::fclose(sink);
}

}  // namespace
