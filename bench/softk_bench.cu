// softk_bench: the vocab-size benchmarks. Every softmax and top-k algorithm, the CUB reference,
// the unfused pair and a device-to-device copy of the same bytes, over the shapes of issues 2-4.
//
// Benchmark names (select slices with --benchmark_filter, a POSIX extended regex):
//   softmax/<dtype>/<dist>/rows:<R>/V:<V>/<algo>            algo: auto register smem two_pass split_k cub copy
//   topk/<dtype>/<dist>/rows:<R>/V:<V>/K:<K>/<algo>         algo: auto fused radix_select [split_k] cub unfused copy
//   (top-k split_k only once softk::TopkAlgorithm has it)
//   sample/<dtype>/<dist>/rows:<R>/V:<V>/K:<K>/<bounds>   bounds: top_k top_p min_p
//   (softk::sample at top_k K, alone or with top_p 0.9 or min_p 0.05; K:0 is no top_k bound)
// Google Benchmark appends /iterations:1/manual_time. End a field with '/' in a filter
// (rows:1/ does not match rows:128).
//
// Each repetition is one Google Benchmark iteration holding up to --softk_iters timed bursts;
// its reported time is the median per-op GPU time over those bursts.
// Counters (per repetition; --benchmark_repetitions adds median aggregates):
//   us        median over the repetition's bursts of the per-op GPU time, microseconds
//   us_min    fastest burst's per-op time
//   GB/s      (bytes of logits read once + bytes of output written) / us
//   pct_copy  GB/s as a percentage of the device-to-device copy bandwidth measured at start-up
//   bursts, burst, slots, MB: timed bursts, ops per burst, L2-rotation slots, bytes counted per op
// An op slower than --softk_max_op_s is reported from one sample (label "slow: ...") and skipped
// in later repetitions.
//
// What "cub" and "unfused" are:
//   softmax cub: softk::reference::softmax (cub::BlockReduce, three passes), fp32 out.
//   topk cub:    softk::reference::topk (whole-row cub::DeviceSegmentedRadixSort + first K).
//   topk unfused: softk::softmax (automatic) writing the [rows, V] fp32 probabilities, then
//                softk::reference::topk over those probabilities (ranking by probability is the
//                ranking by logit). It is the "softmax kernel + CUB top-k" pair of issue 3: it
//                writes and re-reads the full probability tensor. The probabilities it outputs
//                are softmax(p) rather than p, a different number from the same work; the bench
//                never reads them. Its intermediate buffer is not rotated (a real pipeline reuses
//                one), which can only favour it.
//   copy:        cudaMemcpyAsync D2D moving the same byte count as the op (X = bytes/2 read and
//                X written), the bandwidth floor line.
#include <benchmark/benchmark.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "gpu_timer.cuh"
#include "logits_gen.cuh"
#include "softk/softk.hpp"

