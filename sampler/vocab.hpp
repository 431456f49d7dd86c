// sampler — token strings for token ids, from the vocabulary files people have at hand.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>

namespace sampler {

class Vocab {
 public:
  /// Loads a vocabulary. A file ending in .json is either a Hugging Face tokenizer.json (its
  /// model.vocab, a {token: id} map or a Unigram [[token, score], ...] list, plus added_tokens)
  /// or a vocab.json {token: id} map. Any other file holds one token per line, line i being id i
  /// (a trailing '\r' is dropped). Throws sampler::Error naming the file and the problem.
  static Vocab load(const std::string& path);

  /// The token for `id`, or nullptr when the vocabulary has none (ids past its end are common:
  /// models pad their vocabulary dim beyond the tokenizer's size).
  const std::string* token(int64_t id) const;
  std::size_t size() const { return tokens_.size(); }

 private:
  std::unordered_map<int64_t, std::string> tokens_;
};

}  // namespace sampler
