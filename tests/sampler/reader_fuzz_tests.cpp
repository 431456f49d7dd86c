// The readers under damage: seeded random truncations and byte flips of valid files never
// crash and never throw anything but one clear sampler::Error line; what parses reads back whole.
#include <gtest/gtest.h>

#include <random>

#include "cpu/half_convert.hpp"
#include "error.hpp"
#include "logits_file.hpp"
#include "test_support.hpp"
#include "vocab.hpp"

namespace {

using sampler_test::bytes_of;
using sampler_test::TempDir;
using sampler_test::write_file;

struct Specimen {
  std::string name;  ///< file name: the extension picks the format, as for a user
  std::string bytes;
  std::string tensor;  ///< --tensor
};

std::vector<Specimen> specimens() {
  const std::vector<float> logits = sampler_test::make_logits(3, 40, 7);
  std::vector<uint16_t> bf16;
  for (float x : logits) bf16.push_back(softk::detail::f32_to_bf16(x));
  std::vector<uint16_t> f16;
  for (float x : logits) f16.push_back(softk::detail::f32_to_f16(x));
  return {
      {"f32.npy", sampler_test::npy_file("<f4", {3, 40}, bytes_of(logits)), ""},
      {"f16.npy", sampler_test::npy_file("<f2", {1, 3, 40}, bytes_of(f16)), ""},
      {"sniffed.bin", sampler_test::npy_file("<f4", {120}, bytes_of(logits)), ""},
      {"one.safetensors", sampler_test::safetensors_file({{"logits", "BF16", {3, 40}, bytes_of(bf16)}}), ""},
      {"two.safetensors",
       sampler_test::safetensors_file({{"a", "F32", {3, 40}, bytes_of(logits)}, {"b", "F16", {120}, bytes_of(f16)}}),
       "b"},
  };
}

/// Opens `path` and reads every row. Passes when that works or fails with a one-line
/// sampler::Error naming the file; any other exception fails the test (a crash ends it).
void open_and_read(const std::string& path, const std::string& tensor, const std::string& what) {
  try {
    sampler::InputSpec spec;
    spec.path = path;
    spec.tensor = tensor;
    const sampler::LogitsFile file = sampler::LogitsFile::open(spec);
    ASSERT_GE(file.rows(), 1) << what;
    std::vector<unsigned char> data(static_cast<std::size_t>(file.rows() * file.row_bytes()));
    file.read_rows(0, file.rows(), data.data());
  } catch (const sampler::Error& e) {
    const std::string message = e.what();
    EXPECT_EQ(message.rfind(path + ": ", 0), 0u) << what << ": " << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << what << ": " << message;
  } catch (const std::exception& e) {
    ADD_FAILURE() << what << ": unexpected " << typeid(e).name() << ": " << e.what();
  }
}

TEST(ReaderFuzz, TruncationsAreReportedNeverCrash) {
  TempDir dir;
  std::mt19937 rng(1234);
  for (const Specimen& specimen : specimens()) {
    const std::string path = dir.file(specimen.name);
    std::uniform_int_distribution<std::size_t> cut(0, specimen.bytes.size() - 1);
    for (int trial = 0; trial < 60; ++trial) {
      const std::size_t size = trial < 16 ? static_cast<std::size_t>(trial) : cut(rng);  // every tiny prefix too
      write_file(path, specimen.bytes.substr(0, size));
      open_and_read(path, specimen.tensor, specimen.name + " cut to " + std::to_string(size) + " bytes");
    }
  }
}

TEST(ReaderFuzz, ByteFlipsAreReportedOrParseNeverCrash) {
  TempDir dir;
  std::mt19937 rng(5678);
  for (const Specimen& specimen : specimens()) {
    const std::string path = dir.file(specimen.name);
    // Damage lands in the header most of the time: that is where parsing can go wrong.
    const std::size_t header_end = std::min<std::size_t>(specimen.bytes.size(), 160);
    std::uniform_int_distribution<std::size_t> in_header(0, header_end - 1);
    std::uniform_int_distribution<std::size_t> anywhere(0, specimen.bytes.size() - 1);
    std::uniform_int_distribution<int> flips(1, 4), bit(0, 7), coin(0, 3);
    for (int trial = 0; trial < 120; ++trial) {
      std::string damaged = specimen.bytes;
      std::string what = specimen.name + " flipped at";
      for (int f = flips(rng); f > 0; --f) {
        const std::size_t at = coin(rng) == 0 ? anywhere(rng) : in_header(rng);
        damaged[at] = static_cast<char>(damaged[at] ^ (1 << bit(rng)));
        what += " " + std::to_string(at);
      }
      write_file(path, damaged);
      open_and_read(path, specimen.tensor, what);
    }
  }
}

TEST(ReaderFuzz, VocabularyDamageIsReportedNeverCrash) {
  TempDir dir;
  const std::string good =
      R"({"model":{"type":"BPE","vocab":{"a":0,"b":1,"\u0120c":2}},"added_tokens":[{"id":3,"content":"<s>"}]})";
  std::mt19937 rng(42);
  std::uniform_int_distribution<std::size_t> at(0, good.size() - 1);
  std::uniform_int_distribution<int> byte(0, 255);
  const std::string path = dir.file("tokenizer.json");
  for (int trial = 0; trial < 100; ++trial) {
    std::string damaged = good;
    damaged[at(rng)] = static_cast<char>(byte(rng));
    if (trial % 4 == 0) damaged.resize(at(rng));
    write_file(path, damaged);
    try {
      sampler::Vocab::load(path);
    } catch (const sampler::Error& e) {
      EXPECT_EQ(std::string(e.what()).rfind(path + ": ", 0), 0u) << e.what();
    } catch (const std::exception& e) {
      ADD_FAILURE() << "trial " << trial << ": unexpected " << e.what();
    }
  }
}

}  // namespace
