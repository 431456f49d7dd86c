// One top-k test case run against the CPU oracle, shared by the top-k suites (topk_test.cpp and
// topk_split_k_test.cpp): the case description and its name, the one-entry input / oracle caches
// and check_case(), which runs the case and judges it:
//  - a refusal is allowed only where the contract demands one (must_refuse: fused and split_k
//    forced beyond kMaxFastTopK) and must name K and the algorithm, with the outputs untouched;
//  - otherwise indices must equal the oracle's EXACTLY (the contract is a total order),
//    probabilities / log-probs within the tolerance of compare.hpp, row_status equal, nothing
//    written past an output, and the oracle-free properties of oracle.hpp hold.
#pragma once

#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "common/bad_arguments.hpp"
#include "common/compare.hpp"
#include "common/gpu.hpp"
#include "common/inputs.hpp"
#include "common/oracle.hpp"
#include "common/runners.hpp"
#include "softk/topk.hpp"

namespace softk_test {

struct TopkCase {
  TopkImpl impl = TopkImpl::automatic;
  softk::DType dtype = softk::DType::f32;
  int64_t V = 1;
  int64_t rows = 1;
  int32_t k = 1;
  Dist dist = Dist::llm_like;
  DistParams params;
  Layout layout;
  float temperature = 1.0f;
  bool log_probs = false;
  std::string name;
};

inline void PrintTo(const TopkCase& c, std::ostream* os) { *os << c.name; }

/// A case with its six defining fields; the rest (params, layout, temperature, log_probs) keep
/// their defaults unless the caller sets them.
inline TopkCase topk_case(TopkImpl impl, softk::DType dtype, int64_t V, int64_t rows, int32_t k, Dist dist) {
  TopkCase c;
  c.impl = impl;
  c.dtype = dtype;
  c.V = V;
  c.rows = rows;
  c.k = k;
  c.dist = dist;
  return c;
}

inline std::string case_name(const TopkCase& c, bool show_dist) {
  std::string n = std::string(dtype_name(c.dtype)) + "_V" + std::to_string(c.V) + "_R" + std::to_string(c.rows) + "_K" +
                  std::to_string(c.k);
  if (show_dist) n += std::string("_") + dist_name(c.dist);
  if (c.dist == Dist::adversarial_stride) {
    n += "_S" + std::to_string(c.params.stride) + (c.params.tied_winners ? "_tied" : "");
    if (c.params.count != c.k) n += "_N" + std::to_string(c.params.count);  // winners other than K
    if (c.params.lanes > 1) n += "_L" + std::to_string(c.params.lanes);
  }
  if (c.layout.row_stride) n += "_stride" + std::to_string(c.layout.row_stride);
  if (c.layout.offset) n += "_off" + std::to_string(c.layout.offset);
  if (c.log_probs) n += "_logprobs";
  if (c.temperature != 1.0f) {
    std::string t = std::to_string(c.temperature);
    while (t.back() == '0') t.pop_back();
    for (char& ch : t)
      if (ch == '.') ch = 'p';
    n += "_T" + t;
  }
  return n + "_" + impl_name(c.impl);
}

struct PreparedTopkInput {
  HostLogits host;
  DeviceLogits dev;
};
struct PreparedTopkOracle {
  TopkOracle oracle;
};

inline std::string input_key(const TopkCase& c) {
  return std::string(dtype_name(c.dtype)) + "/" + std::to_string(c.V) + "/" + std::to_string(c.rows) + "/" +
         dist_name(c.dist) + "/" + std::to_string(c.params.stride) + "/" + std::to_string(c.params.count) + "/" +
         std::to_string(c.params.channel) + "/" + std::to_string(c.params.tied_winners) + "/" +
         std::to_string(c.params.lanes) + "/" + std::to_string(c.params.lane_gap) + "/" +
         std::to_string(c.layout.row_stride) + "/" + std::to_string(c.layout.offset);
}
inline std::string oracle_key(const TopkCase& c) {
  return input_key(c) + "/" + std::to_string(c.k) + "/" + std::to_string(c.temperature) + "/" + std::to_string(c.log_probs);
}

// One cache per program (inline functions: every test file shares them), so consecutive cases
// of the same input reuse it whichever file they come from.
inline LastCase<PreparedTopkInput>& topk_input_cache() {
  static LastCase<PreparedTopkInput> c;
  return c;
}
inline LastCase<PreparedTopkOracle>& topk_oracle_cache() {
  static LastCase<PreparedTopkOracle> c;
  return c;
}

inline const PreparedTopkInput& prepare_input(const TopkCase& c, cudaStream_t stream) {
  return topk_input_cache().get(input_key(c), [&] {
    PreparedTopkInput p;
    const auto [batch, steps] = split_rows(c.rows);
    p.host = make_logits(c.dtype, batch, steps, c.V, c.dist, c.params, c.layout, 4242);
    p.dev = to_device(p.host, stream);
    return p;
  });
}
inline const TopkOracle& prepare_oracle(const TopkCase& c, const HostLogits& h) {
  return topk_oracle_cache()
      .get(oracle_key(c), [&] { return PreparedTopkOracle{oracle_topk(h, c.k, c.temperature, c.log_probs)}; })
      .oracle;
}

/// Runs the case and checks it against the oracle and the oracle-free properties.
inline void check_case(const TopkCase& c, cudaStream_t stream) {
  const PreparedTopkInput& p = prepare_input(c, stream);
  TopkCall call;
  call.impl = c.impl;
  call.k = c.k;
  call.temperature = c.temperature;
  call.log_probs = c.log_probs;
  call.with_status = c.rows != 3;  // rows == 3 exercises the null row_status path
  const TopkRun run = run_topk(p.dev.view, call, stream);
  if (run.refused) {
    ASSERT_TRUE(must_refuse(c.impl, c.k)) << impl_name(c.impl) << " refused K=" << c.k << ": " << run.error;
    EXPECT_TRUE(contains_token(run.error, std::to_string(c.k))) << "refusal must name K: " << run.error;
    EXPECT_TRUE(names_topk_algorithm(run.error, c.impl)) << "refusal must name the algorithm: " << run.error;
    EXPECT_TRUE(run.untouched_after_refusal) << "a refused call wrote to its outputs";
    return;
  }
  ASSERT_FALSE(must_refuse(c.impl, c.k)) << "forced " << impl_name(c.impl) << " accepted K=" << c.k << " > kMaxFastTopK";
  EXPECT_EQ(run.guard_violation, "");
  const TopkOracle& o = prepare_oracle(c, p.host);
  EXPECT_TRUE(all_equal(run.indices, o.indices, c.rows, c.k, "indices vs CPU oracle (must be exact)"));
  EXPECT_TRUE(all_close(run.probs, o.probs, c.rows, c.k,
                        c.log_probs ? log_prob_tolerance() : prob_tolerance(softk::DType::f32),
                        c.log_probs ? "log-probs vs CPU oracle" : "probs vs CPU oracle"));
  if (call.with_status) {
    EXPECT_TRUE(all_equal(run.status, o.status, c.rows, 1, "row_status"));
  }
  EXPECT_TRUE(topk_properties(p.host, c.k, run.probs, run.indices));
}

// Frees the cached device input at the end of the run, while the CUDA runtime is still up
// (a static destructor would run after it is torn down). An inline variable: registered once
// however many test files include this header.
struct ReleaseTopkCaches : ::testing::Environment {
  void TearDown() override {
    topk_input_cache().clear();
    topk_oracle_cache().clear();
  }
};
[[maybe_unused]] inline ::testing::Environment* const kReleaseTopkCaches =
    ::testing::AddGlobalTestEnvironment(new ReleaseTopkCaches);

inline std::vector<TopkCase> finish(std::vector<TopkCase> cases, bool show_dist) {
  for (auto& c : cases) c.name = case_name(c, show_dist);
  return cases;
}

inline std::string param_name(const ::testing::TestParamInfo<TopkCase>& info) { return info.param.name; }

}  // namespace softk_test
