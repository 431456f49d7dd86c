// Seeded logits generators and host-side layouts for the softk tests.
//
// Values are generated as fp32 "master" values and converted to the test dtype with softk's own
// host converters (src/cpu/half_convert.hpp, tested bit-exhaustively in tests/cpu). The CPU
// oracle and the GPU op then read the *same* dtype bits, so a comparison measures the op, not
// the quantisation. `values` keeps the dtype-rounded fp32 value of every logical element for
// property checks that need the logits themselves (ties, ordering, top-k completeness).
//
// Every row is generated from its own seed (seed, row), so generation runs in parallel and a
// row's content does not depend on the thread count nor on the batch it is in.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "cpu/half_convert.hpp"
#include "softk/types.hpp"

namespace softk_test {

// ---------------------------------------------------------------------------------------------
// Small utilities

/// Runs f(begin, end) over [0, n) split across the hardware threads. Used for generation, the
/// oracle and comparisons of the large shapes (2^20 x 257, 2^24): the oracle is per-row
/// independent, so splitting rows changes nothing in its result.
template <class F>
void parallel_for(int64_t n, F&& f, int64_t min_per_thread = 1) {
  if (n <= 0) return;
  const int64_t hw = std::max<int64_t>(1, static_cast<int64_t>(std::thread::hardware_concurrency()));
  const int64_t threads = std::min<int64_t>({hw, int64_t{32}, std::max<int64_t>(1, n / std::max<int64_t>(1, min_per_thread))});
  if (threads <= 1) {
    f(int64_t{0}, n);
    return;
  }
  std::vector<std::thread> pool;
  const int64_t chunk = (n + threads - 1) / threads;
  for (int64_t t = 0; t < threads; ++t) {
    const int64_t begin = t * chunk, end = std::min(n, begin + chunk);
    if (begin < end) pool.emplace_back([&f, begin, end] { f(begin, end); });
  }
  for (auto& th : pool) th.join();
}

/// splitmix64: tiny, fast, good enough to generate test logits; seeded per (seed, row).
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  Rng(uint64_t seed, int64_t row) : state_(seed * 0x9E3779B97F4A7C15ull ^ (static_cast<uint64_t>(row) + 0x632BE59BD9B4E019ull)) {
    next();
  }
  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  /// Uniform in [0, 1).
  double uniform() { return static_cast<double>(next() >> 11) * (1.0 / 9007199254740992.0); }
  /// Uniform integer in [0, n).
  int64_t below(int64_t n) { return static_cast<int64_t>(next() % static_cast<uint64_t>(n)); }
  /// Standard normal (Box–Muller; the second value is cached).
  double normal() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    double u1 = uniform();
    if (u1 < 1e-300) u1 = 1e-300;
    const double u2 = uniform();
    const double radius = std::sqrt(-2.0 * std::log(u1));
    spare_ = radius * std::sin(6.283185307179586 * u2);
    has_spare_ = true;
    return radius * std::cos(6.283185307179586 * u2);
  }

 private:
  uint64_t state_;
  double spare_ = 0.0;
  bool has_spare_ = false;
};

inline std::size_t element_size(softk::DType dtype) { return dtype == softk::DType::f32 ? 4 : 2; }

/// Encodes one fp32 value in `dtype` at dst (element index i).
inline void store_as(softk::DType dtype, void* dst, int64_t i, float x) {
  switch (dtype) {
    case softk::DType::f32: static_cast<float*>(dst)[i] = x; return;
    case softk::DType::f16: static_cast<uint16_t*>(dst)[i] = softk::detail::f32_to_f16(x); return;
    case softk::DType::bf16: static_cast<uint16_t*>(dst)[i] = softk::detail::f32_to_bf16(x); return;
  }
}
/// Decodes element i of `dtype` at src to fp32.
inline float load_as(softk::DType dtype, const void* src, int64_t i) {
  switch (dtype) {
    case softk::DType::f32: return static_cast<const float*>(src)[i];
    case softk::DType::f16: return softk::detail::f16_to_f32(static_cast<const uint16_t*>(src)[i]);
    case softk::DType::bf16: return softk::detail::bf16_to_f32(static_cast<const uint16_t*>(src)[i]);
  }
  return std::numeric_limits<float>::quiet_NaN();
}
/// fp32 -> dtype -> fp32: the value the op actually sees.
inline float quantize(softk::DType dtype, float x) {
  uint32_t storage[1];
  store_as(dtype, storage, 0, x);
  return load_as(dtype, storage, 0);
}

