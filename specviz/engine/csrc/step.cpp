// The lean step in one native call: every decoder layer of a Llama-family target for the new rows of one
// run or of several (a batched pass, each run with its own KV cache), the caches written in place
// (specviz/engine/native_step.py calls it; the final norm and the LM head stay in Python, one call each).
//
// Why: once the linears read the weights as shipped, a step's many small operations (norms, rotary, the
// cache writes, attention, SiLU, the residual adds: about 20 torch calls a layer, 30 layers) cost about
// as long as its linears (docs/benchmarks.md, "The weights as shipped"). Here each is a loop over floats, with
// no dispatch between them.
//
// Numbers: float32 throughout, every sum in a fixed order that does not depend on T or on the other runs,
// so a row's numbers are the same computed alone or among other rows (a verification pass and a one-token
// step agree bit for bit, as the kernel's products do, and so do a run's solo and batched passes). They differ from torch's operations in the last bits (other
// summation orders, fused multiply-adds, expf), as torch's own kernels differ between CPUs; the tests hold
// them to the lean forward's Python loop and to transformers' greedy tokens (tests/test_native_step.py,
// tests/test_offline_exactness.py).
//
//   per layer: a = rms(x) w_in; q, k, v = a Wqkv; rotary on q, k; k, v into the cache at past..past+T-1;
//              x += Wo attention(q, cache keys, cache values); m = rms(x) w_post;
//              x += Wdown (silu(m Wgate) * m Wup)

#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>

#include <cmath>
#include <algorithm>
#include <cstring>
#include <optional>
#include <vector>

at::Tensor gemv(const at::Tensor& x, const at::Tensor& packed, int64_t N);  // gemv.cpp
at::Tensor gemv_blocks(const at::Tensor& x, const at::Tensor& layout, int64_t N, int64_t format);

namespace {

typedef float v16 __attribute__((vector_size(64)));

// x [T, K] times one linear's layout: format 0 is the float32 layout (pack_rows), else ggml's number.
at::Tensor linear(const at::Tensor& x, const at::Tensor& layout, int64_t format, int64_t N) {
  return format == 0 ? gemv(x, layout, N) : gemv_blocks(x, layout, N, format);
}

// The sum of n floats (n a multiple of 16) in 16 lanes, then the lanes in a fixed tree.
inline float lanes_sum(v16 acc) {
  float l[16];
  std::memcpy(l, &acc, sizeof(l));
  float s8[8], s4[4];
  for (int i = 0; i < 8; ++i) s8[i] = l[i] + l[i + 8];
  for (int i = 0; i < 4; ++i) s4[i] = s8[i] + s8[i + 4];
  return (s4[0] + s4[2]) + (s4[1] + s4[3]);
}

inline float dot(const float* a, const float* b, int64_t n) {
  v16 acc = {};
  for (int64_t i = 0; i < n; i += 16) {
    v16 x, y;
    std::memcpy(&x, a + i, sizeof(v16));
    std::memcpy(&y, b + i, sizeof(v16));
    acc += x * y;
  }
  return lanes_sum(acc);
}

// As LlamaRMSNorm in float32: out = w * (x * 1/sqrt(mean(x^2) + eps)), row by row.
at::Tensor rms(const at::Tensor& x, const at::Tensor& w, double eps) {
  const int64_t T = x.size(0), D = x.size(1);
  at::Tensor out = at::empty({T, D}, x.options());
  const float* xs = x.data_ptr<float>();
  const float* ws = w.data_ptr<float>();
  float* os = out.data_ptr<float>();
  for (int64_t t = 0; t < T; ++t) {
    const float* row = xs + t * D;
    const float r = 1.0f / std::sqrt(dot(row, row, D) / static_cast<float>(D) + static_cast<float>(eps));
    for (int64_t i = 0; i < D; ++i) os[t * D + i] = ws[i] * (row[i] * r);
  }
  return out;
}

// Rotary as transformers' rotate_half: out_i = x_i cos_i + (i < h ? -x_{i+h} : x_{i-h}) sin_i, h = hd/2.
inline void rotate(const float* x, const float* cos, const float* sin, int64_t hd, float* out) {
  const int64_t half = hd / 2;
  for (int64_t i = 0; i < hd; ++i) {
    const float other = i < half ? -x[i + half] : x[i - half];
    out[i] = x[i] * cos[i] + other * sin[i];
  }
}

}  // namespace

