// softk::sample on the GPU (softk/sample.hpp) against softk::cpu::sample and the exact truncated
// distribution:
//  - token for token against the CPU sampler on many rows, for each bound alone and together,
//    fp32 and bf16, scalar and per-row parameters (the two may differ only where u falls within
//    fp32 rounding of a boundary, so a few mismatches are allowed, each a CPU candidate);
//  - a chi-square test over 10^5 draws of one row (offsets 0 .. 10^5 - 1);
//  - NaN and masked rows, -inf and +inf tokens, greedy;
//  - both kernels: top_k bounds (ranked by softk::topk) and none (the nucleus kernel's
//    histograms: ties at its cut, rows of 2^20 + 3 tokens), and per-row top_ks under no bound;
//  - softk::reference::sample (CUB-ranked, drawn in double) against both;
//  - determinism: the same bits twice, and a row's token the same alone and inside a batch (a row
//    over a cluster of CTAs and over one block);
//  - per-row values out of range take sample.hpp's clamps; bad scalars, a short workspace and
//    null tokens are refused before anything is written; a CUDA graph replays the op.
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <string>
#include <type_traits>
#include <vector>

#include "common/bad_arguments.hpp"
#include "common/gpu.hpp"
#include "common/inputs.hpp"
#include "common/runners.hpp"
#include "common/sampling_check.hpp"
#include "softk/cpu.hpp"
#include "softk/reference.hpp"
#include "softk/sample.hpp"