inline const char* dtype_name(softk::DType dtype) {
  switch (dtype) {
    case softk::DType::f32: return "f32";
    case softk::DType::f16: return "f16";
    case softk::DType::bf16: return "bf16";
  }
  return "unknown";
}

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// ---------------------------------------------------------------------------------------------
// Distributions

enum class Dist {
  normal,              ///< N(0, 3^2): a wide, unremarkable row
  heavy_tailed,        ///< N(0, 1.5^2) + a sparse symmetric tail + injected outliers in [30, 80]
  llm_like,            ///< N(-2, 2^2) tail with 1..8 dominant logits in [12, 18]
  ascending,           ///< -8 .. +8 linearly: the top-k sits at the end (ties after f16/bf16 rounding)
  descending,          ///< +8 .. -8 linearly: the top-k sits at the front
  constant,            ///< every logit 0.75: all ties, so top-k must be indices 0..K-1
  spikes,              ///< N(0,1) with spikes at 0, V-1, V/2 and small vector-boundary indices
  adversarial_stride,  ///< the `count` largest at indices i*stride + channel (one thread's stride)
  pm_inf,              ///< N(0, 2^2) with ~2% -inf everywhere and +inf in some rows
  nan_row,             ///< normal rows; row rows/2 holds one NaN, the last row a NaN at V-1
  masked_rows,         ///< every third row (r % 3 == 1, or the only row) all -inf; others 5% -inf
  few_unmasked,        ///< only `count` finite logits per row, the rest -inf
  signed_zeros,        ///< the maxima are +0.0 and -0.0 mixed: equal logits, so ties by index
};

/// Every distribution, for the suites that sweep them all.
inline const Dist kAllDists[] = {Dist::normal,       Dist::heavy_tailed, Dist::llm_like,          Dist::ascending,
                                 Dist::descending,   Dist::constant,     Dist::spikes,            Dist::pm_inf,
                                 Dist::nan_row,      Dist::masked_rows,  Dist::few_unmasked,      Dist::signed_zeros,
                                 Dist::adversarial_stride};

inline const char* dist_name(Dist d) {
  switch (d) {
    case Dist::normal: return "normal";
    case Dist::heavy_tailed: return "heavy_tailed";
    case Dist::llm_like: return "llm_like";
    case Dist::ascending: return "ascending";
    case Dist::descending: return "descending";
    case Dist::constant: return "constant";
    case Dist::spikes: return "spikes";
    case Dist::adversarial_stride: return "adversarial_stride";
    case Dist::pm_inf: return "pm_inf";
    case Dist::nan_row: return "nan_row";
    case Dist::masked_rows: return "masked_rows";
    case Dist::few_unmasked: return "few_unmasked";
    case Dist::signed_zeros: return "signed_zeros";
  }
  return "unknown";
}

inline void PrintTo(Dist d, std::ostream* os) { *os << dist_name(d); }

struct DistParams {
  /// adversarial_stride: S, the distance between winners (a thread's stride: blockDim * vector width).
  int64_t stride = 256;
  /// adversarial_stride: c, the lane inside the stride; a negative value means "row-dependent"
  /// (row 0 uses 0, row 1 uses S-1, row 2 uses S/2+1, ...), so one launch covers several lanes.
  int64_t channel = -1;
  /// adversarial_stride: how many winners (use K); few_unmasked: finite logits per row.
  int64_t count = 16;
  /// adversarial_stride: winners all equal (ties must then go to the lower index).
  bool tied_winners = false;
  /// adversarial_stride: lanes side by side holding winners, `lane_gap` tokens apart: winner j
  /// at (j / lanes) * S + c + (j % lanes) * lane_gap (a vector's width apart: neighbouring threads).
  int64_t lanes = 1;
  int64_t lane_gap = 0;
};