namespace softk_bench {
namespace {

using softk::DType;

// ---------------------------------------------------------------------------------------------
// Settings (softk_bench's own flags, parsed before Google Benchmark's).

struct Settings {
  int iters = 10;               // timed bursts per repetition (at most)
  double budget_s = 1.0;        // ... fewer once a repetition's bursts have taken this much wall time
  double max_op_s = 0.25;       // an op slower than this is timed once (see measure())
  double burst_us = 500.0;      // target GPU time of one burst
  int max_burst = 64;           // ops per burst at most (the stream queue must hold them all)
  double max_input_gib = 4.0;   // shapes with more logits than this are not registered
  double rotation_gib = 2.0;    // cap on all rotation slots together
  std::vector<DType> dtypes{DType::f32, DType::bf16};
  std::vector<Dist> dists{Dist::llm, Dist::normal};
  bool programmatic = true;     // top-k ops as programmatic dependent launches (their default)
};
Settings g_settings;

const char* kSoftkFlagsHelp =
    "softk_bench flags (besides Google Benchmark's):\n"
    "  --softk_iters=N          timed bursts per repetition, at most (default 10)\n"
    "  --softk_budget_s=S       stop a repetition's bursts after S s of wall time, keeping >= 1 (default 1)\n"
    "  --softk_max_op_s=S       an op slower than S s is reported from one sample, once (default 0.25)\n"
    "  --softk_burst_us=US      target GPU time of one burst of back-to-back ops (default 500)\n"
    "  --softk_max_burst=N      most ops in one burst (default 64)\n"
    "  --softk_dtypes=LIST      comma list of f32,bf16,f16 to register (default f32,bf16)\n"
    "  --softk_dists=LIST       comma list of llm,normal to register (default llm,normal)\n"
    "  --softk_programmatic=0|1 top-k ops as programmatic dependent launches (default 1, the ops' default)\n"
    "  --softk_max_input_gib=G  do not register shapes whose logits exceed G GiB (default 4)\n"
    "  --softk_rotation_gib=G   cap on the L2-rotation copies in total (default 2)\n";

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

[[noreturn]] void flag_error(const std::string& flag) {
  std::fprintf(stderr, "softk_bench: bad flag %s\n%s", flag.c_str(), kSoftkFlagsHelp);
  std::exit(2);
}

/// Removes --softk_* flags from argv (so Google Benchmark does not reject them) and applies them.
void parse_softk_flags(int* argc, char** argv) {
  int out = 1;
  for (int i = 1; i < *argc; ++i) {
    const std::string a = argv[i];
    auto value_of = [&](const char* name) -> const char* {
      const std::size_t n = std::strlen(name);
      return a.compare(0, n, name) == 0 && a.size() > n && a[n] == '=' ? argv[i] + n + 1 : nullptr;
    };
    const char* v = nullptr;
    if (a.rfind("--softk_", 0) != 0) {
      if (a == "--help" || a == "-h") std::fputs(kSoftkFlagsHelp, stdout);
      argv[out++] = argv[i];
      continue;
    }
    try {
      if ((v = value_of("--softk_iters"))) {
        g_settings.iters = std::max(1, std::stoi(v));
      } else if ((v = value_of("--softk_budget_s"))) {
        g_settings.budget_s = std::stod(v);
      } else if ((v = value_of("--softk_max_op_s"))) {
        g_settings.max_op_s = std::stod(v);
      } else if ((v = value_of("--softk_burst_us"))) {
        g_settings.burst_us = std::stod(v);
      } else if ((v = value_of("--softk_programmatic"))) {
        g_settings.programmatic = std::stoi(v) != 0;
      } else if ((v = value_of("--softk_max_burst"))) {
        g_settings.max_burst = std::max(1, std::stoi(v));
      } else if ((v = value_of("--softk_max_input_gib"))) {
        g_settings.max_input_gib = std::stod(v);
      } else if ((v = value_of("--softk_rotation_gib"))) {
        g_settings.rotation_gib = std::stod(v);
      } else if ((v = value_of("--softk_dtypes"))) {
        g_settings.dtypes.clear();
        for (const auto& s : split_list(v)) {
          if (s == "f32") g_settings.dtypes.push_back(DType::f32);
          else if (s == "bf16") g_settings.dtypes.push_back(DType::bf16);
          else if (s == "f16") g_settings.dtypes.push_back(DType::f16);
          else flag_error(a);
        }
      } else if ((v = value_of("--softk_dists"))) {
        g_settings.dists.clear();
        for (const auto& s : split_list(v)) {
          if (s == "llm") g_settings.dists.push_back(Dist::llm);
          else if (s == "normal") g_settings.dists.push_back(Dist::normal);
          else flag_error(a);
        }
      } else {
        flag_error(a);
      }
    } catch (const std::logic_error&) {  // stoi/stod
      flag_error(a);
    }
  }
  *argc = out;
  argv[out] = nullptr;
}

// ---------------------------------------------------------------------------------------------
// Runtime state: created in main() only when a device is present and benchmarks will run.

struct Runtime {
  DeviceFacts dev;
  cudaStream_t stream = nullptr;
  std::unique_ptr<BurstTimer> timer;
  std::string dead;  // non-empty once the CUDA context hit a sticky error
  uint64_t seed = 0x50f7b3ec0ffee123ull;
  // Grow-only buffers shared by all benchmarks.
  DeviceBuffer input;    // rotation slots of logits
  DeviceBuffer output;   // rotation slots of outputs (and of copy destinations)
  DeviceBuffer work;     // softk / reference workspace
  DeviceBuffer work2;    // second workspace (unfused: the reference top-k's)
  DeviceBuffer scratch;  // unfused: fp32 probabilities; copy: rotation slots of the source
};
Runtime* g_rt = nullptr;

// ---------------------------------------------------------------------------------------------
// Benchmark cases.

enum class Kind { softmax, topk, sample };

struct Case {
  Kind kind;
  DType dtype;
  Dist dist;
  int64_t rows;
  int64_t vocab;
  int32_t k;         // top-k and sample only
  std::string algo;  // see the file comment
};

const char* dtype_name(DType d) { return d == DType::f32 ? "f32" : d == DType::f16 ? "f16" : "bf16"; }
int64_t dtype_bytes(DType d) { return d == DType::f32 ? 4 : 2; }

std::string case_name(const Case& c) {
  std::string n = c.kind == Kind::softmax ? "softmax/" : c.kind == Kind::topk ? "topk/" : "sample/";
  n += std::string(dtype_name(c.dtype)) + "/" + to_string(c.dist) + "/rows:" + std::to_string(c.rows) +
       "/V:" + std::to_string(c.vocab) + "/";
  if (c.kind != Kind::softmax) n += "K:" + std::to_string(c.k) + "/";
  return n + c.algo;
}

softk::SoftmaxAlgorithm softmax_algorithm(const std::string& a) {
  if (a == "auto") return softk::SoftmaxAlgorithm::automatic;
  if (a == "register") return softk::SoftmaxAlgorithm::register_resident;
  if (a == "smem") return softk::SoftmaxAlgorithm::shared_memory;
  if (a == "two_pass") return softk::SoftmaxAlgorithm::two_pass;
  if (a == "split_k") return softk::SoftmaxAlgorithm::split_k;
  throw std::logic_error("unknown softmax algorithm " + a);
}

// The split-k top-k (issue 4) may not be in the softk being built yet: name the enumerator only
// when it exists, so this file compiles before and after it lands. Until then no top-k split_k
// rows are registered.
template <typename E, typename = void>
struct HasSplitK : std::false_type {};
template <typename E>
struct HasSplitK<E, std::void_t<decltype(E::split_k)>> : std::true_type {};

template <typename E = softk::TopkAlgorithm>
E topk_split_k() {
  if constexpr (HasSplitK<E>::value)
    return E::split_k;
  else
    throw softk::Error("topk algorithm split_k is not in this softk build (softk::TopkAlgorithm has no split_k)");
}

softk::TopkAlgorithm topk_algorithm(const std::string& a) {
  if (a == "auto") return softk::TopkAlgorithm::automatic;
  if (a == "fused") return softk::TopkAlgorithm::fused;
  if (a == "radix_select") return softk::TopkAlgorithm::radix_select;
  if (a == "split_k") return topk_split_k();
  throw std::logic_error("unknown top-k algorithm " + a);
}

// ---------------------------------------------------------------------------------------------
// One op ready to launch: buffers reserved, inputs generated, workspace sized.

struct Op {
  int64_t slots = 1;
  double bytes = 0.0;  // bytes of logits read once + bytes of output written
  /// Most ops per burst. The whole burst is queued behind the stream hold, and the CUB-based
  /// ops launch ~10 kernels each: a queue of ~1000 pending launches would block the host.
  int max_burst = 64;
  std::function<void(int64_t slot)> launch;
};

constexpr int64_t kAlign = 256;  // slot alignment: every slot starts 16-byte (vector-load) aligned

/// A non-null, aligned pointer for the workspace-size queries, which read only shape and dtype
/// (the buffers are reserved after the query, so the real pointer is not known yet).
alignas(256) const float kSizeQueryBacking[64] = {};
const void* const kSizeQueryData = kSizeQueryBacking;

/// Generates rotation slots of logits into `buf` unless it already holds them.
void ensure_logits(DeviceBuffer& buf, DType dtype, Dist dist, int64_t rows, int64_t vocab, int64_t slots,
                   int64_t slot_bytes) {
  std::string tag = std::string(dtype_name(dtype)) + "/" + to_string(dist) + "/" + std::to_string(rows) + "x" +
                    std::to_string(vocab) + "@" + std::to_string(slot_bytes);
  if (buf.tag == tag && buf.filled >= slots) return;
  fill_logits(buf.data(), dtype, dist, slots, rows, vocab, slot_bytes, g_rt->seed, g_rt->stream);
  buf.tag = std::move(tag);
  buf.filled = slots;
}

/// An op counting `bytes` a launch, its inputs and outputs rotating over slots of `slot_bytes`.
Op rotating_op(double bytes, int64_t slot_bytes) {
  Op op;
  op.bytes = bytes;
  op.slots = rotation_slots(slot_bytes, g_rt->dev.l2_bytes, int64_t(g_settings.rotation_gib * double(1ll << 30)));
  return op;
}

Op make_copy_op(double op_bytes) {
  Runtime& rt = *g_rt;
  const int64_t x = int64_t(op_bytes / 2);  // read x + write x = the op's traffic
  const int64_t slot = round_up(x, kAlign);
  Op op = rotating_op(op_bytes, 2 * slot);
  reserve_all({{&rt.scratch, std::size_t(op.slots * slot)}, {&rt.output, std::size_t(op.slots * slot)}},
              {&rt.input, &rt.work, &rt.work2});
  // Source content: fp32 normal values (never zeros; a memcpy does not look at them).
  ensure_logits(rt.scratch, DType::f32, Dist::normal, 1, slot / 4, op.slots, slot);
  char* src = static_cast<char*>(rt.scratch.data());
  char* dst = static_cast<char*>(rt.output.data());
  cudaStream_t stream = rt.stream;
  op.launch = [=](int64_t s) {
    BENCH_CHECK(cudaMemcpyAsync(dst + s * slot, src + s * slot, std::size_t(x), cudaMemcpyDeviceToDevice, stream));
  };
  return op;
}

/// A case's logits as the size queries see them: shape and dtype (data is a placeholder).
softk::LogitsView size_query_view(const Case& c) {
  softk::LogitsView view;
  view.dtype = c.dtype;
  view.batch = c.rows;
  view.steps = 1;
  view.vocab = c.vocab;
  view.data = kSizeQueryData;
  return view;
}

/// Where an op with one workspace reads and writes: the rotation slots of logits (generated) and
/// of outputs, reserved with `workspace_bytes` of workspace.
struct SlotBuffers {
  const char* in;
  char* out;
  void* work;  ///< null where no workspace is needed
};

SlotBuffers reserve_slots(const Case& c, const Op& op, int64_t in_slot, int64_t out_slot, std::size_t workspace_bytes) {
  Runtime& rt = *g_rt;
  reserve_all({{&rt.input, std::size_t(op.slots * in_slot)},
               {&rt.output, std::size_t(op.slots * out_slot)},
               {&rt.work, workspace_bytes}},
              {&rt.scratch, &rt.work2});
  ensure_logits(rt.input, c.dtype, c.dist, c.rows, c.vocab, op.slots, in_slot);
  return {static_cast<const char*>(rt.input.data()), static_cast<char*>(rt.output.data()),
          workspace_bytes ? rt.work.data() : nullptr};
}

Op make_softmax_op(const Case& c) {
  const int64_t in_bytes = c.rows * c.vocab * dtype_bytes(c.dtype);
  const int64_t out_bytes = c.rows * c.vocab * 4;  // fp32 probabilities
  if (c.algo == "copy") return make_copy_op(double(in_bytes + out_bytes));

  const int64_t in_slot = round_up(in_bytes, kAlign);
  const int64_t out_slot = round_up(out_bytes, kAlign);
  Op op = rotating_op(double(in_bytes + out_bytes), in_slot + out_slot);

  const softk::LogitsView view = size_query_view(c);
  softk::SoftmaxOptions opt;
  opt.out_dtype = DType::f32;
  const bool reference = c.algo == "cub";
  if (!reference) opt.algorithm = softmax_algorithm(c.algo);
  const std::size_t ws = reference ? 0 : softk::softmax_workspace_size(view, opt);

  const SlotBuffers buffers = reserve_slots(c, op, in_slot, out_slot, ws);
  cudaStream_t stream = g_rt->stream;
  op.launch = [=](int64_t s) mutable {
    softk::LogitsView v = view;
    v.data = buffers.in + s * in_slot;
    char* out = buffers.out + s * out_slot;
    if (reference)
      softk::reference::softmax(v, reinterpret_cast<float*>(out), opt, stream);
    else
      softk::softmax(v, out, opt, buffers.work, ws, stream);
  };
  return op;
}

Op make_topk_op(const Case& c) {
  Runtime& rt = *g_rt;
  const int64_t in_bytes = c.rows * c.vocab * dtype_bytes(c.dtype);
  const int64_t probs_bytes = c.rows * int64_t(c.k) * 4;
  const int64_t out_bytes = 2 * probs_bytes;  // fp32 probabilities + int32 indices
  if (c.algo == "copy") return make_copy_op(double(in_bytes + out_bytes));

  const int64_t in_slot = round_up(in_bytes, kAlign);
  const int64_t idx_offset = round_up(probs_bytes, kAlign);
  const int64_t out_slot = idx_offset + round_up(probs_bytes, kAlign);
  Op op = rotating_op(double(in_bytes + out_bytes), in_slot + out_slot);

  const softk::LogitsView view = size_query_view(c);
  const int32_t k = c.k;
  softk::TopkOptions opt;
  opt.programmatic_launch = g_settings.programmatic;

  // The unfused pair: fast softmax into fp32 probabilities, then the CUB top-k over them.
  softk::SoftmaxOptions sm_opt;
  softk::LogitsView probs_view;
  probs_view.dtype = DType::f32;
  probs_view.batch = c.rows;
  probs_view.steps = 1;
  probs_view.vocab = c.vocab;
  probs_view.data = kSizeQueryData;

  const bool reference = c.algo == "cub";
  const bool unfused = c.algo == "unfused";
  if (reference || unfused) op.max_burst = 16;
  std::size_t ws = 0, ws2 = 0, scratch = 0;
  if (reference) {
    ws = softk::reference::topk_workspace_size(view, k);
  } else if (unfused) {
    ws = softk::softmax_workspace_size(view, sm_opt);
    ws2 = softk::reference::topk_workspace_size(probs_view, k);
    scratch = std::size_t(c.rows * c.vocab * 4);
  } else {
    opt.algorithm = topk_algorithm(c.algo);
    ws = softk::topk_workspace_size(view, k, opt);
  }

  reserve_all({{&rt.input, std::size_t(op.slots * in_slot)},
               {&rt.output, std::size_t(op.slots * out_slot)},
               {&rt.work, ws},
               {&rt.work2, ws2},
               {&rt.scratch, scratch}},
              {});
  ensure_logits(rt.input, c.dtype, c.dist, c.rows, c.vocab, op.slots, in_slot);
  if (unfused) rt.scratch.tag.clear();  // its contents are about to be overwritten

  const char* in = static_cast<const char*>(rt.input.data());
  char* out = static_cast<char*>(rt.output.data());
  void* work = ws ? rt.work.data() : nullptr;
  void* work2 = ws2 ? rt.work2.data() : nullptr;
  float* probs_full = unfused ? static_cast<float*>(rt.scratch.data()) : nullptr;
  cudaStream_t stream = rt.stream;
  op.launch = [=](int64_t s) mutable {
    softk::LogitsView v = view;
    v.data = in + s * in_slot;
    float* probs = reinterpret_cast<float*>(out + s * out_slot);
    int32_t* indices = reinterpret_cast<int32_t*>(out + s * out_slot + idx_offset);
    if (reference) {
      softk::reference::topk(v, k, probs, indices, opt, work, ws, stream);
    } else if (unfused) {
      softk::softmax(v, probs_full, sm_opt, work, ws, stream);
      softk::LogitsView pv = probs_view;
      pv.data = probs_full;
      softk::reference::topk(pv, k, probs, indices, opt, work2, ws2, stream);
    } else {
      softk::topk(v, k, probs, indices, opt, work, ws, stream);
    }
  };
  return op;
}

/// A sample case's parameters: top_k K (0: none) and the bound its name gives.
softk::SamplingParams sampling_params(const Case& c) {
  softk::SamplingParams p;
  p.top_k = c.k;
  if (c.algo == "top_p")
    p.top_p = 0.9f;
  else if (c.algo == "min_p")
    p.min_p = 0.05f;
  else if (c.algo != "top_k")
    throw std::logic_error("unknown sampling bound " + c.algo);
  return p;
}

Op make_sample_op(const Case& c) {
  const int64_t in_bytes = c.rows * c.vocab * dtype_bytes(c.dtype);
  const int64_t in_slot = round_up(in_bytes, kAlign);
  const int64_t out_slot = round_up(c.rows * 4, kAlign);  // int32 tokens
  Op op = rotating_op(double(in_bytes + c.rows * 4), in_slot + out_slot);

  const softk::LogitsView view = size_query_view(c);
  const softk::SamplingParams params = sampling_params(c);
  const std::size_t ws = softk::sample_workspace_size(view, params);
  const SlotBuffers buffers = reserve_slots(c, op, in_slot, out_slot, ws);
  cudaStream_t stream = g_rt->stream;
  op.launch = [=](int64_t s) {
    softk::LogitsView v = view;
    v.data = buffers.in + s * in_slot;
    softk::sample(v, params, reinterpret_cast<int32_t*>(buffers.out + s * out_slot), nullptr, buffers.work, ws, stream);
  };
  return op;
}

// ---------------------------------------------------------------------------------------------
// Measurement.

/// Benchmarks found too slow to repeat (see measure()); later repetitions skip them.
std::set<std::string> g_slow_cases;

/// One Google Benchmark iteration = one measurement session (registered with Iterations(1)):
/// up to --softk_iters bursts, fewer once --softk_budget_s of wall time is spent, and the
/// iteration time reported is the median per-op time over the bursts. Repetitions then give
/// the spread and the median aggregate.
///
/// An op whose first (warm-up) launch takes longer than --softk_max_op_s (the CUB reference at
/// a few rows x tens of millions of columns runs one block per row for seconds) is reported
/// from that one sample, labelled, and skipped in later repetitions: at that length one sample
/// is precise to a few percent, and repeating it would spend minutes of device time.
void measure(benchmark::State& state, const Op& op, const std::string& name) {
  Runtime& rt = *g_rt;
  BurstTimer& timer = *rt.timer;
  int64_t next = 0;
  auto launch_next = [&] {
    op.launch(next);
    next = next + 1 == op.slots ? 0 : next + 1;
  };
  auto report = [&](const std::vector<double>& per_op, int burst, const std::vector<double>& host_per_op = {}) {
    const double med = median_of(per_op);
    const double gbps = op.bytes / med / 1e9;
    state.counters["us"] = med * 1e6;
    state.counters["us_min"] = *std::min_element(per_op.begin(), per_op.end()) * 1e6;
    state.counters["GB/s"] = gbps;
    state.counters["pct_copy"] = 100.0 * gbps / rt.dev.copy_gbps;
    state.counters["bursts"] = double(per_op.size());
    state.counters["burst"] = burst;
    state.counters["slots"] = double(op.slots);
    state.counters["MB"] = op.bytes / 1e6;
    if (!host_per_op.empty()) state.counters["host_us"] = median_of(host_per_op) * 1e6;
  };

  // Warm-up, not held: a kernel's first launch may load its module (CUDA's lazy loading), and the
  // load waits for the device to go idle, which it cannot while the hold spins. Held, the first
  // launch of each kernel timed out the hold and the op was then timed unheld, launch overhead
  // included (8 x 1000 f32 K = 1 read ~1.2 us slower under auto than forced fused, the same
  // kernel: auto ran first). Any softk::Error of a forced algorithm surfaces here too.
  timer.begin(false);
  launch_next();
  const double first = timer.end();
  if (first > g_settings.max_op_s) {  // held or not, launch overhead is nothing at this length
    g_slow_cases.insert(name);
    state.SetLabel("slow: one sample, not repeated");
    for (auto _ : state) state.SetIterationTime(first);
    report({first}, 1);
    return;
  }

  // Calibrate the burst length from one held op, which also tells a host-blocking op.
  bool hold = true;
  timer.begin(hold);
  launch_next();
  double one = timer.end();
  if (timer.timed_out()) {
    // The enqueue of one op blocked until the hold gave up: the op synchronises the host (or
    // the stream queue filled). Time it unheld; the label flags that host time is included.
    hold = false;
    state.SetLabel("host-blocking op: timed without the stream hold (includes launch overhead)");
    timer.begin(hold);
    launch_next();
    one = timer.end();
  }
  const int burst = int(std::clamp<double>(std::ceil(g_settings.burst_us * 1e-6 / std::max(one, 1e-7)), 1.0,
                                           double(std::min(g_settings.max_burst, op.max_burst))));
  if (one < 0.05) {  // one warm burst at the chosen length, unless an op takes > 50 ms
    timer.begin(hold);
    for (int i = 0; i < burst; ++i) launch_next();
    timer.end();
  }

  // Behind the hold the enqueue never waits for the GPU, so its wall time is the host's cost of
  // an op: what a decode loop that does not replay a CUDA graph pays per call.
  std::vector<double> per_op, host_per_op;
  per_op.reserve(std::size_t(g_settings.iters));
  host_per_op.reserve(std::size_t(g_settings.iters));
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int b = 0; b < g_settings.iters; ++b) {
      timer.begin(hold);
      const auto queued_from = std::chrono::steady_clock::now();
      for (int i = 0; i < burst; ++i) launch_next();
      if (hold)
        host_per_op.push_back(
            std::chrono::duration<double>(std::chrono::steady_clock::now() - queued_from).count() / burst);
      per_op.push_back(timer.end() / burst);
      if (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > g_settings.budget_s) break;
    }
    state.SetIterationTime(median_of(per_op));
  }
  BENCH_CHECK(cudaGetLastError());
  report(per_op, burst, host_per_op);
}