namespace {

using namespace softk_test;
using softk::DType;

/// Per-row parameter arrays on the host, and their device copies for a SamplingParams.
struct RowArrays {
  std::vector<float> temperatures, top_ps, min_ps;
  std::vector<int32_t> top_ks;
  std::vector<uint64_t> seeds, offsets;
};

struct DeviceRowArrays {
  DeviceBuffer temperatures, top_ps, min_ps, top_ks, seeds, offsets;
};

template <class T>
DeviceBuffer device_copy(const std::vector<T>& host, cudaStream_t stream) {
  DeviceBuffer d(host.size() * sizeof(T));
  upload(d.get(), host.data(), d.bytes(), stream);
  return d;
}

/// `params` with every non-empty array of `rows` pointed at: host pointers for the CPU, device
/// ones (filled into `device`) for the GPU.
softk::SamplingParams with_arrays(softk::SamplingParams params, const RowArrays& rows, DeviceRowArrays* device,
                                  cudaStream_t stream) {
  const auto point = [&](const auto& host, DeviceBuffer* d, auto*& field) {
    using T = std::remove_const_t<std::remove_pointer_t<std::remove_reference_t<decltype(field)>>>;
    if (host.empty()) return;
    if (device == nullptr) {
      field = host.data();
      return;
    }
    *d = device_copy(host, stream);
    field = d->template as<T>();
  };
  point(rows.temperatures, device ? &device->temperatures : nullptr, params.temperatures);
  point(rows.top_ps, device ? &device->top_ps : nullptr, params.top_ps);
  point(rows.min_ps, device ? &device->min_ps : nullptr, params.min_ps);
  point(rows.top_ks, device ? &device->top_ks : nullptr, params.top_ks);
  point(rows.seeds, device ? &device->seeds : nullptr, params.seeds);
  point(rows.offsets, device ? &device->offsets : nullptr, params.offsets);
  return params;
}

struct GpuRun {
  std::vector<int32_t> tokens, status;
};

/// softk::sample on `d` with the arrays copied to the device, in an exactly sized workspace.
GpuRun run_gpu(const DeviceLogits& d, const softk::SamplingParams& scalars, const RowArrays& arrays,
               cudaStream_t stream) {
  DeviceRowArrays device_arrays;
  const softk::SamplingParams params = with_arrays(scalars, arrays, &device_arrays, stream);
  const auto rows = static_cast<std::size_t>(d.view.rows());
  GuardedOutput tokens(rows * sizeof(int32_t), stream), status(rows * sizeof(int32_t), stream);
  DeviceBuffer workspace(softk::sample_workspace_size(d.view, params));
  poison_workspace(workspace, stream);
  softk::sample(d.view, params, tokens.as<int32_t>(), status.as<int32_t>(), workspace.get(), workspace.bytes(), stream);
  GpuRun run{download<int32_t>(tokens.get(), rows, stream), download<int32_t>(status.get(), rows, stream)};
  EXPECT_EQ(tokens.guard_violation(stream), "");
  EXPECT_EQ(status.guard_violation(stream), "");
  return run;
}

GpuRun run_cpu(const HostLogits& h, const softk::SamplingParams& scalars, const RowArrays& arrays) {
  const softk::SamplingParams params = with_arrays(scalars, arrays, nullptr, nullptr);
  const auto rows = static_cast<std::size_t>(h.rows());
  GpuRun run{std::vector<int32_t>(rows), std::vector<int32_t>(rows)};
  softk::cpu::sample(h.host_view(), params, run.tokens.data(), run.status.data());
  return run;
}

/// Row r of `h` and of `arrays` (each non-empty array's value r), `n` times over: a row drawn
/// again alone or at another place in a batch.
HostLogits copies_of_row(const HostLogits& h, int64_t r, int64_t n) {
  return make_logits_with(h.dtype, n, 1, h.vocab,
                          [&](int64_t, float* x) { std::copy(h.row(r), h.row(r) + h.vocab, x); });
}
RowArrays copies_of_row(const RowArrays& arrays, int64_t r, int64_t n) {
  const auto copies = [&](const auto& values) {
    using V = std::decay_t<decltype(values)>;
    return values.empty() ? V{} : V(static_cast<std::size_t>(n), values[static_cast<std::size_t>(r)]);
  };
  return {copies(arrays.temperatures), copies(arrays.top_ps), copies(arrays.min_ps),
          copies(arrays.top_ks),       copies(arrays.seeds),  copies(arrays.offsets)};
}

/// Row r's logits as fp32 (the dtype's values), for the exact distribution.
std::vector<float> row_values(const HostLogits& h, int64_t r) { return {h.row(r), h.row(r) + h.vocab}; }

const SamplingBounds kBounds[] = {
    {"plain", 1.0f, 0, 1.0f, 0.0f},        {"top_k 50", 0.8f, 50, 1.0f, 0.0f}, {"top_p 0.9", 1.0f, 0, 0.9f, 0.0f},
    {"min_p 0.05", 1.2f, 0, 1.0f, 0.05f},  {"top_k 40 top_p 0.8 min_p 0.01", 0.7f, 40, 0.8f, 0.01f},
    {"greedy", 0.0f, 0, 1.0f, 0.0f},
    // The ranked draw's three ways to token order (sample_from_ranked.cu): up to 256 candidates
    // sorted a key a thread, up to 4096 sixteen a thread, more met over the row (top_k 4097; at
    // V = 1000 these are top_k = V, which takes the nucleus kernel).
    {"top_k 257", 1.0f, 257, 1.0f, 0.0f},  {"top_k 4096", 1.0f, 4096, 1.0f, 0.0f},
    {"top_k 4097", 1.0f, 4097, 1.0f, 0.0f},
    // A ranked list of at most 256, a rank a thread: min_p alone, and every rank a candidate.
    {"top_k 200 min_p 0.05", 1.0f, 200, 1.0f, 0.05f}, {"top_k 256 top_p 0.95", 1.3f, 256, 0.95f, 0.0f},
};

class GpuSample : public GpuTest {
 protected:
  void expect_repeatable_and_independent(bool ranked);
  void expect_graph_replays(int32_t top_k);
};

// Many rows, one draw each, every row at its own seed and offset: the GPU's token is the CPU's,
// but where u lies within fp32 rounding of a boundary; there it is still one of the CPU's
// candidates.
TEST_F(GpuSample, MatchesTheCpuSamplerTokenForToken) {
  for (DType dt : {DType::f32, DType::bf16})
    for (int64_t vocab : {1000, 32000, 128256})
      for (const SamplingBounds& b : kBounds) {
        SCOPED_TRACE(std::string(dtype_name(dt)) + " V=" + std::to_string(vocab) + " " + b.name);
        constexpr int64_t kRows = 64;
        const HostLogits h = make_logits(dt, kRows, 1, vocab, Dist::llm_like);
        const DeviceLogits d = to_device(h, stream());
        const softk::SamplingParams params = b.params(vocab);
        RowArrays arrays;
        for (int64_t r = 0; r < kRows; ++r) {
          arrays.seeds.push_back(1000 + static_cast<uint64_t>(r));
          arrays.offsets.push_back(static_cast<uint64_t>(r) * 7);
        }
        const GpuRun gpu = run_gpu(d, params, arrays, stream());
        const GpuRun cpu = run_cpu(h, params, arrays);
        EXPECT_EQ(gpu.status, cpu.status);
        int mismatches = 0;
        for (int64_t r = 0; r < kRows; ++r) {
          if (gpu.tokens[r] == cpu.tokens[r]) continue;
          ++mismatches;
          const bool greedy = b.temperature == 0.0f;
          const std::vector<double> q = truncated_distribution(row_values(h, r), greedy ? 1.0f : b.temperature,
                                                               greedy ? 1 : params.top_k, b.top_p, b.min_p);
          ASSERT_GE(gpu.tokens[r], 0) << "row " << r;
          EXPECT_GT(q[gpu.tokens[r]], 0.0) << "row " << r << ": token " << gpu.tokens[r] << " is no candidate";
        }
        EXPECT_LE(mismatches, 1) << "GPU and CPU tokens differ on " << mismatches << " of " << kRows << " rows";
      }
}

// softk::reference::sample, every row ranked by the CUB reference and drawn one token at a time
// in double: the CPU's tokens and statuses, and the fast op's, but where u or a cut lies within
// rounding of a boundary (each may then differ on a row or so). Every row draws at its own seed
// and offset; the rows hold -inf and +inf tokens, NaN, masked rows and signed zeros, and one
// case gives every parameter a row.
TEST_F(GpuSample, TheReferenceDrawsTheCpusAndTheFastOpsTokens) {
  constexpr int64_t kRows = 64;
  RowArrays per_row_draws;
  for (int64_t r = 0; r < kRows; ++r) {
    per_row_draws.seeds.push_back(300 + static_cast<uint64_t>(r));
    per_row_draws.offsets.push_back(static_cast<uint64_t>(r) * 5);
  }
  RowArrays per_row_everything = per_row_draws;
  for (int64_t r = 0; r < kRows; ++r) {
    per_row_everything.temperatures.push_back(r % 7 == 0 ? 0.0f : 0.4f + 0.05f * static_cast<float>(r));
    per_row_everything.top_ps.push_back(r % 2 == 0 ? 0.9f : 1.0f);
    per_row_everything.min_ps.push_back(r % 3 == 0 ? 0.05f : 0.0f);
  }
  const auto compare = [&](const HostLogits& h, const softk::SamplingParams& scalars, const RowArrays& arrays) {
    const DeviceLogits d = to_device(h, stream());
    DeviceRowArrays device_arrays;
    const softk::SamplingParams params = with_arrays(scalars, arrays, &device_arrays, stream());
    DeviceBuffer workspace(softk::reference::sample_workspace_size(d.view, params));
    poison_workspace(workspace, stream());
    GuardedOutput tokens(kRows * sizeof(int32_t), stream()), status(kRows * sizeof(int32_t), stream());
    softk::reference::sample(d.view, params, tokens.as<int32_t>(), status.as<int32_t>(), workspace.get(),
                             workspace.bytes(), stream());
    const GpuRun reference{download<int32_t>(tokens.get(), kRows, stream()),
                           download<int32_t>(status.get(), kRows, stream())};
    EXPECT_EQ(tokens.guard_violation(stream()), "");
    EXPECT_EQ(status.guard_violation(stream()), "");
    const GpuRun cpu = run_cpu(h, scalars, arrays);
    const GpuRun fast = run_gpu(d, scalars, arrays, stream());
    EXPECT_EQ(reference.status, cpu.status);
    int against_cpu = 0, against_fast = 0;
    for (int64_t r = 0; r < kRows; ++r) {
      against_cpu += reference.tokens[r] != cpu.tokens[r];
      against_fast += reference.tokens[r] != fast.tokens[r];
    }
    EXPECT_LE(against_cpu, 1) << against_cpu << " of " << kRows << " rows differ from the CPU's";
    EXPECT_LE(against_fast, 1) << against_fast << " of " << kRows << " rows differ from the fast op's";
  };
  for (DType dt : {DType::f32, DType::bf16})
    for (int64_t vocab : {1000, 32000})
      for (const SamplingBounds& b : kBounds) {
        SCOPED_TRACE(std::string(dtype_name(dt)) + " V=" + std::to_string(vocab) + " " + b.name);
        compare(make_logits(dt, kRows, 1, vocab, Dist::llm_like), b.params(vocab), per_row_draws);
      }
  for (Dist dist : {Dist::pm_inf, Dist::nan_row, Dist::masked_rows, Dist::few_unmasked, Dist::signed_zeros})
    for (const SamplingBounds& b : kBounds) {
      SCOPED_TRACE(std::string(dist_name(dist)) + " " + b.name);
      compare(make_logits(DType::f32, kRows, 1, 1000, dist), b.params(1000), per_row_draws);
    }
  softk::SamplingParams bounded;
  bounded.top_k = 300;
  SCOPED_TRACE("every parameter a row");
  compare(make_logits(DType::bf16, kRows, 1, 32000, Dist::llm_like), bounded, per_row_everything);
}

TEST_F(GpuSample, DistributionMatchesTheTruncatedSoftmax) {
  std::vector<float> row(40);
  for (int i = 0; i < 40; ++i) row[i] = static_cast<float>(std::sin(i * 12.9898) * 2.5);
  row[3] = 6.0f;
  row[11] = 5.2f;
  constexpr int64_t kDraws = 100000;
  const HostLogits h =
      make_logits_with(DType::f32, kDraws, 1, 40, [&](int64_t, float* x) { std::copy(row.begin(), row.end(), x); });
  const DeviceLogits d = to_device(h, stream());
  RowArrays arrays;
  arrays.offsets.resize(kDraws);
  std::iota(arrays.offsets.begin(), arrays.offsets.end(), uint64_t{0});
  for (const SamplingBounds& b : kBounds) {
    if (b.temperature == 0.0f) continue;
    softk::SamplingParams params = b.params(12);  // the row has 40 tokens
    params.seed = 77;
    const GpuRun gpu = run_gpu(d, params, arrays, stream());
    EXPECT_EQ(distribution_mismatch(gpu.tokens,
                                    truncated_distribution(row, b.temperature, params.top_k, b.top_p, b.min_p)),
              "")
        << b.name;
  }
}

TEST_F(GpuSample, NonFiniteRowsAndTokens) {
  // Row 0: two finite tokens among -inf; row 1: two +inf; row 2: NaN; row 3: all -inf.
  const HostLogits h = make_logits_with(DType::f32, 4, 1, 300, [](int64_t r, float* x) {
    for (int i = 0; i < 300; ++i) x[i] = r == 3 || r == 0 ? -kInf : static_cast<float>(i % 17);
    if (r == 0) x[17] = 1.0f, x[250] = 2.0f;
    if (r == 1) x[5] = x[290] = kInf;
    if (r == 2) x[100] = kNaN;
  });
  const DeviceLogits d = to_device(h, stream());
  // The nucleus kernel, then ranked lists short of the row and of 299 tokens (-1 for the -inf
  // ones among them, sorted sixteen a thread).
  for (int32_t top_k : {0, 50, 299}) {
    std::vector<int64_t> hits(600, 0);
    for (uint64_t offset = 0; offset < 400; ++offset) {
      softk::SamplingParams params;
      params.top_k = top_k;
      params.offset = offset;
      const GpuRun gpu = run_gpu(d, params, {}, stream());
      ASSERT_EQ(gpu.status, (std::vector<int32_t>{0, 0, 2, 1}));
      ASSERT_TRUE(gpu.tokens[0] == 17 || gpu.tokens[0] == 250) << gpu.tokens[0];
      ASSERT_TRUE(gpu.tokens[1] == 5 || gpu.tokens[1] == 290) << gpu.tokens[1];
      EXPECT_EQ(gpu.tokens[2], -1);
      EXPECT_EQ(gpu.tokens[3], -1);
      ++hits[gpu.tokens[0]];
      ++hits[300 + gpu.tokens[1]];
    }
    EXPECT_GT(hits[17], 50) << "top_k " << top_k;  // p = 1 / (1 + e) = 0.27
    EXPECT_GT(hits[305], 150) << "top_k " << top_k;
    EXPECT_GT(hits[590], 150) << "top_k " << top_k;
    // top_p 0.5: token 250 alone (0.73 of row 0), and the first of the two +inf tokens.
    softk::SamplingParams nucleus;
    nucleus.top_k = top_k;
    nucleus.top_p = 0.5f;
    for (uint64_t offset = 0; offset < 50; ++offset) {
      nucleus.offset = offset;
      const GpuRun gpu = run_gpu(d, nucleus, {}, stream());
      ASSERT_EQ(gpu.tokens, (std::vector<int32_t>{250, 5, -1, -1})) << "top_k " << top_k << " offset " << offset;
    }
  }
}

// The same bits twice, and row r's token the same alone as inside a batch of other rows, from
// both kernels: per-row top_ks (ranked), and none (the nucleus kernel).
TEST_F(GpuSample, ARowsTokenIsRepeatableAndIgnoresTheRowsAroundIt) {
  for (bool ranked : {true, false}) {
    SCOPED_TRACE(ranked ? "ranked" : "nucleus");
    expect_repeatable_and_independent(ranked);
  }
}

// 300 rows: past the SM count (132 on an H100 or H200), where the nucleus kernel's blocks are 256
// threads, and 512 for a row alone or in two; rows of 50257 bf16 tokens start at each even byte
// offset mod 16.
void GpuSample::expect_repeatable_and_independent(bool ranked) {
  constexpr int64_t kRows = 300;
  const HostLogits h = make_logits(DType::bf16, kRows, 1, 50257, Dist::llm_like);
  const DeviceLogits d = to_device(h, stream());
  RowArrays arrays;
  for (int64_t r = 0; r < kRows; ++r) {
    arrays.temperatures.push_back(0.5f + 0.05f * static_cast<float>(r % 48));
    if (ranked) arrays.top_ks.push_back(static_cast<int32_t>(1 + (r * 5) % 256));
    arrays.top_ps.push_back(r % 3 == 0 ? 1.0f : 0.85f);
    arrays.min_ps.push_back(r % 4 == 0 ? 0.02f : 0.0f);
    arrays.seeds.push_back(42 + static_cast<uint64_t>(r));
    arrays.offsets.push_back(static_cast<uint64_t>(r));
  }
  softk::SamplingParams params;
  params.top_k = ranked ? 256 : 0;  // 256 bounds every row's top_ks
  const GpuRun first = run_gpu(d, params, arrays, stream());
  EXPECT_EQ(run_gpu(d, params, arrays, stream()).tokens, first.tokens);
  // Every per-row parameter reaches its row: the CPU oracle draws the same tokens (but where u
  // lies within fp32 rounding of a boundary).
  const GpuRun cpu = run_cpu(h, params, arrays);
  int mismatches = 0;
  for (int64_t r = 0; r < kRows; ++r) mismatches += first.tokens[r] != cpu.tokens[r];
  EXPECT_LE(mismatches, 3) << mismatches << " of " << kRows << " rows differ from the CPU's";
  // Rows 0-7 start at each 2-byte offset mod 16 (a row is 100514 bytes); each is drawn again
  // alone (offset 0) and second in a batch of two (offset 2).
  for (int64_t r : {0, 1, 2, 3, 4, 5, 6, 7, 150, 299}) {
    for (int64_t place : {0, 1}) {
      const HostLogits few = copies_of_row(h, r, place + 1);
      const RowArrays alone = copies_of_row(arrays, r, place + 1);
      EXPECT_EQ(run_gpu(to_device(few, stream()), params, alone, stream()).tokens[place], first.tokens[r])
          << "row " << r << " at place " << place;
    }
  }
}

// A row of a small batch spreads over a cluster of CTAs (launch_sample_nucleus), a row of a batch
// past the SM count has one block of 256 threads: on every distribution, with cuts by mass and by
// min_p, the same status and token either way. A row alone that may be cut takes a CTA for each
// 4096 tokens (2 at V = 12000, 4 at 20000, 8 at 40000, 16 at 70000); one that may not (no top_ps,
// top_p 1) a CTA for each 16 slots (fp32: 1 up to 16384 tokens, then 2, 2 and 4; 16 at 2^18). And
// a cut inside a run of tied tokens that spans every CTA's part keeps the CPU's tokens.
TEST_F(GpuSample, ARowOverAClusterDrawsAsOverABlock) {
  int sm_count = 0;
  ASSERT_EQ(cudaSuccess, cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, 0));
  const int64_t rows = std::max<int64_t>(200, sm_count);
  const auto expect_rows_alone_as_in_batch = [&](DType dt, int64_t vocab, Dist dist) {
    SCOPED_TRACE(std::string(dtype_name(dt)) + " " + dist_name(dist) + " V=" + std::to_string(vocab));
    const HostLogits h = make_logits(dt, rows, 1, vocab, dist);
    RowArrays arrays;
    for (int64_t r = 0; r < rows; ++r) {
      arrays.temperatures.push_back(0.5f + 0.1f * static_cast<float>(r % 10));
      arrays.top_ps.push_back(r % 3 == 0 ? 1.0f : r % 3 == 1 ? 0.9f : 0.3f);
      arrays.min_ps.push_back(r % 4 == 0 ? 0.02f : 0.0f);
      arrays.seeds.push_back(7 + static_cast<uint64_t>(r));
      arrays.offsets.push_back(static_cast<uint64_t>(r));
    }
    const softk::SamplingParams params;
    const GpuRun batch = run_gpu(to_device(h, stream()), params, arrays, stream());
    for (int64_t r : {int64_t{0}, int64_t{1}, int64_t{2}, int64_t{3}, int64_t{6}, rows / 2, rows - 1}) {
      const DeviceLogits alone = to_device(copies_of_row(h, r, 1), stream());
      RowArrays values = copies_of_row(arrays, r, 1);
      const GpuRun single = run_gpu(alone, params, values, stream());
      EXPECT_EQ(single.status[0], batch.status[r]) << "row " << r;
      EXPECT_EQ(single.tokens[0], batch.tokens[r]) << "row " << r;
      if (values.top_ps[0] == 1.0f) {
        values.top_ps.clear();
        EXPECT_EQ(run_gpu(alone, params, values, stream()).tokens[0], batch.tokens[r]) << "row " << r << ", no top_ps";
      }
    }
  };
  for (DType dt : {DType::f32, DType::bf16})
    for (int64_t vocab : {12000, 20000, 40000, 70000})
      for (Dist dist : kAllDists) expect_rows_alone_as_in_batch(dt, vocab, dist);
  for (Dist dist : {Dist::llm_like, Dist::normal}) expect_rows_alone_as_in_batch(DType::f32, int64_t{1} << 18, dist);
  for (int64_t vocab : {40000, 70000}) {
    const HostLogits flat =
        make_logits_with(DType::f32, 1, 1, vocab, [&](int64_t, float* x) { std::fill(x, x + vocab, 0.5f); });
    const DeviceLogits d = to_device(flat, stream());
    softk::SamplingParams half;
    half.top_p = 0.5f;
    for (uint64_t offset = 0; offset < 50; ++offset) {
      half.offset = offset;
      ASSERT_EQ(run_gpu(d, half, {}, stream()).tokens, run_cpu(flat, half, {}).tokens)
          << "V " << vocab << ", offset " << offset;
    }
  }
}