/// Fills one row (V master fp32 values) of distribution `d`.
inline void fill_row(Dist d, const DistParams& p, uint64_t seed, int64_t row, int64_t rows, int64_t V, float* x) {
  Rng rng(seed, row);
  const auto fill_normal = [&](double mean, double sigma) {
    for (int64_t i = 0; i < V; ++i) x[i] = static_cast<float>(mean + sigma * rng.normal());
  };
  switch (d) {
    case Dist::normal: fill_normal(0.0, 3.0); return;
    case Dist::heavy_tailed: {
      fill_normal(0.0, 1.5);
      // Sparse symmetric tail: 2% of entries get |x| in [5, 40] (cubed uniform: mostly small).
      for (int64_t i = 0; i < V; ++i)
        if (rng.uniform() < 0.02) {
          const double u = rng.uniform();
          x[i] = static_cast<float>((rng.uniform() < 0.5 ? -1.0 : 1.0) * (5.0 + 35.0 * u * u * u));
        }
      // Injected outliers, "otherwise the tests are not meaningful" (llm.c): a few large positive
      // logits that dominate the row and a few large negative ones that underflow. Magnitudes stay
      // <= 80 so fp32 rounding of x - max stays far inside the tolerance (see compare.hpp).
      for (int j = 0; j < 3; ++j) x[rng.below(V)] = static_cast<float>(30.0 + 50.0 * rng.uniform());
      for (int j = 0; j < 3; ++j) x[rng.below(V)] = static_cast<float>(-30.0 - 50.0 * rng.uniform());
      return;
    }
    case Dist::llm_like: {
      fill_normal(-2.0, 2.0);
      const int64_t dominant = 1 + (row % 8);
      for (int64_t j = 0; j < dominant; ++j) x[rng.below(V)] = static_cast<float>(12.0 + 6.0 * rng.uniform());
      return;
    }
    case Dist::ascending:
    case Dist::descending:
      for (int64_t i = 0; i < V; ++i) {
        const double t = V == 1 ? 0.5 : static_cast<double>(i) / static_cast<double>(V - 1);
        x[i] = static_cast<float>(d == Dist::ascending ? -8.0 + 16.0 * t : 8.0 - 16.0 * t);
      }
      return;
    case Dist::constant: std::fill(x, x + V, 0.75f); return;
    case Dist::spikes: {
      fill_normal(0.0, 1.0);
      // Head, tail and middle first (they must be in the max and the sum: a kernel that drops a
      // misaligned head or a scalar tail is off by most of the mass), then vector-boundary indices.
      const int64_t where[] = {0, V - 1, V / 2, 1, 3, 4, 7, 8, 15, 16, 31, 32, 33};
      float height = 14.0f;
      for (int64_t i : where) {
        if (i >= 0 && i < V) x[i] = height;
        height -= 0.5f;
      }
      return;
    }
    case Dist::adversarial_stride: {
      // Background strictly below every winner, so the winners are exactly the top `count`.
      for (int64_t i = 0; i < V; ++i) x[i] = static_cast<float>(std::min(3.0, rng.normal()));
      const int64_t S = std::max<int64_t>(1, p.stride);
      int64_t c = p.channel;
      if (c < 0) {
        const int64_t lanes[] = {0, S - 1, S / 2 + 1, 1};
        c = lanes[row % 4] % S;
      }
      const int64_t side_by_side = std::max<int64_t>(1, p.lanes);
      for (int64_t j = 0; j < p.count; ++j) {
        const int64_t i = (j / side_by_side) * S + c + (j % side_by_side) * p.lane_gap;
        if (i >= V) break;
        // Random order inside [10, 14): the largest is not simply the first.
        x[i] = p.tied_winners ? 10.0f : static_cast<float>(10.0 + 4.0 * rng.uniform());
      }
      return;
    }
    case Dist::pm_inf: {
      fill_normal(0.0, 2.0);
      for (int64_t i = 0; i < V; ++i)
        if (rng.uniform() < 0.02) x[i] = -kInf;
      if (row % 3 == 0) x[0] = -kInf;                  // a masked misaligned head
      if (row % 4 == 1) {                              // two +inf: they share the mass equally
        x[rng.below(V)] = kInf;
        x[rng.below(V)] = kInf;
      } else if (row % 4 == 3) {
        x[V - 1] = kInf;                               // a lone +inf in the scalar tail
      }
      return;
    }
    case Dist::nan_row:
      fill_normal(0.0, 2.0);
      if (row == rows / 2) x[rng.below(V)] = kNaN;
      if (rows > 2 && row == rows - 1) x[V - 1] = kNaN;
      return;
    case Dist::masked_rows:
      if (row % 3 == 1 || rows == 1) {
        std::fill(x, x + V, -kInf);
        return;
      }
      fill_normal(0.0, 2.0);
      for (int64_t i = 0; i < V; ++i)
        if (rng.uniform() < 0.05) x[i] = -kInf;
      return;
    case Dist::few_unmasked: {
      std::fill(x, x + V, -kInf);
      const int64_t n = std::min<int64_t>(V, std::max<int64_t>(1, p.count));
      // Distinct random positions: a partial Fisher-Yates would need O(V) memory; rejection is
      // fine since n is small relative to V in every test (and exact when n == V).
      if (n * 2 >= V) {
        for (int64_t i = 0; i < n; ++i) x[i * V / n] = static_cast<float>(rng.normal() * 2.0);
      } else {
        int64_t placed = 0;
        while (placed < n) {
          const int64_t i = rng.below(V);
          if (x[i] != -kInf) continue;
          x[i] = static_cast<float>(rng.normal() * 2.0);
          ++placed;
        }
      }
      return;
    }
    case Dist::signed_zeros:
      for (int64_t i = 0; i < V; ++i) {
        const double u = rng.uniform();
        if (u < 0.3) x[i] = 0.0f;
        else if (u < 0.6) x[i] = -0.0f;
        else x[i] = static_cast<float>(-0.5 - std::fabs(rng.normal()));
      }
      return;
  }
}

