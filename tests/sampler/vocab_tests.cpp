// Vocabulary files in the three forms people have: tokenizer.json, vocab.json, one per line.
#include <gtest/gtest.h>

#include "error.hpp"
#include "test_support.hpp"
#include "vocab.hpp"

namespace {

using sampler_test::TempDir;

std::string token(const sampler::Vocab& vocab, int64_t id) {
  const std::string* text = vocab.token(id);
  return text ? *text : "<none>";
}

TEST(Vocab, OneTokenPerLine) {
  TempDir dir;
  sampler_test::write_file(dir.file("vocab.txt"), "<s>\n the\r\n\nlast");  // CRLF, an empty token, no final newline
  const sampler::Vocab vocab = sampler::Vocab::load(dir.file("vocab.txt"));
  EXPECT_EQ(vocab.size(), 4u);
  EXPECT_EQ(token(vocab, 0), "<s>");
  EXPECT_EQ(token(vocab, 1), " the");
  EXPECT_EQ(token(vocab, 2), "");
  EXPECT_EQ(token(vocab, 3), "last");
  EXPECT_EQ(token(vocab, 4), "<none>");
  EXPECT_EQ(token(vocab, -1), "<none>");
}

TEST(Vocab, VocabJsonMap) {
  TempDir dir;
  sampler_test::write_file(dir.file("vocab.json"), R"({"hello": 0, "\u0120world": 2, "!": 1})");
  const sampler::Vocab vocab = sampler::Vocab::load(dir.file("vocab.json"));
  EXPECT_EQ(vocab.size(), 3u);
  EXPECT_EQ(token(vocab, 2), "\xc4\xa0world");
  EXPECT_EQ(token(vocab, 1), "!");
}

TEST(Vocab, TokenizerJsonBpeWithAddedTokens) {
  TempDir dir;
  sampler_test::write_file(dir.file("tokenizer.json"), R"({
    "version": "1.0",
    "added_tokens": [{"id": 5, "content": "<|eot|>", "special": true}],
    "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a b"]}})");
  const sampler::Vocab vocab = sampler::Vocab::load(dir.file("tokenizer.json"));
  EXPECT_EQ(token(vocab, 2), "ab");
  EXPECT_EQ(token(vocab, 5), "<|eot|>");
  EXPECT_EQ(token(vocab, 3), "<none>");
}

TEST(Vocab, TokenizerJsonUnigramList) {
  TempDir dir;
  sampler_test::write_file(dir.file("tokenizer.json"),
                           R"({"model": {"type": "Unigram", "vocab": [["<unk>", 0.0], ["\u2581the", -2.5]]}})");
  const sampler::Vocab vocab = sampler::Vocab::load(dir.file("tokenizer.json"));
  EXPECT_EQ(token(vocab, 1), "\xe2\x96\x81the");
}

TEST(Vocab, BadFilesNameTheFile) {
  TempDir dir;
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{not json", "not valid JSON"},
      {"[1, 2, 3]", "expected a tokenizer.json or a vocab.json"},
      {R"({"a": "zero"})", "token 'a' has no integer id"},
      {R"({"a": -1})", "token 'a' has no integer id"},
      {R"({"a": 4294967296})", "token 'a' has no integer id"},
      {R"({"model": {"type": "BPE"}})", "no model.vocab"},
      {R"({"model": {"vocab": 7}})", "neither a {token: id} map"},
      {R"({"model": {"vocab": [[1, 2]]}})", "is not [token, score]"},
      {R"({"model": {"vocab": {}}, "added_tokens": [{"content": "x"}]})", "added_tokens entry"},
  };
  for (const auto& [text, needle] : cases) {
    const std::string path = dir.file("bad.json");
    sampler_test::write_file(path, text);
    try {
      sampler::Vocab::load(path);
      ADD_FAILURE() << "loaded " << text;
    } catch (const sampler::Error& e) {
      const std::string message = e.what();
      EXPECT_EQ(message.rfind(path + ": ", 0), 0u) << message;
      EXPECT_NE(message.find(needle), std::string::npos) << "want '" << needle << "' in: " << message;
    }
  }
  EXPECT_THROW(sampler::Vocab::load(dir.file("absent.txt")), sampler::Error);
}

}  // namespace