// Per-row values the host cannot check take sample.hpp's clamps: the same tokens as the values
// they clamp to.
TEST_F(GpuSample, OutOfRangePerRowValuesAreClamped) {
  constexpr int64_t kRows = 7;  // rows 0-5 clamped; row 6 in range, with a top_p cut
  const HostLogits h = make_logits(DType::f32, kRows, 1, 4096, Dist::llm_like);
  const DeviceLogits d = to_device(h, stream());
  softk::SamplingParams params;
  params.top_k = 100;
  RowArrays bad, clamped;
  const auto expect_clamped = [&](const char* kernel) {
    const GpuRun clamped_run = run_gpu(d, params, clamped, stream());
    EXPECT_EQ(run_gpu(d, params, bad, stream()).tokens, clamped_run.tokens) << kernel;
    // ...and the clamped values reach the kernel: the CPU oracle draws the same.
    EXPECT_EQ(clamped_run.tokens, run_cpu(h, params, clamped).tokens) << kernel;
  };
  bad.temperatures = {-1.0f, kNaN, 1e-40f, 1.0f, 1.0f, 1.0f, 1.0f};
  clamped.temperatures = {0.0f, 0.0f, 0.0f, 1.0f, 1.0f, 1.0f, 1.0f};
  bad.top_ks = {5, 5, 5, -3, 1000, 7, 60};
  clamped.top_ks = {5, 5, 5, 100, 100, 7, 60};
  bad.top_ps = {1.0f, 1.0f, 1.0f, 2.0f, kNaN, 0.0f, 0.6f};
  clamped.top_ps = {1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 0.6f};
  bad.min_ps = {0.0f, 0.0f, 0.0f, -1.0f, 3.0f, kNaN, 0.01f};
  clamped.min_ps = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.01f};
  bad.seeds = clamped.seeds = {1, 2, 3, 4, 5, 6, 7};
  expect_clamped("ranked");
  // No top_k at all: the nucleus kernel clamps the same way.
  params.top_k = 0;
  bad.top_ks.clear();
  clamped.top_ks.clear();
  expect_clamped("nucleus");
}