// One run's share of a pass: its rows of x, its KV cache and position, its rotary table and mask.
struct Run {
  int64_t start, T, past, capacity;
  float* keys;  // [L, Hkv, capacity, hd]
  float* values;
  const float* cos;  // [T, hd]
  const float* sin;
  const float* mask;  // [T, past + T] additive (a draft tree's), or null: causal
};

struct Shape {
  int64_t heads, kv_heads, hd;
};

// Layer i's rotary and cache writes: q rotated into q_out [sum T, heads, hd]; k rotated and v written into
// each run's cache at its positions past..past+T-1.
static void rotate_and_cache(int64_t i, const float* qkv, int64_t width, const std::vector<Run>& runs, Shape sh,
                             float* q_out) {
  for (const Run& r : runs) {
    float* kc = r.keys + i * sh.kv_heads * r.capacity * sh.hd;  // [Hkv, capacity, hd] of layer i
    float* vc = r.values + i * sh.kv_heads * r.capacity * sh.hd;
    for (int64_t t = 0; t < r.T; ++t) {
      const float* row = qkv + (r.start + t) * width;
      const float *cs = r.cos + t * sh.hd, *sn = r.sin + t * sh.hd;
      for (int64_t h = 0; h < sh.heads; ++h) rotate(row + h * sh.hd, cs, sn, sh.hd, q_out + ((r.start + t) * sh.heads + h) * sh.hd);
      for (int64_t g = 0; g < sh.kv_heads; ++g) {
        rotate(row + (sh.heads + g) * sh.hd, cs, sn, sh.hd, kc + (g * r.capacity + r.past + t) * sh.hd);
        std::memcpy(vc + (g * r.capacity + r.past + t) * sh.hd, row + (sh.heads + sh.kv_heads + g) * sh.hd,
                    sh.hd * sizeof(float));
      }
    }
  }
}

// Layer i's attention, a (row, head) at a time over its own run's cache: scores over the positions the row
// sees, softmax, the weighted values -> out [sum T, heads * hd].
static void attend(int64_t i, const float* q, const std::vector<Run>& runs, Shape sh, float* out) {
  std::vector<std::pair<int64_t, int64_t>> rows;  // (run, row within it)
  for (int64_t r = 0; r < static_cast<int64_t>(runs.size()); ++r)
    for (int64_t t = 0; t < runs[r].T; ++t) rows.emplace_back(r, t);
  const int64_t group = sh.heads / sh.kv_heads;
  const float scale = 1.0f / std::sqrt(static_cast<float>(sh.hd));
  at::parallel_for(0, static_cast<int64_t>(rows.size()) * sh.heads, 1, [&](int64_t b0, int64_t b1) {
    std::vector<float> p, acc(sh.hd);
    for (int64_t b = b0; b < b1; ++b) {
      const Run& r = runs[rows[b / sh.heads].first];
      const int64_t t = rows[b / sh.heads].second, h = b % sh.heads, g = h / group, n = r.past + r.T;
      const float* kc = r.keys + (i * sh.kv_heads + g) * r.capacity * sh.hd;
      const float* vc = r.values + (i * sh.kv_heads + g) * r.capacity * sh.hd;
      const float* qv = q + ((r.start + t) * sh.heads + h) * sh.hd;
      const int64_t seen = r.mask ? n : r.past + t + 1;  // causal: the cache and the new rows up to t
      p.resize(seen);
      float top = -INFINITY;
      for (int64_t j = 0; j < seen; ++j) {
        p[j] = dot(qv, kc + j * sh.hd, sh.hd) * scale + (r.mask ? r.mask[t * n + j] : 0.0f);
        top = std::max(top, p[j]);
      }
      float total = 0.0f;
      for (int64_t j = 0; j < seen; ++j) total += (p[j] = std::exp(p[j] - top));
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (int64_t j = 0; j < seen; ++j)
        for (int64_t e = 0; e < sh.hd; ++e) acc[e] += p[j] * vc[j * sh.hd + e];
      for (int64_t e = 0; e < sh.hd; ++e) out[((r.start + t) * sh.heads + h) * sh.hd + e] = acc[e] / total;
    }
  });
}