// ---------------------------------------------------------------------------------------------
// Layout and host logits

struct Layout {
  /// 0: dense (the view says row_stride 0). Otherwise the explicit row stride, >= V; the padding
  /// between V and the stride is filled with garbage.
  int64_t row_stride = 0;
  /// Elements of garbage before the first row: 1 misaligns the base of an f32 row by 4 bytes and
  /// of an f16/bf16 row by 2 bytes, so 16-byte vector loads need a scalar head.
  int64_t offset = 0;
};

/// Garbage for bytes no op may use (padding, the misaligned prefix): NaN, the largest finite value
/// and +inf, cycling. If a kernel *uses* a padding element, softmax sees a NaN (the row turns
/// has_nan) or a huge value / +inf (it takes all the mass, and wins the top-k with an index >= V).
inline void store_garbage(softk::DType dtype, void* dst, int64_t i) {
  static const uint32_t f32_garbage[3] = {0x7fc00000u, 0x7f7fffffu, 0x7f800000u};
  static const uint16_t f16_garbage[3] = {0x7e00u, 0x7bffu, 0x7c00u};
  static const uint16_t bf16_garbage[3] = {0x7fc0u, 0x7f7fu, 0x7f80u};
  switch (dtype) {
    case softk::DType::f32: std::memcpy(static_cast<unsigned char*>(dst) + i * 4, &f32_garbage[i % 3], 4); return;
    case softk::DType::f16: static_cast<uint16_t*>(dst)[i] = f16_garbage[i % 3]; return;
    case softk::DType::bf16: static_cast<uint16_t*>(dst)[i] = bf16_garbage[i % 3]; return;
  }
}

struct HostLogits {
  softk::DType dtype = softk::DType::f32;
  int64_t batch = 1, steps = 1, vocab = 1;
  Layout layout;
  /// The whole allocation: layout.offset garbage elements, then rows * stride() elements.
  std::vector<unsigned char> bytes;
  /// rows * vocab dense: the dtype-rounded fp32 value of every logical element.
  std::vector<float> values;