TEST_F(GpuSample, BadArgumentsAreRefusedBeforeAnythingIsWritten) {
  const HostLogits h = make_logits(DType::f32, 4, 1, 1000, Dist::llm_like);
  const DeviceLogits d = to_device(h, stream());
  GuardedOutput tokens(4 * sizeof(int32_t), stream());
  softk::SamplingParams good;
  good.top_k = 20;
  DeviceBuffer workspace(softk::sample_workspace_size(d.view, good));
  const auto call = [&](const softk::SamplingParams& p, void* ws, std::size_t bytes, int32_t* out) {
    softk::sample(d.view, p, out, nullptr, ws, bytes, stream());
  };
  softk::SamplingParams p = good;
  p.top_p = 1.5f;
  EXPECT_TRUE(throws_error_naming([&] { call(p, workspace.get(), workspace.bytes(), tokens.as<int32_t>()); },
                                  {"params.top_p", "1.5"}));
  p = good;
  p.temperature = -1.0f;
  EXPECT_TRUE(throws_error_naming([&] { call(p, workspace.get(), workspace.bytes(), tokens.as<int32_t>()); },
                                  {"params.temperature", "-1"}));
  p = good;
  p.top_k = 1001;
  EXPECT_TRUE(throws_error_naming([&] { call(p, workspace.get(), workspace.bytes(), tokens.as<int32_t>()); },
                                  {"params.top_k", "1001"}));
  EXPECT_TRUE(throws_error_naming([&] { call(good, workspace.get(), workspace.bytes() - 1, tokens.as<int32_t>()); },
                                  {"workspace_bytes"}));
  EXPECT_TRUE(throws_error_naming([&] { call(good, nullptr, workspace.bytes(), tokens.as<int32_t>()); },
                                  {"workspace", "null"}));
  EXPECT_TRUE(
      throws_error_naming([&] { call(good, workspace.get(), workspace.bytes(), nullptr); }, {"tokens", "null"}));
  EXPECT_TRUE(tokens.untouched(stream())) << "a refused call wrote tokens";
}