// silu(gate) * up of gu [T, 2 I] -> [T, I].
static at::Tensor swiglu(const at::Tensor& gu) {
  const int64_t T = gu.size(0), I = gu.size(1) / 2;
  at::Tensor act = at::empty({T, I}, gu.options());
  const float* gs = gu.data_ptr<float>();
  float* hs = act.data_ptr<float>();
  for (int64_t t = 0; t < T; ++t)
    for (int64_t e = 0; e < I; ++e) {
      const float gate = gs[t * 2 * I + e];
      hs[t * I + e] = gate / (1.0f + std::exp(-gate)) * gs[t * 2 * I + I + e];
    }
  return act;
}

// The runs of a pass, checked: keys[r], values[r] [L, Hkv, capacity, hd]; rows[r] new rows from past[r];
// cos[r], sin[r] [rows[r], hd]; masks[r] None (causal) or an additive float [rows[r], past[r] + rows[r]].
static std::vector<Run> runs_of(int64_t total, at::TensorList keys, at::TensorList values, at::IntArrayRef rows,
                                at::IntArrayRef pasts, at::TensorList cos, at::TensorList sin,
                                const c10::List<std::optional<at::Tensor>>& masks, int64_t L, Shape sh) {
  const size_t n = keys.size();
  TORCH_CHECK(values.size() == n && rows.size() == n && pasts.size() == n && cos.size() == n && sin.size() == n &&
                  masks.size() == n && n > 0, "decoder_layers: one cache, row count, position, rotary and mask a run");
  std::vector<Run> runs;
  int64_t start = 0;
  for (size_t r = 0; r < n; ++r) {
    const at::Tensor& k = keys[r];
    const std::optional<at::Tensor> mask = masks.get(r);
    TORCH_CHECK(k.dim() == 4 && k.size(0) == L && k.size(1) == sh.kv_heads && k.size(3) == sh.hd &&
                    values[r].sizes() == k.sizes() && k.is_contiguous() && values[r].is_contiguous() &&
                    k.scalar_type() == at::kFloat && values[r].scalar_type() == at::kFloat,
                "decoder_layers: each run's keys and values float32 [layers, kv heads, capacity, head dim]");
    TORCH_CHECK(pasts[r] + rows[r] <= k.size(2), "decoder_layers: a run's cache has no room for its rows");
    for (const at::Tensor* table : {&cos[r], &sin[r]})
      TORCH_CHECK(table->dim() == 2 && table->size(0) == rows[r] && table->size(1) == sh.hd && table->is_contiguous() &&
                      table->scalar_type() == at::kFloat, "decoder_layers: cos and sin float32 [rows, head dim]");
    TORCH_CHECK(!mask || (mask->dim() == 2 && mask->size(0) == rows[r] && mask->size(1) == pasts[r] + rows[r] &&
                          mask->is_contiguous() && mask->scalar_type() == at::kFloat),
                "decoder_layers: a mask is float32 [rows, past + rows]");
    runs.push_back({start, rows[r], pasts[r], k.size(2), k.data_ptr<float>(), values[r].data_ptr<float>(),
                    cos[r].data_ptr<float>(), sin[r].data_ptr<float>(), mask ? mask->data_ptr<float>() : nullptr});
    start += rows[r];
  }
  TORCH_CHECK(start == total, "decoder_layers: the runs' rows do not add up to x's");
  return runs;
}

