// The input readers: valid .npy / .safetensors / raw files parse to the right shape, dtype and
// bytes; every kind of bad input fails with one sampler::Error line naming the file.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>

#include "cpu/half_convert.hpp"
#include "error.hpp"
#include "logits_file.hpp"
#include "test_support.hpp"

namespace {

using sampler::FileFormat;
using sampler::InputSpec;
using sampler::LogitsFile;
using sampler_test::bytes_of;
using sampler_test::npy_file;
using sampler_test::npy_with_dict;
using sampler_test::safetensors_file;
using sampler_test::safetensors_with_header;
using sampler_test::StTensor;
using sampler_test::TempDir;
using sampler_test::write_file;

std::vector<float> iota_floats(std::size_t count) {
  std::vector<float> values(count);
  for (std::size_t i = 0; i < count; ++i) values[i] = static_cast<float>(i) * 0.5f - 3.0f;
  return values;
}

std::vector<uint16_t> to_half(const std::vector<float>& values, uint16_t (*convert)(float)) {
  std::vector<uint16_t> halves;
  for (float value : values) halves.push_back(convert(value));
  return halves;
}

std::string read_all_rows(const LogitsFile& file) {
  std::string bytes(static_cast<std::size_t>(file.rows() * file.row_bytes()), '\0');
  file.read_rows(0, file.rows(), bytes.data());
  return bytes;
}

LogitsFile open_path(const std::string& path) {
  InputSpec spec;
  spec.path = path;
  return LogitsFile::open(spec);
}

/// Expects `open` to throw sampler::Error whose message is one line naming `path` and holding
/// `needle`.
void expect_error(const std::function<void()>& open, const std::string& path, const std::string& needle) {
  try {
    open();
    ADD_FAILURE() << "expected an error containing '" << needle << "' for " << path;
  } catch (const sampler::Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find(path), std::string::npos) << message;
    EXPECT_NE(message.find(needle), std::string::npos) << "want '" << needle << "' in: " << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }
}

void expect_open_error(const std::string& path, const std::string& needle) {
  expect_error([&] { open_path(path); }, path, needle);
}

class ReaderTest : public ::testing::Test {
 protected:
  /// Writes `bytes` to `name` in the scratch directory and returns its path.
  std::string put(const std::string& name, const std::string& bytes) {
    const std::string path = dir_.file(name);
    write_file(path, bytes);
    return path;
  }
  TempDir dir_;
};

// ---- .npy -----------------------------------------------------------------------------------

TEST_F(ReaderTest, NpyF32OneTwoAndThreeDims) {
  const std::vector<std::vector<int64_t>> shapes = {{7}, {3, 7}, {2, 3, 7}};
  for (const auto& shape : shapes) {
    const int64_t rows = shape.size() == 1 ? 1 : shape.size() == 2 ? shape[0] : shape[0] * shape[1];
    const std::vector<float> values = iota_floats(static_cast<std::size_t>(rows * 7));
    const std::string path =
        put("f32_" + std::to_string(shape.size()) + "d.npy", npy_file("<f4", shape, bytes_of(values)));
    const LogitsFile file = open_path(path);
    EXPECT_EQ(file.format(), FileFormat::npy);
    EXPECT_EQ(file.dtype(), softk::DType::f32);
    EXPECT_EQ(file.shape(), shape);
    EXPECT_EQ(file.vocab(), 7);
    EXPECT_EQ(file.rows(), rows);
    EXPECT_EQ(file.leading_dims(), std::vector<int64_t>(shape.begin(), shape.end() - 1));
    EXPECT_EQ(read_all_rows(file), bytes_of(values));
    if (rows > 1) {  // a chunk from the middle lands at the right offset
      std::vector<float> row(7);
      file.read_rows(1, 1, row.data());
      EXPECT_EQ(row, std::vector<float>(values.begin() + 7, values.begin() + 14));
    }
  }
}

TEST_F(ReaderTest, NpyF16) {
  const std::vector<uint16_t> halves = to_half(iota_floats(10), softk::detail::f32_to_f16);
  const LogitsFile file = open_path(put("half.npy", npy_file("<f2", {2, 5}, bytes_of(halves))));
  EXPECT_EQ(file.dtype(), softk::DType::f16);
  EXPECT_EQ(file.shape(), (std::vector<int64_t>{2, 5}));
  EXPECT_EQ(read_all_rows(file), bytes_of(halves));
}

