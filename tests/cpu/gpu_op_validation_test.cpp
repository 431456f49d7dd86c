// Argument validation of the GPU ops (softk::softmax / topk / sample) and of the CUB reference, run in
// the CPU test binary on purpose: DESIGN.md says bad arguments throw softk::Error *before
// anything is launched*, so these must pass on a machine with no GPU and no driver. Any CUDA
// call made before validation fails there (softk::CudaError, reported as such by the helper);
// on a GPU machine the fake pointers would fault instead.
//
// Only calls whose validation must fail are made here; valid calls belong to tests/gpu.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common/bad_arguments.hpp"
#include "softk/reference.hpp"
#include "softk/sample.hpp"
#include "softk/sampler.hpp"
#include "softk/softmax.hpp"
#include "softk/topk.hpp"

namespace {

using namespace softk_test;
using softk::DType;

// Plenty of (fake) workspace, so only the argument under test is wrong.
constexpr std::size_t kBigWorkspace = std::size_t{1} << 40;

float* fake_probs() { return static_cast<float*>(fake_pointer(2)); }
int32_t* fake_indices() { return static_cast<int32_t*>(fake_pointer(3)); }
void* fake_workspace() { return fake_pointer(4); }

const softk::SoftmaxAlgorithm kSoftmaxAlgorithms[] = {
    softk::SoftmaxAlgorithm::automatic, softk::SoftmaxAlgorithm::register_resident, softk::SoftmaxAlgorithm::shared_memory,
    softk::SoftmaxAlgorithm::two_pass, softk::SoftmaxAlgorithm::split_k};
const softk::TopkAlgorithm kTopkAlgorithms[] = {softk::TopkAlgorithm::automatic, softk::TopkAlgorithm::fused,
                                                softk::TopkAlgorithm::radix_select, softk::TopkAlgorithm::split_k};

// ---------------------------------------------------------------------------------------------
// softk::softmax

void gpu_softmax(const softk::LogitsView& v, void* out, softk::SoftmaxOptions o, void* ws = fake_workspace(),
                 std::size_t bytes = kBigWorkspace) {
  softk::softmax(v, out, o, ws, bytes, /*stream=*/nullptr);
}

TEST(GpuOpValidation, SoftmaxRejectsBadLogitsForEveryAlgorithm) {
  for (auto algorithm : kSoftmaxAlgorithms)
    for (const auto& c : bad_logits_cases()) {
      softk::LogitsView v = valid_fake_logits();
      c.mutate(v);
      softk::SoftmaxOptions o;
      o.algorithm = algorithm;
      EXPECT_TRUE(throws_error_naming([&] { gpu_softmax(v, fake_pointer(5), o); }, c.needles))
          << c.name << " / " << softk::to_string(algorithm);
    }
}

TEST(GpuOpValidation, SoftmaxRejectsNullOutBadTemperatureAndOutDtype) {
  for (auto algorithm : kSoftmaxAlgorithms) {
    SCOPED_TRACE(softk::to_string(algorithm));
    softk::SoftmaxOptions o;
    o.algorithm = algorithm;
    EXPECT_TRUE(throws_error_naming([&] { gpu_softmax(valid_fake_logits(), nullptr, o); }, {"out", "null"}));
    for (const auto& t : bad_temperatures()) {
      softk::SoftmaxOptions ot = o;
      ot.temperature = t.value;
      EXPECT_TRUE(throws_error_naming([&] { gpu_softmax(valid_fake_logits(), fake_pointer(5), ot); }, {"temperature", t.shown}))
          << t.name;
    }
    for (const auto& c : bad_out_dtypes()) {
      softk::LogitsView v = valid_fake_logits();
      v.dtype = c.input;
      softk::SoftmaxOptions od = o;
      od.out_dtype = c.out;
      EXPECT_TRUE(throws_error_naming([&] { gpu_softmax(v, fake_pointer(5), od); }, {"out_dtype", c.shown})) << c.name;
    }
  }
}

TEST(GpuOpValidation, SoftmaxRejectsOutOfRangeOutDtypeNamingItsValue) {
  softk::SoftmaxOptions o;
  o.out_dtype = static_cast<DType>(9);
  EXPECT_TRUE(throws_error_naming([&] { gpu_softmax(valid_fake_logits(), fake_pointer(5), o); }, {"out_dtype", "9"}));
}

// out must not alias the logits (softmax.hpp): same pointer, valid otherwise.
TEST(GpuOpValidation, SoftmaxRejectsOutAliasingLogits) {
  const softk::LogitsView v = valid_fake_logits();
  EXPECT_TRUE(throws_error_naming([&] { gpu_softmax(v, const_cast<void*>(v.data), {}); }, {"out"}));
}

// Outputs off their element alignment: a kernel's store there would fault, and a misaligned
// address leaves the CUDA context unusable, so they are refused as null ones are.
TEST(GpuOpValidation, SoftmaxRejectsMisalignedOutAndRowStatus) {
  for (auto algorithm : kSoftmaxAlgorithms) {
    SCOPED_TRACE(softk::to_string(algorithm));
    softk::SoftmaxOptions o;
    o.algorithm = algorithm;
    EXPECT_TRUE(throws_error_naming([&] { gpu_softmax(valid_fake_logits(), off_alignment(fake_pointer(5)), o); },
                                    {"out", "aligned"}));
    softk::SoftmaxOptions with_status = o;
    with_status.row_status = off_alignment(static_cast<int32_t*>(fake_pointer(6)));
    EXPECT_TRUE(throws_error_naming([&] { gpu_softmax(valid_fake_logits(), fake_pointer(5), with_status); },
                                    {"row_status", "aligned"}));
  }
  softk::LogitsView half = valid_fake_logits();  // 16-bit out: two bytes apart is aligned, one is not
  half.dtype = DType::bf16;
  softk::SoftmaxOptions o;
  o.out_dtype = DType::bf16;
  EXPECT_TRUE(throws_error_naming([&] { gpu_softmax(half, off_alignment(fake_pointer(5), 1), o); }, {"out", "aligned"}));
}

TEST(GpuOpValidation, SoftmaxRejectsUnknownAlgorithm) {
  softk::SoftmaxOptions o;
  o.algorithm = static_cast<softk::SoftmaxAlgorithm>(42);
  EXPECT_TRUE(throws_error_naming([&] { gpu_softmax(valid_fake_logits(), fake_pointer(5), o); }, {"algorithm", "42"}));
}

// A shape/option set whose softmax needs workspace (split-k keeps per-chunk (m, d) states).
// softmax_workspace_size depends only on its arguments (softmax.hpp), so it is callable here.
bool find_softmax_workspace_case(softk::LogitsView& v, softk::SoftmaxOptions& o, std::size_t& need) {
  for (auto algorithm : kSoftmaxAlgorithms)
    for (int64_t vocab : {int64_t{1} << 24, int64_t{1} << 20, int64_t{256000}})
      for (int64_t rows : {1, 4}) {
        v = valid_fake_logits();
        v.vocab = vocab;
        v.batch = rows;
        v.steps = 1;
        o = {};
        o.algorithm = algorithm;
        try {
          need = softk::softmax_workspace_size(v, o);
        } catch (const softk::Error&) {
          continue;  // e.g. a forced algorithm that cannot hold this V
        }
        if (need > 0) return true;
      }
  return false;
}

TEST(GpuOpValidation, SoftmaxRejectsTooSmallOrNullWorkspace) {
  softk::LogitsView v;
  softk::SoftmaxOptions o;
  std::size_t need = 0;
  if (!find_softmax_workspace_case(v, o, need)) GTEST_SKIP() << "no softmax configuration needs workspace";
  SCOPED_TRACE(std::string("algorithm ") + softk::to_string(o.algorithm) + ", V " + std::to_string(v.vocab) + ", need " +
               std::to_string(need));
  EXPECT_TRUE(throws_error_naming([&] { gpu_softmax(v, fake_pointer(5), o, fake_workspace(), need - 1); },
                                  {"workspace_bytes", std::to_string(need - 1)}));
  EXPECT_TRUE(throws_error_naming([&] { gpu_softmax(v, fake_pointer(5), o, fake_workspace(), 0); }, {"workspace_bytes", "0"}));
  EXPECT_TRUE(throws_error_naming([&] { gpu_softmax(v, fake_pointer(5), o, nullptr, need); }, {"workspace", "null"}));
  EXPECT_TRUE(throws_error_naming([&] { gpu_softmax(v, fake_pointer(5), o, off_alignment(fake_workspace(), 8), need); },
                                  {"workspace", "aligned"}));
}

// ---------------------------------------------------------------------------------------------
// softk::topk

void gpu_topk(const softk::LogitsView& v, int32_t k, float* probs, int32_t* idx, softk::TopkOptions o,
              void* ws = fake_workspace(), std::size_t bytes = kBigWorkspace) {
  softk::topk(v, k, probs, idx, o, ws, bytes, /*stream=*/nullptr);
}

TEST(GpuOpValidation, TopkRejectsBadLogitsForEveryAlgorithm) {
  for (auto algorithm : kTopkAlgorithms)
    for (const auto& c : bad_logits_cases()) {
      softk::LogitsView v = valid_fake_logits();
      c.mutate(v);
      softk::TopkOptions o;
      o.algorithm = algorithm;
      EXPECT_TRUE(throws_error_naming([&] { gpu_topk(v, 5, fake_probs(), fake_indices(), o); }, c.needles))
          << c.name << " / " << softk::to_string(algorithm);
    }
}

TEST(GpuOpValidation, TopkRejectsBadKNullOutputsAndTemperature) {
  for (auto algorithm : kTopkAlgorithms) {
    SCOPED_TRACE(softk::to_string(algorithm));
    softk::TopkOptions o;
    o.algorithm = algorithm;
    for (int32_t k : {0, -3, 1001, INT32_MAX})
      EXPECT_TRUE(throws_error_naming([&] { gpu_topk(valid_fake_logits(), k, fake_probs(), fake_indices(), o); },
                                      {"k", std::to_string(k)}))
          << "k = " << k;
    EXPECT_TRUE(throws_error_naming([&] { gpu_topk(valid_fake_logits(), 5, nullptr, fake_indices(), o); }, {"probs", "null"}));
    EXPECT_TRUE(throws_error_naming([&] { gpu_topk(valid_fake_logits(), 5, fake_probs(), nullptr, o); }, {"indices", "null"}));
    EXPECT_TRUE(throws_error_naming([&] { gpu_topk(valid_fake_logits(), 5, off_alignment(fake_probs()), fake_indices(), o); },
                                    {"probs", "aligned"}));
    EXPECT_TRUE(throws_error_naming([&] { gpu_topk(valid_fake_logits(), 5, fake_probs(), off_alignment(fake_indices()), o); },
                                    {"indices", "aligned"}));
    softk::TopkOptions with_status = o;
    with_status.row_status = off_alignment(static_cast<int32_t*>(fake_pointer(6)));
    EXPECT_TRUE(throws_error_naming([&] { gpu_topk(valid_fake_logits(), 5, fake_probs(), fake_indices(), with_status); },
                                    {"row_status", "aligned"}));
    for (const auto& t : bad_temperatures()) {
      softk::TopkOptions ot = o;
      ot.temperature = t.value;
      EXPECT_TRUE(throws_error_naming([&] { gpu_topk(valid_fake_logits(), 5, fake_probs(), fake_indices(), ot); },
                                      {"temperature", t.shown}))
          << t.name;
    }
  }
}

// fused and split_k serve K <= kMaxFastTopK only (topk.hpp); a larger K forced onto either is
// an argument error, known from the arguments alone, so it too must come before any CUDA call
// (split_k's size query reads the SM count: the refusal must come first). The message names K
// and the algorithm, in the op and in the size query alike.
TEST(GpuOpValidation, TopkRejectsLargeKOnFusedAndSplitKPaths) {
  softk::LogitsView v = valid_fake_logits();
  v.vocab = 100000;
  for (auto algorithm : {softk::TopkAlgorithm::fused, softk::TopkAlgorithm::split_k})
    for (int32_t k : {softk::kMaxFastTopK + 1, 4096, 100000}) {
      softk::TopkOptions o;
      o.algorithm = algorithm;
      const std::vector<std::string> needles = {std::to_string(k), softk::to_string(algorithm)};
      EXPECT_TRUE(throws_error_naming([&] { gpu_topk(v, k, fake_probs(), fake_indices(), o); }, needles))
          << softk::to_string(algorithm) << " k = " << k;
      EXPECT_TRUE(throws_error_naming([&] { (void)softk::topk_workspace_size(v, k, o); }, needles))
          << "topk_workspace_size, " << softk::to_string(algorithm) << " k = " << k;
    }
}

TEST(GpuOpValidation, TopkRejectsUnknownAlgorithm) {
  softk::TopkOptions o;
  o.algorithm = static_cast<softk::TopkAlgorithm>(42);
  EXPECT_TRUE(throws_error_naming([&] { gpu_topk(valid_fake_logits(), 5, fake_probs(), fake_indices(), o); },
                                  {"algorithm", "42"}));
}

// The too-small-workspace check of topk needs the radix path's size, which includes CUB's sort
// scratch and so queries the device (topk.hpp): it lives in tests/gpu (TopkWorkspace).

// ---------------------------------------------------------------------------------------------
// softk::reference (its workspace size comes from CUB's size query, which may itself ask the
// runtime for the device, so the workspace checks of reference::topk live in tests/gpu).

TEST(GpuOpValidation, ReferenceSoftmaxRejectsBadArguments) {
  for (const auto& c : bad_logits_cases()) {
    softk::LogitsView v = valid_fake_logits();
    c.mutate(v);
    EXPECT_TRUE(throws_error_naming([&] { softk::reference::softmax(v, fake_probs(), {}, nullptr); }, c.needles)) << c.name;
  }
  EXPECT_TRUE(throws_error_naming([&] { softk::reference::softmax(valid_fake_logits(), nullptr, {}, nullptr); }, {"out", "null"}));
  EXPECT_TRUE(throws_error_naming([&] { softk::reference::softmax(valid_fake_logits(), off_alignment(fake_probs()), {}, nullptr); },
                                  {"out", "aligned"}));
  for (const auto& t : bad_temperatures()) {
    softk::SoftmaxOptions o;
    o.temperature = t.value;
    EXPECT_TRUE(throws_error_naming([&] { softk::reference::softmax(valid_fake_logits(), fake_probs(), o, nullptr); },
                                    {"temperature", t.shown}))
        << t.name;
  }
  // The reference writes fp32 only (reference.hpp): even the input's own dtype is refused.
  softk::LogitsView half = valid_fake_logits();
  half.dtype = DType::bf16;
  softk::SoftmaxOptions o;
  o.out_dtype = DType::bf16;
  EXPECT_TRUE(throws_error_naming([&] { softk::reference::softmax(half, fake_probs(), o, nullptr); }, {"out_dtype"}));
}

TEST(GpuOpValidation, ReferenceTopkRejectsBadArguments) {
  const auto ref_topk = [](const softk::LogitsView& v, int32_t k, float* p, int32_t* i, softk::TopkOptions o) {
    softk::reference::topk(v, k, p, i, o, fake_workspace(), kBigWorkspace, nullptr);
  };
  for (const auto& c : bad_logits_cases()) {
    softk::LogitsView v = valid_fake_logits();
    c.mutate(v);
    EXPECT_TRUE(throws_error_naming([&] { ref_topk(v, 5, fake_probs(), fake_indices(), {}); }, c.needles)) << c.name;
  }
  for (int32_t k : {0, -3, 1001})
    EXPECT_TRUE(throws_error_naming([&] { ref_topk(valid_fake_logits(), k, fake_probs(), fake_indices(), {}); },
                                    {"k", std::to_string(k)}));
  EXPECT_TRUE(throws_error_naming([&] { ref_topk(valid_fake_logits(), 5, nullptr, fake_indices(), {}); }, {"probs", "null"}));
  EXPECT_TRUE(throws_error_naming([&] { ref_topk(valid_fake_logits(), 5, off_alignment(fake_probs()), fake_indices(), {}); },
                                  {"probs", "aligned"}));
  EXPECT_TRUE(throws_error_naming([&] { ref_topk(valid_fake_logits(), 5, fake_probs(), nullptr, {}); }, {"indices", "null"}));
  for (const auto& t : bad_temperatures()) {
    softk::TopkOptions o;
    o.temperature = t.value;
    EXPECT_TRUE(throws_error_naming([&] { ref_topk(valid_fake_logits(), 5, fake_probs(), fake_indices(), o); },
                                    {"temperature", t.shown}))
        << t.name;
  }
}

// ---------------------------------------------------------------------------------------------
// softk::sample: the scalars (its per-row arrays live on the device, and are clamped there)

TEST(GpuOpValidation, SampleRejectsBadArguments) {
  struct Case {
    const char* name;
    softk::SamplingParams params;
    std::vector<std::string> needles;
  };
  std::vector<Case> cases(5);
  cases[0] = {"temperature -1", {}, {"params.temperature", "-1"}};
  cases[0].params.temperature = -1.0f;
  cases[1] = {"top_k past vocab", {}, {"params.top_k", "1001"}};
  cases[1].params.top_k = 1001;
  cases[2] = {"top_p 0", {}, {"params.top_p", "0"}};
  cases[2].params.top_p = 0.0f;
  cases[3] = {"min_p 2", {}, {"params.min_p", "2"}};
  cases[3].params.min_p = 2.0f;
  cases[4] = {"top_k -1", {}, {"params.top_k", "-1"}};
  cases[4].params.top_k = -1;
  int32_t* tokens = fake_indices();
  using SampleOp = void (*)(const softk::LogitsView&, const softk::SamplingParams&, int32_t*, int32_t*, void*,
                            std::size_t, cudaStream_t);
  using SizeQuery = std::size_t (*)(const softk::LogitsView&, const softk::SamplingParams&);
  struct Op {
    const char* name;
    SampleOp sample;
    SizeQuery size;
  };
  const Op ops[] = {{"softk::sample", softk::sample, softk::sample_workspace_size},
                    {"softk::reference::sample", softk::reference::sample, softk::reference::sample_workspace_size}};
  for (const Op& op : ops) {
    SCOPED_TRACE(op.name);
    for (const Case& c : cases) {
      EXPECT_TRUE(throws_error_naming(
          [&] { op.sample(valid_fake_logits(), c.params, tokens, nullptr, fake_workspace(), kBigWorkspace, nullptr); },
          c.needles))
          << c.name;
      EXPECT_TRUE(throws_error_naming([&] { op.size(valid_fake_logits(), c.params); }, c.needles))
          << c.name << " (size query)";
    }
    EXPECT_TRUE(throws_error_naming(
        [&] { op.sample(valid_fake_logits(), {}, nullptr, nullptr, fake_workspace(), kBigWorkspace, nullptr); },
        {"tokens", "null"}));
    for (const auto& c : bad_logits_cases()) {
      softk::LogitsView v = valid_fake_logits();
      c.mutate(v);
      EXPECT_TRUE(throws_error_naming(
          [&] { op.sample(v, {}, tokens, nullptr, fake_workspace(), kBigWorkspace, nullptr); }, c.needles))
          << c.name;
    }
  }
}

}  // namespace