// x [sum T, D], every run's new rows one after another; weights: per layer, in order, norm_in [D], qkv
// layout, o layout, norm_post [D], gate_up layout, down layout; formats and outs: per layer the 4 linears'
// (qkv, o, gate_up, down) format and output count; the runs' caches and positions (runs_of). Each linear
// streams its weights once for every run's rows; rotary, the cache writes and attention are per run.
// Returns [x after the last layer, then each of feature_layers' outputs].
std::vector<at::Tensor> decoder_layers(const at::Tensor& x_in, at::TensorList weights, at::IntArrayRef formats,
                                      at::IntArrayRef outs, at::TensorList keys, at::TensorList values,
                                      at::IntArrayRef rows, at::IntArrayRef pasts, at::TensorList cos,
                                      at::TensorList sin, const c10::List<std::optional<at::Tensor>>& masks,
                                      int64_t heads, double eps, at::IntArrayRef feature_layers) {
  TORCH_CHECK(!keys.empty() && keys[0].dim() == 4, "decoder_layers: at least one run's cache");
  const int64_t L = keys[0].size(0);
  const Shape sh{heads, keys[0].size(1), keys[0].size(3)};
  TORCH_CHECK(static_cast<int64_t>(weights.size()) == 6 * L && static_cast<int64_t>(formats.size()) == 4 * L &&
                  static_cast<int64_t>(outs.size()) == 4 * L,
              "decoder_layers: 6 weights and 4 formats and outputs a layer");
  TORCH_CHECK(x_in.dim() == 2 && x_in.scalar_type() == at::kFloat && sh.hd % 16 == 0 && x_in.size(1) % 16 == 0 &&
                  heads % sh.kv_heads == 0, "decoder_layers: float32 x, heads and hidden size in 16-float vectors");
  const std::vector<Run> runs = runs_of(x_in.size(0), keys, values, rows, pasts, cos, sin, masks, L, sh);
  at::Tensor x = x_in.contiguous().clone();
  std::vector<at::Tensor> features;
  for (int64_t i = 0; i < L; ++i) {
    const at::Tensor* w = &weights[6 * i];
    const int64_t* fm = &formats[4 * i];
    const int64_t* on = &outs[4 * i];
    at::Tensor qkv = linear(rms(x, w[0], eps), w[1], fm[0], on[0]);  // [sum T, (H + 2 Hkv) hd]
    at::Tensor q = at::empty({x.size(0), heads, sh.hd}, x.options());
    rotate_and_cache(i, qkv.data_ptr<float>(), qkv.size(1), runs, sh, q.data_ptr<float>());
    at::Tensor att = at::empty({x.size(0), heads * sh.hd}, x.options());
    attend(i, q.data_ptr<float>(), runs, sh, att.data_ptr<float>());
    x.add_(linear(att, w[2], fm[1], on[1]));
    x.add_(linear(swiglu(linear(rms(x, w[3], eps), w[4], fm[2], on[2])), w[5], fm[3], on[3]));
    for (int64_t f : feature_layers)
      if (f == i) features.push_back(x.clone());
  }
  std::vector<at::Tensor> result{x};
  result.insert(result.end(), features.begin(), features.end());
  return result;
}

TORCH_LIBRARY_FRAGMENT(specviz, m) {
  m.def(
      "decoder_layers(Tensor x, Tensor[] weights, int[] formats, int[] outs, Tensor(a!)[] keys, Tensor(b!)[] values, "
      "int[] rows, int[] pasts, Tensor[] cos, Tensor[] sin, Tensor?[] masks, int heads, float eps, "
      "int[] feature_layers) -> Tensor[]",
      &decoder_layers);
}