TEST_F(ReaderTest, NpyHeaderVariantsNumPyMayWrite) {
  const std::string payload = bytes_of(iota_floats(6));
  // Key order, double quotes, Python 2 long integers, no trailing comma, a 1-d Fortran array
  // (the same bytes as C order).
  for (const std::string dict : {"{'shape': (2, 3), 'fortran_order': False, 'descr': '<f4'}",
                                 "{\"descr\": \"<f4\", \"fortran_order\": False, \"shape\": (2L, 3L)}",
                                 "{'descr':'<f4','fortran_order':False,'shape':(2,3,),}"}) {
    const LogitsFile file = open_path(put("variant.npy", npy_with_dict(dict, payload)));
    EXPECT_EQ(file.shape(), (std::vector<int64_t>{2, 3})) << dict;
  }
  const LogitsFile fortran_1d = open_path(put("f1d.npy", npy_file("<f4", {6}, payload, /*fortran=*/true)));
  EXPECT_EQ(fortran_1d.shape(), (std::vector<int64_t>{6}));
}

TEST_F(ReaderTest, NpyVersion2Header) {
  std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }";
  dict.append((12 + dict.size() + 1 + 63) / 64 * 64 - 12 - dict.size() - 1, ' ');
  dict += '\n';
  std::string bytes("\x93NUMPY\x02\x00", 8);
  const auto length = static_cast<uint32_t>(dict.size());
  bytes.append(reinterpret_cast<const char*>(&length), 4);
  const LogitsFile file = open_path(put("v2.npy", bytes + dict + bytes_of(iota_floats(4))));
  EXPECT_EQ(file.shape(), (std::vector<int64_t>{4}));
  EXPECT_EQ(read_all_rows(file), bytes_of(iota_floats(4)));
}

TEST_F(ReaderTest, ExampleFilesWrittenByNumPy) {
  const LogitsFile f32 = open_path(SOFTK_EXAMPLE_DATA "/logits_f32.npy");
  EXPECT_EQ(f32.dtype(), softk::DType::f32);
  EXPECT_EQ(f32.shape(), (std::vector<int64_t>{2, 3, 4096}));
  const LogitsFile f16 = open_path(SOFTK_EXAMPLE_DATA "/logits_f16.npy");
  EXPECT_EQ(f16.dtype(), softk::DType::f16);
  EXPECT_EQ(f16.shape(), (std::vector<int64_t>{4, 4096}));
  const LogitsFile bf16 = open_path(SOFTK_EXAMPLE_DATA "/logits_bf16.safetensors");
  EXPECT_EQ(bf16.dtype(), softk::DType::bf16);
  EXPECT_EQ(bf16.tensor(), "logits");
  EXPECT_EQ(bf16.shape(), (std::vector<int64_t>{1, 2, 4096}));
}

TEST_F(ReaderTest, MissingFileAndDirectory) {
  expect_open_error(dir_.file("absent.npy"), "No such file");
  expect_open_error(dir_.path(), "not a regular file");
}

TEST_F(ReaderTest, NpyWrongMagic) {
  expect_open_error(put("text.npy", "hello, this is not numpy data at all"), "bad magic");
  expect_open_error(put("empty.npy", ""), "bad magic");
}

TEST_F(ReaderTest, NpyTruncatedHeader) {
  const std::string good = npy_file("<f4", {2, 3}, bytes_of(iota_floats(6)));
  expect_open_error(put("cut9.npy", good.substr(0, 9)), "truncated .npy header");
  expect_open_error(put("cut40.npy", good.substr(0, 40)), "truncated .npy header");
}

TEST_F(ReaderTest, NpyTruncatedData) {
  const std::string good = npy_file("<f4", {2, 3}, bytes_of(iota_floats(6)));
  expect_open_error(put("short.npy", good.substr(0, good.size() - 3)), "(truncated?)");
  expect_open_error(put("nodata.npy", good.substr(0, good.size() - 24)), "the file holds 0 data bytes");
}