/// After a CUDA failure: clear a non-sticky error; remember a sticky one (the context is lost
/// and every later benchmark would fail the same way).
void after_cuda_failure() {
  Runtime& rt = *g_rt;
  (void)cudaGetLastError();
  cudaError_t e = cudaStreamSynchronize(rt.stream);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    e = cudaDeviceSynchronize();
    if (e != cudaSuccess) rt.dead = cudaGetErrorString(e);
  }
}

void run_case(benchmark::State& state, const Case& c) {
  if (!g_rt) {
    state.SkipWithError("no CUDA device");
    return;
  }
  if (!g_rt->dead.empty()) {
    state.SkipWithError(("CUDA context lost earlier: " + g_rt->dead).c_str());
    return;
  }
  const std::string name = case_name(c);
  if (g_slow_cases.count(name)) {
    state.SkipWithError("slow: timed once, in its first repetition");
    return;
  }
  try {
    const Op op = c.kind == Kind::softmax ? make_softmax_op(c) : c.kind == Kind::topk ? make_topk_op(c)
                                                                                        : make_sample_op(c);
    measure(state, op, name);
  } catch (const softk::Error& e) {  // a forced algorithm rejecting the shape, by contract
    g_rt->timer->release();          // the throw may have come inside a held burst
    (void)cudaStreamSynchronize(g_rt->stream);
    state.SkipWithError((std::string("rejected: ") + e.what()).c_str());
  } catch (const std::exception& e) {  // softk::CudaError, BenchCudaError, out of memory, ...
    g_rt->timer->release();
    after_cuda_failure();
    std::string msg = std::string("failed: ") + e.what();
    if (!g_rt->dead.empty()) {
      msg += " [sticky: CUDA context lost, later benchmarks will be skipped]";
      std::fprintf(stderr, "softk_bench: %s: %s\n", case_name(c).c_str(), msg.c_str());
    }
    state.SkipWithError(msg.c_str());
  }
}