TEST_F(GpuSample, ReplaysInACudaGraph) {
  for (int32_t top_k : {50, 0}) {
    SCOPED_TRACE("top_k " + std::to_string(top_k));
    expect_graph_replays(top_k);
  }
}

void GpuSample::expect_graph_replays(int32_t top_k) {
  const HostLogits h = make_logits(DType::bf16, 16, 1, 32000, Dist::llm_like);
  const DeviceLogits d = to_device(h, stream());
  softk::SamplingParams params;
  params.top_k = top_k;
  params.top_p = 0.9f;
  params.seed = 9;
  DeviceBuffer workspace(softk::sample_workspace_size(d.view, params));
  DeviceBuffer tokens(16 * sizeof(int32_t));
  softk::sample(d.view, params, tokens.as<int32_t>(), nullptr, workspace.get(), workspace.bytes(), stream());
  const std::vector<int32_t> eager = download<int32_t>(tokens.get(), 16, stream());
  SOFTK_TEST_CUDA(cudaMemsetAsync(tokens.get(), 0x7B, tokens.bytes(), stream()));
  cudaGraph_t graph = nullptr;
  SOFTK_TEST_CUDA(cudaStreamBeginCapture(stream(), cudaStreamCaptureModeGlobal));
  softk::sample(d.view, params, tokens.as<int32_t>(), nullptr, workspace.get(), workspace.bytes(), stream());
  SOFTK_TEST_CUDA(cudaStreamEndCapture(stream(), &graph));
  cudaGraphExec_t exec = nullptr;
  SOFTK_TEST_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  for (int replay = 0; replay < 3; ++replay) {
    SOFTK_TEST_CUDA(cudaMemsetAsync(tokens.get(), 0x7B, tokens.bytes(), stream()));
    SOFTK_TEST_CUDA(cudaGraphLaunch(exec, stream()));
    EXPECT_EQ(download<int32_t>(tokens.get(), 16, stream()), eager) << "replay " << replay;
  }
  SOFTK_TEST_CUDA(cudaGraphExecDestroy(exec));
  SOFTK_TEST_CUDA(cudaGraphDestroy(graph));
}