// A decode loop sizes its workspaces at start-up, before it has logits: the size queries take
// the shape alone (softmax.hpp, topk.hpp), so a null data pointer is fine there.
TEST(GpuOpValidation, WorkspaceQueriesNeedNoLogitsPointer) {
  softk::LogitsView v = valid_fake_logits();
  v.data = nullptr;
  softk::SoftmaxOptions softmax_options;
  EXPECT_NO_THROW((void)softk::softmax_workspace_size(v, softmax_options));
  softk::TopkOptions topk_options;
  topk_options.algorithm = softk::TopkAlgorithm::fused;  // the one path sized without the device
  EXPECT_EQ(softk::topk_workspace_size(v, 50, topk_options), 0u);
}


// softk::Sampler checks its limits before it sizes or allocates anything.
TEST(GpuOpValidation, SamplerRejectsBadLimits) {
  softk::SamplerLimits good;
  good.vocab = 1000;
  good.max_rows = 8;
  good.max_k = 50;
  struct Case {
    const char* name;
    void (*mutate)(softk::SamplerLimits&);
    std::vector<std::string> needles;
  };
  const Case cases[] = {
      {"vocab 0", [](softk::SamplerLimits& l) { l.vocab = 0; }, {"limits.vocab", "0"}},
      {"vocab 2^31", [](softk::SamplerLimits& l) { l.vocab = int64_t{1} << 31; }, {"limits.vocab", "2147483648"}},
      {"max_rows 0", [](softk::SamplerLimits& l) { l.max_rows = 0; }, {"limits.max_rows", "0"}},
      {"max_k 0", [](softk::SamplerLimits& l) { l.max_k = 0; }, {"limits.max_k", "0"}},
      {"max_k past vocab", [](softk::SamplerLimits& l) { l.max_k = 1001; }, {"limits.max_k", "1001"}},
      {"dtype 7", [](softk::SamplerLimits& l) { l.dtype = static_cast<DType>(7); }, {"limits.dtype", "7"}},
  };
  for (const Case& c : cases) {
    softk::SamplerLimits limits = good;
    c.mutate(limits);
    EXPECT_TRUE(throws_error_naming([&] { softk::Sampler sampler(limits); }, c.needles)) << c.name;
  }
}