// ---------------------------------------------------------------------------------------------
// Registration: names and shapes only, no CUDA, so --benchmark_list_tests works anywhere.

void register_case(const Case& c) {
  // Iterations(1): one iteration is a whole measurement session of many bursts (measure()).
  benchmark::RegisterBenchmark(case_name(c).c_str(), [c](benchmark::State& st) { run_case(st, c); })
      ->UseManualTime()
      ->Iterations(1)
      ->Unit(benchmark::kMicrosecond);
}

bool input_fits(int64_t rows, int64_t vocab, DType dtype) {
  return double(rows) * double(vocab) * double(dtype_bytes(dtype)) <= g_settings.max_input_gib * double(1ll << 30);
}

void register_softmax() {
  std::vector<std::pair<int64_t, int64_t>> shapes;  // (rows, V)
  // The seed document's table.
  shapes.emplace_back(128, 1024);
  for (int64_t v : {1024, 2048, 4096, 6144, 8192}) shapes.emplace_back(2048, v);
  for (int64_t v = 16384; v <= 33554432; v *= 2) shapes.emplace_back(4, v);
  // Decode shapes.
  for (int64_t r : {1, 8, 64, 256})
    for (int64_t v : {32000, 128256, 151936, 256000}) shapes.emplace_back(r, v);
  // The split-k / two-pass crossover in rows (dispatch.cpp, choose_softmax_algorithm).
  for (int64_t r : {16, 32, 96, 128})
    for (int64_t v : {32000, 128256, 256000}) shapes.emplace_back(r, v);

  const char* algos[] = {"auto", "register", "smem", "two_pass", "split_k", "cub", "copy"};
  for (DType dt : g_settings.dtypes)
    for (Dist dist : g_settings.dists)
      for (const auto& [rows, v] : shapes) {
        if (!input_fits(rows, v, dt)) continue;
        for (const char* a : algos) register_case(Case{Kind::softmax, dt, dist, rows, v, 0, a});
      }
}