  int64_t rows() const { return batch * steps; }
  int64_t stride() const { return layout.row_stride == 0 ? vocab : layout.row_stride; }
  std::size_t esize() const { return element_size(dtype); }
  float at(int64_t r, int64_t v) const { return values[static_cast<std::size_t>(r * vocab + v)]; }
  const float* row(int64_t r) const { return values.data() + r * vocab; }

  /// The view of this tensor when the allocation starts at `allocation_base` (host or device).
  softk::LogitsView view_at(const void* allocation_base) const {
    softk::LogitsView v;
    v.data = static_cast<const unsigned char*>(allocation_base) + static_cast<std::size_t>(layout.offset) * esize();
    v.dtype = dtype;
    v.batch = batch;
    v.steps = steps;
    v.vocab = vocab;
    v.row_stride = layout.row_stride;
    return v;
  }
  softk::LogitsView host_view() const { return view_at(bytes.data()); }
};

/// Builds [batch, steps, V] logits whose master fp32 row r is written by fill(r, x) (x has V
/// elements), in `dtype` with `layout`. Rows are filled in parallel: fill must be row-local.
template <class Fill>
HostLogits make_logits_with(softk::DType dtype, int64_t batch, int64_t steps, int64_t V, Fill&& fill, Layout layout = {}) {
  HostLogits h;
  h.dtype = dtype;
  h.batch = batch;
  h.steps = steps;
  h.vocab = V;
  h.layout = layout;
  const int64_t rows = h.rows(), stride = h.stride(), es = static_cast<int64_t>(h.esize());
  const int64_t total = layout.offset + rows * stride;
  h.bytes.resize(static_cast<std::size_t>(total * es));
  h.values.resize(static_cast<std::size_t>(rows * V));
  unsigned char* base = h.bytes.data();
  for (int64_t i = 0; i < layout.offset; ++i) store_garbage(dtype, base, i);
  parallel_for(rows, [&](int64_t r0, int64_t r1) {
    std::vector<float> master(static_cast<std::size_t>(V));
    for (int64_t r = r0; r < r1; ++r) {
      fill(r, master.data());
      const int64_t start = layout.offset + r * stride;  // 64-bit: rows * stride exceeds 2^31 in big cases
      float* vals = h.values.data() + r * V;
      for (int64_t v = 0; v < V; ++v) {
        store_as(dtype, base, start + v, master[static_cast<std::size_t>(v)]);
        vals[v] = load_as(dtype, base, start + v);
      }
      for (int64_t v = V; v < stride; ++v) store_garbage(dtype, base, start + v);
    }
  }, std::max<int64_t>(1, (int64_t{1} << 16) / std::max<int64_t>(1, V)));
  return h;
}

/// Builds [batch, steps, V] logits of distribution `d` in `dtype` with `layout`.
inline HostLogits make_logits(softk::DType dtype, int64_t batch, int64_t steps, int64_t V, Dist d,
                              const DistParams& params = {}, Layout layout = {}, uint64_t seed = 1234) {
  const int64_t rows = batch * steps;
  return make_logits_with(
      dtype, batch, steps, V, [&](int64_t r, float* x) { fill_row(d, params, seed, r, rows, V, x); }, layout);
}

/// Splits `rows` into a [batch, steps] pair, so tests also exercise steps > 1 (rows = B * T).
inline std::pair<int64_t, int64_t> split_rows(int64_t rows) {
  for (int64_t steps : {8, 4, 3, 2})
    if (rows % steps == 0) return {rows / steps, steps};
  return {rows, 1};
}

}  // namespace softk_test

namespace softk {
/// Test-only gtest printer, so parameterised test names and failure messages show "bf16" rather
/// than "4-byte object <02-00 00-00>". Found by argument-dependent lookup; defined nowhere else.
inline void PrintTo(DType d, std::ostream* os) { *os << softk_test::dtype_name(d); }
}  // namespace softk