// Tokens tied at a top_p cut are kept in token order up to the one that reaches top_p, by the
// nucleus kernel (no top_k) and by the ranked list (top_k 200, a rank a thread). Row 0: five
// tokens at 3 among 995 at 0 weigh 20.09 each; of the row's 1095.4, top_p 0.05 keeps the first
// three of the five (0.055; two reach only 0.037); of the top 200's 295.4 (the five and the
// first 195 zeros), top_p 0.2 does (0.204; two 0.136). A row of one logit repeated, and a row of
// zeros of both signs, which tie, keep their first quarter at top_p 0.25 (exactly 0.25): 250 of
// 1000 tokens, or 50 of the top 200.
TEST_F(GpuSample, TiesAtATopPCutKeepTheSmallerIndices) {
  const int32_t tied[] = {7, 100, 400, 401, 999};
  const HostLogits h = make_logits_with(DType::f32, 3, 1, 1000, [&](int64_t r, float* x) {
    for (int i = 0; i < 1000; ++i) x[i] = r == 0 ? 0.0f : r == 1 ? 1.5f : i % 3 == 0 ? -0.0f : 0.0f;
    if (r == 0)
      for (int32_t t : tied) x[t] = 3.0f;
  });
  const DeviceLogits d = to_device(h, stream());
  struct Cut {
    int32_t top_k;
    float top_p_of_row_0;
    int32_t flat_kept;
  };
  for (const Cut& c : {Cut{0, 0.05f, 250}, Cut{200, 0.2f, 50}}) {
    SCOPED_TRACE("top_k " + std::to_string(c.top_k));
    RowArrays arrays;
    arrays.top_ps = {c.top_p_of_row_0, 0.25f, 0.25f};
    std::vector<int64_t> hits(1000, 0);
    int32_t largest_drawn = 0;
    for (uint64_t offset = 0; offset < 2000; ++offset) {
      softk::SamplingParams params;
      params.top_k = c.top_k;
      params.offset = offset;
      const GpuRun gpu = run_gpu(d, params, arrays, stream());
      ASSERT_EQ(gpu.tokens, run_cpu(h, params, arrays).tokens) << "offset " << offset;
      ++hits[gpu.tokens[0]];
      largest_drawn = std::max({largest_drawn, gpu.tokens[1], gpu.tokens[2]});
    }
    EXPECT_GT(hits[7], 500);
    EXPECT_GT(hits[100], 500);
    EXPECT_GT(hits[400], 500);
    EXPECT_EQ(hits[7] + hits[100] + hits[400], 2000) << "a token past the cut was drawn";
    EXPECT_GE(largest_drawn, c.flat_kept - 10);
    EXPECT_LT(largest_drawn, c.flat_kept) << "a tied token past the first " << c.flat_kept << " was drawn";
  }
}