void register_topk() {
  std::set<std::tuple<int64_t, int64_t, int32_t>> shapes;  // (rows, V, K), sorted and unique
  const int32_t ks[] = {1, 50, 256, 1024};
  // Issue 3: batch sizes x LLM vocabularies; 128 rows for the dispatcher's one-wave-of-clusters
  // crossover (it may pick split-k past SMs / 4 rows where the batch runs in one wave).
  for (int32_t k : ks)
    for (int64_t r : {1, 8, 64, 128, 256, 1024})
      for (int64_t v : {32000, 50257, 128256, 151936, 201088, 256000, 1048576}) shapes.emplace(r, v, k);
  // Issue 3: small rows, large batches.
  for (int32_t k : ks)
    for (int64_t r : {2048, 8192})
      for (int64_t v : {1000, 4000, 16000}) shapes.emplace(r, v, k);
  // The slotted seeds' crossover in V (topk_fused.cu, rows_take_slotted_seeds): K = 1024 on rows
  // of 2000-16000 tokens, in one wave of blocks (256 rows) and in several (2048).
  for (int64_t r : {256, 2048})
    for (int64_t v : {2000, 4000, 8000, 16000}) shapes.emplace(r, v, 1024);
  // The warp-per-row crossover in rows (dispatch.cpp, warp_rows_pay): fused runs such rows a
  // warp each at any batch; auto a block each within one wave of blocks, except rows of at most
  // 1024 tokens (8 KB at K = 1). K = 256: the whole-row sort, at every batch.
  for (int32_t k : {1, 50, 256})
    for (int64_t r : {8, 64, 256, 512, 1024})
      for (int64_t v : {1000, 2000, 4000}) shapes.emplace(r, v, k);
  // Rows of 8000 tokens at K = 1, 50 and 256: at K <= 64 a block each by spans within one wave of
  // blocks and a warp each past it (32 KB of fp32); at K > 64 the slotted seeds (32 KB of fp32:
  // their limit).
  for (int32_t k : {1, 50, 256})
    for (int64_t r : {256, 2048, 8192}) shapes.emplace(r, 8000, k);
  // K = 8 and 16 on short rows: the warp's seed rounds (topk_warp_row.cu).
  for (int32_t k : {8, 16})
    for (int64_t v : {1000, 4000}) shapes.emplace(8192, v, k);
  // Mixture-of-experts routing: many tokens over few experts (8 as in Mixtral, 128 and 256 as in
  // Qwen3-MoE and DeepSeek-V3), K 1 to 8: the shortest rows a warp takes.
  for (int32_t k : {1, 2, 8})
    for (int64_t v : {8, 64, 128, 256}) shapes.emplace(16384, v, k);
  // Issue 4: few rows x vocabularies up to 64M (split-k); 32 rows for the dispatcher's
  // crossover (it may pick split-k up to SMs / 4 rows).
  for (int32_t k : ks)
    for (int64_t r : {1, 2, 4, 8, 16, 32})
      for (int64_t v : {32000, 128256, 151936, 201088, 256000, 1048576, 4194304, 16777216, 67108864})
        shapes.emplace(r, v, k);

  // split_k rows appear once softk::TopkAlgorithm has split_k (issue 4); no bench change needed.
  std::vector<const char*> algos{"auto", "fused", "radix_select", "cub", "unfused", "copy"};
  if (HasSplitK<softk::TopkAlgorithm>::value) algos.insert(algos.begin() + 3, "split_k");
  for (DType dt : g_settings.dtypes)
    for (Dist dist : g_settings.dists)
      for (const auto& [rows, v, k] : shapes) {
        if (!input_fits(rows, v, dt) || k > v) continue;
        for (const char* a : algos) register_case(Case{Kind::topk, dt, dist, rows, v, k, a});
      }
}

