#include "npy.hpp"

#include <cctype>
#include <cstring>
#include <limits>
#include <map>

#include "error.hpp"

namespace sampler {
namespace {

// Headers are a few hundred bytes; a claimed length beyond this is corruption, and refusing it
// keeps a flipped length byte from turning into a multi-gigabyte allocation.
constexpr uint32_t kMaxHeaderBytes = 1u << 20;

/// One value of the header's Python literal: only what a .npy header can hold.
struct PyValue {
  enum class Kind { string, boolean, none, integer, sequence, dict } kind = Kind::none;
  std::string text;                        // string
  bool flag = false;                       // boolean
  int64_t number = 0;                      // integer
  std::vector<PyValue> items;              // sequence (tuple or list)
  std::map<std::string, PyValue> entries;  // dict
};

/// Recursive-descent parser for the Python literal subset NumPy writes (and the legacy 'L'
/// suffix of Python 2 integers). Any deviation is a malformed header, never a crash: nesting is
/// bounded and integers are overflow-checked.
class PyLiteralParser {
 public:
  PyLiteralParser(std::string_view text, const std::string& path) : text_(text), path_(path) {}

  PyValue parse_document() {
    PyValue value = parse_value(0);
    skip_space();
    if (at_ != text_.size()) fail("unexpected text after the header dict");
    return value;
  }

 private:
  static constexpr int kMaxDepth = 8;  // descr of a structured dtype nests a few levels; more is junk

  [[noreturn]] void fail(const std::string& what) const {
    throw file_error(path_, "malformed .npy header: " + what + " at header byte " + std::to_string(at_));
  }
  void skip_space() {
    while (at_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[at_]))) ++at_;
  }
  bool consume(char c) {
    skip_space();
    if (at_ < text_.size() && text_[at_] == c) {
      ++at_;
      return true;
    }
    return false;
  }
  bool consume_word(std::string_view word) {
    if (text_.substr(at_, word.size()) != word) return false;
    at_ += word.size();
    return true;
  }

  PyValue parse_value(int depth) {
    if (depth > kMaxDepth) fail("nesting too deep");
    skip_space();
    if (at_ >= text_.size()) fail("unexpected end");
    const char c = text_[at_];
    PyValue value;
    if (c == '\'' || c == '"') {
      value.kind = PyValue::Kind::string;
      value.text = parse_string();
    } else if (c == '(' || c == '[') {
      value.kind = PyValue::Kind::sequence;
      value.items = parse_sequence(c == '(' ? ')' : ']', depth);
    } else if (c == '{') {
      value.kind = PyValue::Kind::dict;
      value.entries = parse_dict(depth);
    } else if (c == '-' || std::isdigit(static_cast<unsigned char>(c))) {
      value.kind = PyValue::Kind::integer;
      value.number = parse_integer();
    } else if (consume_word("True")) {
      value.kind = PyValue::Kind::boolean;
      value.flag = true;
    } else if (consume_word("False")) {
      value.kind = PyValue::Kind::boolean;
    } else if (consume_word("None")) {
      value.kind = PyValue::Kind::none;
    } else {
      fail(std::string("unexpected character '") + c + "'");
    }
    return value;
  }

  std::string parse_string() {
    const char quote = text_[at_++];
    std::string out;
    while (at_ < text_.size() && text_[at_] != quote) {
      // NumPy's own strings never need escapes; keep the escaped character as is.
      if (text_[at_] == '\\' && at_ + 1 < text_.size()) ++at_;
      out += text_[at_++];
    }
    if (at_ >= text_.size()) fail("unterminated string");
    ++at_;
    return out;
  }

  int64_t parse_integer() {
    const bool negative = text_[at_] == '-';
    if (negative) ++at_;
    if (at_ >= text_.size() || !std::isdigit(static_cast<unsigned char>(text_[at_]))) fail("bad integer");
    int64_t magnitude = 0;
    while (at_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[at_]))) {
      const int digit = text_[at_++] - '0';
      if (magnitude > (std::numeric_limits<int64_t>::max() - digit) / 10) fail("integer out of range");
      magnitude = magnitude * 10 + digit;
    }
    if (at_ < text_.size() && text_[at_] == 'L') ++at_;
    return negative ? -magnitude : magnitude;
  }

  std::vector<PyValue> parse_sequence(char close, int depth) {
    ++at_;
    std::vector<PyValue> items;
    while (!consume(close)) {
      if (!items.empty() && !consume(',')) fail("expected ',' in a tuple or list");
      if (consume(close)) break;  // trailing comma, as in (4096,)
      items.push_back(parse_value(depth + 1));
    }
    return items;
  }

  std::map<std::string, PyValue> parse_dict(int depth) {
    ++at_;
    std::map<std::string, PyValue> entries;
    bool first = true;
    while (!consume('}')) {
      if (!first && !consume(',')) fail("expected ',' between dict entries");
      first = false;
      if (consume('}')) break;  // trailing comma, as NumPy writes
      skip_space();
      if (at_ >= text_.size() || (text_[at_] != '\'' && text_[at_] != '"')) fail("expected a string key");
      std::string key = parse_string();
      if (!consume(':')) fail("expected ':' after key '" + key + "'");
      entries[key] = parse_value(depth + 1);
    }
    return entries;
  }

  std::string_view text_;
  const std::string& path_;
  std::size_t at_ = 0;
};