// The nucleus kernel's fixed-point masses on long rows, every bound and per-row temperatures:
// the CPU's tokens, but where u lies within rounding of a boundary. Rows of 2^20 + 3 bf16 tokens
// weigh x 2^42; rows of 2^22 + 5 fp32 tokens, rows past the first starting off a 16-byte boundary,
// give the draw's slots several reads of the row each (sample_row_draw.cuh); fp16 rows of 50257
// take the keys of 19 bits that fp16 logits have (sample_nucleus.cu, dense_key).
TEST_F(GpuSample, TheNucleusOfALongRowMatchesTheCpu) {
  struct Shape {
    DType dtype;
    int64_t rows, vocab;
  };
  for (const Shape& shape : {Shape{DType::bf16, 8, (int64_t{1} << 20) + 3},
                             Shape{DType::f32, 3, (int64_t{1} << 22) + 5}, Shape{DType::f16, 8, 50257}}) {
    SCOPED_TRACE(std::string(dtype_name(shape.dtype)) + " V=" + std::to_string(shape.vocab));
    const HostLogits h = make_logits(shape.dtype, shape.rows, 1, shape.vocab, Dist::llm_like);
    const DeviceLogits d = to_device(h, stream());
    RowArrays arrays;
    for (int64_t r = 0; r < shape.rows; ++r) {
      arrays.temperatures.push_back(0.6f + 0.2f * static_cast<float>(r));
      arrays.top_ps.push_back(r % 2 == 0 ? 0.95f : 0.5f);
      arrays.min_ps.push_back(r % 4 == 1 ? 0.001f : 0.0f);
      arrays.seeds.push_back(5 + static_cast<uint64_t>(r));
    }
    int mismatches = 0;
    for (uint64_t offset = 0; offset < 8; ++offset) {
      softk::SamplingParams params;
      params.offset = offset;
      const GpuRun gpu = run_gpu(d, params, arrays, stream());
      const GpuRun cpu = run_cpu(h, params, arrays);
      EXPECT_EQ(gpu.status, cpu.status);
      for (int64_t r = 0; r < shape.rows; ++r) mismatches += gpu.tokens[r] != cpu.tokens[r];
    }
    EXPECT_LE(mismatches, 1) << mismatches << " of " << 8 * shape.rows << " draws differ from the CPU's";
  }
}