TEST_F(ReaderTest, NpyHeaderClaimsMoreDataThanTheFileHolds) {
  const std::string path = put("claims.npy", npy_file("<f4", {2, 3, 4096}, bytes_of(iota_floats(6))));
  expect_open_error(path, "holds 24 data bytes but shape [2, 3, 4096] of f32 needs 98304 (truncated?)");
}

TEST_F(ReaderTest, NpyTrailingBytes) {
  expect_open_error(put("long.npy", npy_file("<f4", {2, 3}, bytes_of(iota_floats(7)))), "needs 24");
}

TEST_F(ReaderTest, NpyFortranOrder) {
  expect_open_error(put("fortran.npy", npy_file("<f4", {2, 3}, bytes_of(iota_floats(6)), /*fortran=*/true)),
                    "Fortran-order");
}

TEST_F(ReaderTest, NpyUnsupportedDtypes) {
  const std::string payload(48, '\0');
  for (const std::string descr : {"<f8", "<i4", "|u1", "<u2", "|b1", "<c8"}) {
    expect_open_error(put("dtype.npy", npy_file(descr, {6}, payload)), "unsupported dtype '" + descr + "'");
  }
  expect_open_error(put("big.npy", npy_file(">f4", {6}, payload)), "big-endian");
  expect_open_error(
      put("struct.npy", npy_with_dict("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (6,), }", payload)),
      "structured");
}

TEST_F(ReaderTest, NpyUnusableShapes) {
  expect_open_error(put("scalar.npy", npy_with_dict("{'descr': '<f4', 'fortran_order': False, 'shape': (), }",
                                                    bytes_of(iota_floats(1)))),
                    "has 0 dims");
  expect_open_error(put("four.npy", npy_file("<f4", {1, 1, 2, 3}, bytes_of(iota_floats(6)))), "expected 1, 2 or 3");
  expect_open_error(put("empty_rows.npy", npy_file("<f4", {0, 7}, "")), "is empty");
  expect_open_error(put("huge.npy", npy_file("<f4", {int64_t{1} << 40, int64_t{1} << 40}, "")), "too large");
  expect_open_error(put("wide.npy", npy_file("<f2", {int64_t{1} << 31}, "")), "vocabulary size 2147483648");
}

TEST_F(ReaderTest, NpyMalformedHeaders) {
  const std::string payload = bytes_of(iota_floats(6));
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{'descr': '<f4', 'shape': (6,), }", "no 'fortran_order'"},
      {"{'descr': '<f4', 'fortran_order': 0, 'shape': (6,), }", "'fortran_order' is not True or False"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': 6, }", "'shape' is not a tuple"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (-6,), }", "non-negative integer"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }", "integer out of range"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': ((((((((((6,),),),),),),),),),), }", "nesting too deep"},
      {"{'descr': '<f4' 'fortran_order': False}", "expected ','"},
      {"{'descr': '<f4", "unterminated string"},
      {"['descr', '<f4']", "not a dict"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (6,), } trailing", "unexpected text"},
      {"{'descr': <f4}", "unexpected character '<'"},
  };
  for (const auto& [dict, needle] : cases) {
    expect_open_error(put("malformed.npy", npy_with_dict(dict, payload)), needle);
  }
  std::string version4 = npy_file("<f4", {6}, payload);
  version4[6] = 4;
  expect_open_error(put("v4.npy", version4), "unsupported .npy version 4.0");
}

TEST_F(ReaderTest, ShapeAndDtypeOptionsMustMatchAHeader) {
  const std::string path = put("checked.npy", npy_file("<f4", {2, 3, 7}, bytes_of(iota_floats(42))));
  InputSpec spec;
  spec.path = path;
  spec.shape = {2, 3, 7};
  spec.dtype = softk::DType::f32;
  EXPECT_EQ(LogitsFile::open(spec).rows(), 6);
  spec.shape = {6, 7};
  expect_error([&] { LogitsFile::open(spec); }, path, "shape [2, 3, 7] does not match --shape [6, 7]");
  spec.shape = {};
  spec.dtype = softk::DType::bf16;
  expect_error([&] { LogitsFile::open(spec); }, path, "dtype f32 does not match --dtype bf16");
  spec.dtype.reset();
  spec.tensor = "logits";
  expect_error([&] { LogitsFile::open(spec); }, path, "--tensor applies only to .safetensors");
}