uint32_t read_le(const std::string& bytes, std::size_t at, std::size_t width) {
  uint32_t value = 0;
  for (std::size_t i = 0; i < width; ++i) value |= uint32_t{static_cast<unsigned char>(bytes[at + i])} << (8 * i);
  return value;
}

}  // namespace

NpyHeader read_npy_header(const InputFile& file) {
  const std::string& path = file.path();
  const std::string prefix = file.read_prefix(12);
  if (prefix.size() < kNpyMagic.size() || std::string_view(prefix).substr(0, kNpyMagic.size()) != kNpyMagic) {
    throw file_error(path, "not a .npy file (bad magic; expected \\x93NUMPY)");
  }
  if (prefix.size() < 10) throw file_error(path, "truncated .npy header");
  const int major = static_cast<unsigned char>(prefix[6]);
  const int minor = static_cast<unsigned char>(prefix[7]);
  // Version 1 stores the header length in 2 bytes, versions 2 and 3 in 4 (3 only changes the
  // header's text encoding to UTF-8, which this ASCII-only reader does not care about).
  std::size_t length_bytes = 0;
  if (major == 1 && minor == 0)
    length_bytes = 2;
  else if ((major == 2 || major == 3) && minor == 0)
    length_bytes = 4;
  else
    throw file_error(path, "unsupported .npy version " + std::to_string(major) + "." + std::to_string(minor));
  if (prefix.size() < 8 + length_bytes) throw file_error(path, "truncated .npy header");
  const uint32_t header_bytes = read_le(prefix, 8, length_bytes);
  const int64_t header_start = static_cast<int64_t>(8 + length_bytes);
  if (header_bytes > kMaxHeaderBytes) {
    throw file_error(path, "implausible .npy header length " + std::to_string(header_bytes));
  }
  if (header_start + header_bytes > file.size()) {
    throw file_error(path, "truncated .npy header (claims " + std::to_string(header_bytes) + " bytes, file holds " +
                               std::to_string(file.size() - header_start) + ")");
  }
  std::string text(header_bytes, '\0');
  file.read_at(header_start, text.data(), text.size());

  const PyValue dict = PyLiteralParser(text, path).parse_document();
  if (dict.kind != PyValue::Kind::dict) throw file_error(path, "malformed .npy header: not a dict");
  const auto field = [&](const char* key, PyValue::Kind kind, const char* what) -> const PyValue& {
    const auto it = dict.entries.find(key);
    if (it == dict.entries.end()) throw file_error(path, std::string("malformed .npy header: no '") + key + "'");
    if (it->second.kind != kind)
      throw file_error(path, std::string("malformed .npy header: '") + key + "' is not " + what);
    return it->second;
  };

  NpyHeader header;
  const auto descr = dict.entries.find("descr");
  if (descr != dict.entries.end() && descr->second.kind == PyValue::Kind::sequence) {
    throw file_error(path, "unsupported dtype: a structured array (descr is a list of fields)");
  }
  header.descr = field("descr", PyValue::Kind::string, "a string").text;
  header.fortran_order = field("fortran_order", PyValue::Kind::boolean, "True or False").flag;
  for (const PyValue& dim : field("shape", PyValue::Kind::sequence, "a tuple").items) {
    if (dim.kind != PyValue::Kind::integer || dim.number < 0) {
      throw file_error(path, "malformed .npy header: 'shape' holds something other than a non-negative integer");
    }
    header.shape.push_back(dim.number);
  }
  header.data_offset = header_start + header_bytes;
  return header;
}

std::string make_npy_header(const std::string& descr, const std::vector<int64_t>& shape) {
  std::string dict = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': (";
  for (std::size_t i = 0; i < shape.size(); ++i) dict += (i == 0 ? "" : ", ") + std::to_string(shape[i]);
  if (shape.size() == 1) dict += ',';  // a Python 1-tuple needs its comma: (4096,)
  dict += "), }";
  // Magic (6) + version (2) + length (2) + dict, padded with spaces to a multiple of 64 bytes,
  // the last byte a newline.
  constexpr std::size_t kPrefix = 10;
  const std::size_t total = (kPrefix + dict.size() + 1 + 63) / 64 * 64;
  dict.append(total - kPrefix - dict.size() - 1, ' ');
  dict += '\n';
  const std::size_t length = dict.size();
  std::string header(kNpyMagic);
  header += '\x01';
  header += '\x00';
  header += static_cast<char>(length & 0xff);
  header += static_cast<char>((length >> 8) & 0xff);
  return header + dict;
}

}  // namespace sampler