// Per-row top_ks under a scalar top_k of 0 rank the whole row (a row's 0 is then the vocabulary):
// past 256 tokens by the general steps, at V = 200 a rank a thread.
TEST_F(GpuSample, PerRowTopKsWithNoScalarBoundRankTheWholeRow) {
  constexpr int64_t kRows = 6;
  for (int32_t vocab : {1000, 200}) {
    SCOPED_TRACE("V=" + std::to_string(vocab));
    const HostLogits h = make_logits(DType::f32, kRows, 1, vocab, Dist::llm_like);
    const DeviceLogits d = to_device(h, stream());
    RowArrays arrays;
    arrays.top_ks = {0, 1, 5, vocab - 1, vocab, 37};
    arrays.top_ps = {0.9f, 1.0f, 1.0f, 0.99f, 1.0f, 0.5f};
    arrays.min_ps = {0.0f, 0.0f, 0.0f, 0.0f, 0.01f, 0.0f};
    softk::SamplingParams params;
    for (uint64_t offset = 0; offset < 20; ++offset) {
      params.offset = offset;
      EXPECT_EQ(run_gpu(d, params, arrays, stream()).tokens, run_cpu(h, params, arrays).tokens) << "offset " << offset;
    }
  }
}

// The two ways through a ranked list agree: a scalar top_k of k (a rank a thread) and per-row
// top_ks of k under a scalar bound of 300 (the general steps, the list past 256), but where u
// or a running sum lies within rounding of a boundary (their sums add in different orders).
TEST_F(GpuSample, AShortListDrawsAsTheGeneralSteps) {
  constexpr int64_t kRows = 64;
  const HostLogits h = make_logits(DType::bf16, kRows, 1, 32000, Dist::llm_like);
  const DeviceLogits d = to_device(h, stream());
  for (int32_t k : {1, 50, 256}) {
    SCOPED_TRACE("top_k " + std::to_string(k));
    RowArrays general;
    general.top_ks.assign(kRows, k);
    for (int64_t r = 0; r < kRows; ++r) {
      general.top_ps.push_back(r % 2 == 0 ? 0.8f : 1.0f);
      general.min_ps.push_back(r % 3 == 0 ? 0.02f : 0.0f);
      general.offsets.push_back(static_cast<uint64_t>(r) * 3);
    }
    RowArrays short_list = general;
    short_list.top_ks.clear();
    softk::SamplingParams scalar_k, bound;
    scalar_k.top_k = k;
    bound.top_k = 300;
    const GpuRun a = run_gpu(d, scalar_k, short_list, stream());
    const GpuRun b = run_gpu(d, bound, general, stream());
    int mismatches = 0;
    for (int64_t r = 0; r < kRows; ++r) mismatches += a.tokens[r] != b.tokens[r];
    EXPECT_LE(mismatches, 1) << mismatches << " of " << kRows << " rows differ";
  }
}

// Small shapes for compute-sanitizer (scripts/gpu-check's '*Sanitize*' filter): both kernels, each
// way to the draw, every bound, a NaN row.
TEST_F(GpuSample, Sanitize_SmallShapes) {
  struct Shape {
    int64_t vocab;
    int32_t top_k;
    float top_p, min_p;
  };
  // Ranked: a short list (a rank a thread) with cuts and without; the general steps (777 tokens
  // ranked: sixteen a thread; 5000: met over the row). The nucleus kernel: with a cut by mass and
  // min_p, and with none; rows over clusters of 2, 4 and 16 CTAs (10000, 20000 and 70000 tokens).
  for (const Shape& c : {Shape{777, 8, 0.7f, 0.01f}, Shape{777, 8, 1.0f, 0.0f}, Shape{777, 776, 1.0f, 0.0f},
                         Shape{5000, 4999, 1.0f, 0.0f}, Shape{777, 0, 0.7f, 0.01f}, Shape{5000, 0, 1.0f, 0.0f},
                         Shape{10000, 0, 0.7f, 0.01f}, Shape{20000, 0, 0.7f, 0.01f}, Shape{70000, 0, 0.7f, 0.01f}}) {
    SCOPED_TRACE("V=" + std::to_string(c.vocab) + " top_k " + std::to_string(c.top_k));
    const HostLogits h = make_logits(DType::f16, 5, 1, c.vocab, Dist::nan_row);
    const DeviceLogits d = to_device(h, stream());
    softk::SamplingParams params;
    params.top_k = c.top_k;
    params.top_p = c.top_p;
    params.min_p = c.min_p;
    const GpuRun gpu = run_gpu(d, params, {}, stream());
    const GpuRun cpu = run_cpu(h, params, {});
    EXPECT_EQ(gpu.status, cpu.status);
    for (std::size_t r = 0; r < gpu.tokens.size(); ++r) {
      if (cpu.tokens[r] < 0) {
        EXPECT_EQ(gpu.tokens[r], -1) << "row " << r;
      }
    }
  }
  // The nucleus kernel's count of tied tokens: a cut inside a row of one logit, in one CTA and
  // over a cluster's.
  for (int64_t vocab : {777, 20000}) {
    const HostLogits flat =
        make_logits_with(DType::f16, 2, 1, vocab, [&](int64_t, float* x) { std::fill(x, x + vocab, 0.5f); });
    softk::SamplingParams half;
    half.top_p = 0.5f;
    const GpuRun gpu = run_gpu(to_device(flat, stream()), half, {}, stream());
    EXPECT_EQ(gpu.tokens, run_cpu(flat, half, {}).tokens) << "V=" << vocab;
  }
}

}  // namespace