// ---- .safetensors ---------------------------------------------------------------------------

TEST_F(ReaderTest, SafetensorsF32F16AndBF16) {
  const std::vector<float> values = iota_floats(2 * 3 * 5);
  const std::string f32 = bytes_of(values);
  const std::string f16 = bytes_of(to_half(values, softk::detail::f32_to_f16));
  const std::string bf16 = bytes_of(to_half(values, softk::detail::f32_to_bf16));
  const std::vector<std::tuple<std::string, softk::DType, std::string>> cases = {
      {"F32", softk::DType::f32, f32}, {"F16", softk::DType::f16, f16}, {"BF16", softk::DType::bf16, bf16}};
  for (const auto& [name, dtype, data] : cases) {
    const LogitsFile file = open_path(put("one.safetensors", safetensors_file({{"logits", name, {2, 3, 5}, data}})));
    EXPECT_EQ(file.format(), FileFormat::safetensors);
    EXPECT_EQ(file.dtype(), dtype);
    EXPECT_EQ(file.tensor(), "logits");
    EXPECT_EQ(file.shape(), (std::vector<int64_t>{2, 3, 5}));
    EXPECT_EQ(read_all_rows(file), data);
  }
}

TEST_F(ReaderTest, SafetensorsSeveralTensorsNeedTensorOption) {
  const std::string first = bytes_of(iota_floats(8));
  const std::string second = bytes_of(to_half(iota_floats(12), softk::detail::f32_to_bf16));
  const std::string path =
      put("two.safetensors", safetensors_file({{"hidden", "F32", {8}, first}, {"logits", "BF16", {3, 4}, second}}));
  expect_open_error(path, "holds 2 tensors; choose one with --tensor (hidden, logits)");
  InputSpec spec;
  spec.path = path;
  spec.tensor = "logits";
  const LogitsFile file = LogitsFile::open(spec);
  EXPECT_EQ(file.dtype(), softk::DType::bf16);
  EXPECT_EQ(file.shape(), (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(read_all_rows(file), second);  // from its offset, past the first tensor
  spec.tensor = "missing";
  expect_error([&] { LogitsFile::open(spec); }, path, "no tensor named 'missing' (has: hidden, logits)");
  spec.tensor = "__metadata__";
  expect_error([&] { LogitsFile::open(spec); }, path, "no tensor named '__metadata__'");
}

TEST_F(ReaderTest, SafetensorsBadInputs) {
  const std::string data = bytes_of(iota_floats(6));
  expect_open_error(put("i64.safetensors", safetensors_file({{"x", "I64", {3}, std::string(24, '\0')}})),
                    "unsupported dtype I64");
  expect_open_error(put("f64.safetensors", safetensors_file({{"x", "F64", {3}, std::string(24, '\0')}})),
                    "unsupported dtype F64");
  expect_open_error(
      put("past.safetensors",
          safetensors_with_header(R"({"x":{"dtype":"F32","shape":[6],"data_offsets":[0,24]}})", data.substr(0, 20))),
      "run past the end of the file");
  expect_open_error(put("span.safetensors",
                        safetensors_with_header(R"({"x":{"dtype":"F32","shape":[2,6],"data_offsets":[0,24]}})", data)),
                    "tensor 'x' spans 24 data bytes but shape [2, 6] of f32 needs 48");
  expect_open_error(put("json.safetensors", safetensors_with_header(R"({"x":{"dtype":"F32",)", data)),
                    "malformed .safetensors header (not a JSON object)");
  expect_open_error(put("array.safetensors", safetensors_with_header("[1, 2]", data)), "not a JSON object");
  expect_open_error(put("none.safetensors", safetensors_with_header(R"({"__metadata__":{}})", data)),
                    "holds no tensors");
  expect_open_error(put("offsets.safetensors",
                        safetensors_with_header(R"({"x":{"dtype":"F32","shape":[6],"data_offsets":[24,0]}})", data)),
                    "data_offsets");
  expect_open_error(put("shape.safetensors",
                        safetensors_with_header(R"({"x":{"dtype":"F32","shape":[-6],"data_offsets":[0,24]}})", data)),
                    "shape entry");
  expect_open_error(
      put("dtype.safetensors", safetensors_with_header(R"({"x":{"dtype":7,"shape":[6],"data_offsets":[0,24]}})", data)),
      "'dtype'");
  std::string long_header = safetensors_file({{"x", "F32", {6}, data}});
  long_header[5] = 1;  // header length 2^40
  expect_open_error(put("length.safetensors", long_header), "implausible header length");
  expect_open_error(put("cut.safetensors", safetensors_file({{"x", "F32", {6}, data}}).substr(0, 30)),
                    "truncated .safetensors header");
  expect_open_error(put("tiny.safetensors", "abc"), "truncated .safetensors file");
}

TEST_F(ReaderTest, FormatSniffedFromMagicWithoutExtension) {
  const std::string data = bytes_of(iota_floats(6));
  EXPECT_EQ(open_path(put("logits.bin", npy_file("<f4", {6}, data))).format(), FileFormat::npy);
  EXPECT_EQ(open_path(put("logits", safetensors_file({{"x", "F32", {6}, data}}))).format(), FileFormat::safetensors);
  EXPECT_EQ(open_path(put("logits.NPY", npy_file("<f4", {6}, data))).format(), FileFormat::npy);
}

// ---- raw ------------------------------------------------------------------------------------

TEST_F(ReaderTest, RawNeedsShapeAndDtype) {
  const std::vector<float> values = iota_floats(2 * 3 * 4);
  const std::string path = put("logits.raw", bytes_of(values));
  expect_open_error(path, "for raw binary logits give --shape and --dtype");

  InputSpec spec;
  spec.path = path;
  spec.shape = {2, 3, 4};
  expect_error([&] { LogitsFile::open(spec); }, path, "give --shape and --dtype");
  spec.dtype = softk::DType::f32;
  const LogitsFile file = LogitsFile::open(spec);
  EXPECT_EQ(file.format(), FileFormat::raw);
  EXPECT_EQ(file.rows(), 6);
  EXPECT_EQ(read_all_rows(file), bytes_of(values));

  spec.dtype = softk::DType::bf16;  // the same bytes read as bf16 hold twice the elements
  spec.shape = {4, 12};
  EXPECT_EQ(LogitsFile::open(spec).vocab(), 12);
  spec.shape = {2, 3, 5};
  expect_error([&] { LogitsFile::open(spec); }, path,
               "the raw file holds 96 data bytes but shape [2, 3, 5] of bf16 needs 60");
  spec.shape = {1000};
  expect_error([&] { LogitsFile::open(spec); }, path, "(truncated?)");
}

TEST(ParseOptions, Shape) {
  EXPECT_EQ(sampler::parse_shape("4096"), (std::vector<int64_t>{4096}));
  EXPECT_EQ(sampler::parse_shape("4,4096"), (std::vector<int64_t>{4, 4096}));
  EXPECT_EQ(sampler::parse_shape("2,3,4096"), (std::vector<int64_t>{2, 3, 4096}));
  for (const std::string bad :
       {"", "0", "2,0", "2,,3", "1,2,3,4", "-1", "a", "2x3", " 2", "2,", "99999999999999999999"}) {
    try {
      sampler::parse_shape(bad);
      ADD_FAILURE() << "accepted --shape '" << bad << "'";
    } catch (const sampler::Error& e) {
      EXPECT_EQ(std::string(e.what()).rfind("--shape: ", 0), 0u) << e.what();
    }
  }
}

TEST(ParseOptions, Dtype) {
  EXPECT_EQ(sampler::parse_dtype("f32"), softk::DType::f32);
  EXPECT_EQ(sampler::parse_dtype("f16"), softk::DType::f16);
  EXPECT_EQ(sampler::parse_dtype("bf16"), softk::DType::bf16);
  EXPECT_THROW(sampler::parse_dtype("float32"), sampler::Error);
  EXPECT_THROW(sampler::parse_dtype(""), sampler::Error);
}

TEST(RowPosition, FollowsTheLeadingDims) {
  EXPECT_EQ(sampler::row_position({2, 3, 7}, 4), (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(sampler::row_position({5, 7}, 4), (std::vector<int64_t>{4}));
  EXPECT_EQ(sampler::row_position({7}, 0), (std::vector<int64_t>{}));
}

}  // namespace
