#include "vocab.hpp"

#include <limits>
#include <new>
#include <nlohmann/json.hpp>

#include "error.hpp"
#include "input_file.hpp"

namespace sampler {
namespace {

bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

/// A token id from JSON: an integer in [0, 2^31), the range of softk's int32 indices.
bool to_id(const nlohmann::json& value, int64_t& id) {
  if (!value.is_number_integer()) return false;
  if (value.is_number_unsigned()) {
    if (value.get<uint64_t>() >= (uint64_t{1} << 31)) return false;
    id = static_cast<int64_t>(value.get<uint64_t>());
    return true;
  }
  id = value.get<int64_t>();
  return id >= 0 && id < (int64_t{1} << 31);
}

}  // namespace

// A function-try-block: out of memory anywhere in the load (the file's text, the parse, the map)
// is this file's problem, and says so.
Vocab Vocab::load(const std::string& path) try {
  const InputFile file(path);
  std::string text(static_cast<std::size_t>(file.size()), '\0');
  file.read_at(0, text.data(), text.size());

  Vocab vocab;
  if (!ends_with(path, ".json")) {
    std::size_t start = 0;
    for (int64_t id = 0; start < text.size(); ++id) {
      std::size_t end = text.find('\n', start);
      if (end == std::string::npos) end = text.size();
      std::string token = text.substr(start, end - start);
      if (!token.empty() && token.back() == '\r') token.pop_back();
      vocab.tokens_.emplace(id, std::move(token));
      start = end + 1;
    }
    return vocab;
  }

  const nlohmann::json json = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) throw file_error(path, "not valid JSON");
  const auto bad = [&](const std::string& what) { return file_error(path, "bad vocabulary: " + what); };
  const auto add_map = [&](const nlohmann::json& map) {
    for (const auto& item : map.items()) {
      int64_t id = 0;
      if (!to_id(item.value(), id)) throw bad("token '" + item.key() + "' has no integer id in [0, 2^31)");
      vocab.tokens_[id] = item.key();
    }
  };

  const auto model = json.is_object() ? json.find("model") : json.end();
  if (model == json.end()) {
    if (!json.is_object()) throw bad("expected a tokenizer.json or a vocab.json {token: id} object");
    add_map(json);
    return vocab;
  }
  const auto entries = model->is_object() ? model->find("vocab") : model->end();
  if (entries == model->end()) throw bad("tokenizer.json has no model.vocab");
  if (entries->is_object()) {
    add_map(*entries);
  } else if (entries->is_array()) {
    // Unigram models list [token, score] pairs; a token's id is its position.
    int64_t id = 0;
    for (const auto& pair : *entries) {
      if (!pair.is_array() || pair.empty() || !pair[0].is_string())
        throw bad("model.vocab entry " + std::to_string(id) + " is not [token, score]");
      vocab.tokens_[id++] = pair[0].get<std::string>();
    }
  } else {
    throw bad("model.vocab is neither a {token: id} map nor a [[token, score], ...] list");
  }
  // Special tokens (e.g. Llama 3's <|eot_id|>) often live only in added_tokens.
  const auto added = json.find("added_tokens");
  if (added != json.end() && added->is_array()) {
    for (const auto& token : *added) {
      int64_t id = 0;
      const auto content = token.is_object() ? token.find("content") : token.end();
      if (content == token.end() || !content->is_string() || !to_id(token.value("id", nlohmann::json()), id)) {
        throw bad("an added_tokens entry lacks an integer 'id' or a string 'content'");
      }
      vocab.tokens_[id] = content->get<std::string>();
    }
  }
  return vocab;
} catch (const std::bad_alloc&) {
  throw file_error(path, "out of memory reading the vocabulary");
}

const std::string* Vocab::token(int64_t id) const {
  const auto it = tokens_.find(id);
  return it == tokens_.end() ? nullptr : &it->second;
}

}  // namespace sampler