// Sampling at decode batches: top_k 50 alone and with top_p or min_p (the bound and the draw on
// top of topk/K:50/auto's ranking at the same shapes), and top_p or min_p with no top_k (K:0),
// which rank nothing (the nucleus kernel). V = 50257 puts bf16 rows off 16-byte boundaries,
// where the row passes read scalars.
void register_sample() {
  for (DType dt : g_settings.dtypes)
    for (Dist dist : g_settings.dists)
      for (int64_t rows : {1, 8, 64, 256})
        for (int64_t v : {32000, 50257, 128256, 256000}) {
          for (const char* bound : {"top_k", "top_p", "min_p"})
            register_case(Case{Kind::sample, dt, dist, rows, v, 50, bound});
          for (const char* bound : {"top_p", "min_p"}) register_case(Case{Kind::sample, dt, dist, rows, v, 0, bound});
        }
}

bool listing_only(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--benchmark_list_tests" || a == "--benchmark_list_tests=true" || a == "--benchmark_list_tests=1")
      return true;
  }
  return false;
}

/// Opens device 0, measures the copy ceiling, records the context. False if there is no device.
bool init_runtime() {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    std::fprintf(stderr,
                 "softk_bench: no CUDA device (%s); nothing to time. "
                 "--benchmark_list_tests lists the benchmarks without a GPU.\n",
                 e != cudaSuccess ? cudaGetErrorString(e) : "device count is 0");
    return false;
  }
  g_rt = new Runtime;
  Runtime& rt = *g_rt;
  BENCH_CHECK(cudaSetDevice(0));
  rt.dev = query_device(0);
  BENCH_CHECK(cudaStreamCreateWithFlags(&rt.stream, cudaStreamNonBlocking));
  rt.timer = std::make_unique<BurstTimer>(rt.stream);
  measure_copy_bandwidth(rt.dev, rt.stream);

  const DeviceFacts& d = rt.dev;
  std::fprintf(stderr,
               "softk_bench: %s, %d SMs, sm_%d%d, L2 %.1f MiB, %.1f GiB; copy bandwidth %.1f GB/s "
               "(D2D memcpy of %.0f MiB, read+write, median of 15, spread %.1f%%)\n",
               d.name.c_str(), d.sm_count, d.cc_major, d.cc_minor, double(d.l2_bytes) / (1 << 20),
               double(d.global_mem) / (1ll << 30), d.copy_gbps, double(d.copy_bytes) / (1 << 20),
               100.0 * d.copy_spread);
  auto num = [](double x, int prec) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.*f", prec, x);
    return std::string(buf);
  };
  benchmark::AddCustomContext("gpu", d.name);
  benchmark::AddCustomContext("sm_count", std::to_string(d.sm_count));
  benchmark::AddCustomContext("compute_capability", std::to_string(d.cc_major) + "." + std::to_string(d.cc_minor));
  benchmark::AddCustomContext("l2_bytes", std::to_string(d.l2_bytes));
  benchmark::AddCustomContext("global_mem_bytes", std::to_string(d.global_mem));
  benchmark::AddCustomContext("programmatic_launch", g_settings.programmatic ? "1" : "0");
  benchmark::AddCustomContext("cuda_runtime", std::to_string(d.runtime_version));
  benchmark::AddCustomContext("cuda_driver", std::to_string(d.driver_version));
  benchmark::AddCustomContext("copy_GBps", num(d.copy_gbps, 1));
  benchmark::AddCustomContext("copy_bytes", std::to_string(d.copy_bytes));
  benchmark::AddCustomContext("copy_spread_pct", num(100.0 * d.copy_spread, 2));
  benchmark::AddCustomContext(
      "timing", "per-op GPU time = CUDA-event time of a burst of back-to-back ops behind a host-released "
                "spin kernel / burst length; inputs and outputs rotate over > 2x L2; workspace reused");
  benchmark::AddCustomContext("burst_us", num(g_settings.burst_us, 0));
  benchmark::AddCustomContext("bursts_per_repetition", std::to_string(g_settings.iters));
  benchmark::AddCustomContext("budget_s", num(g_settings.budget_s, 2));
  benchmark::AddCustomContext("max_op_s", num(g_settings.max_op_s, 3));
  return true;
}

}  // namespace
}  // namespace softk_bench

int main(int argc, char** argv) {
  using namespace softk_bench;
  parse_softk_flags(&argc, argv);
  register_softmax();
  register_topk();
  register_sample();
  const bool listing = listing_only(argc, argv);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  if (!listing) {
    try {
      if (!init_runtime()) return 1;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "softk_bench: start-up failed: %s\n", e.what());
      return 1;
    }
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  if (g_rt) {
    // Free the buffers and the timer before the context goes away at exit.
    g_rt->input.release();
    g_rt->output.release();
    g_rt->work.release();
    g_rt->work2.release();
    g_rt->scratch.release();
    g_rt->timer.reset();
    cudaStreamDestroy(g_rt->stream);
    delete g_rt;
    g_rt = nullptr;
  }
  return 0;
}
