// The lean step in one native call: every decoder layer of a Llama-family target for the T new rows of
// one run, its KV cache written in place (specviz/engine/lean_step.py calls it; the final norm and the LM
// head stay in Python, one call each).
//
// Why: once the linears read the weights as shipped, a step's many small operations (norms, rotary, the
// cache writes, attention, SiLU, the residual adds: about 20 torch calls a layer, 30 layers) cost about
// as long as its linears (docs/benchmarks.md, "The lean step"). Here each is a loop over floats, with
// no dispatch between them.
//
// Numbers: float32 throughout, every sum in a fixed order that does not depend on T, so a row's numbers
// are the same computed alone or among other rows (a verification pass and a one-token step agree bit for
// bit, as the kernel's products do). They differ from torch's operations in the last bits (other
// summation orders, fused multiply-adds, expf), as torch's own kernels differ between CPUs; the tests hold
// them to transformers' logits and greedy tokens (tests/test_lean_step.py).
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

// x [T, D]; weights: per layer, in order, norm_in [D], qkv layout, o layout, norm_post [D], gate_up layout,
// down layout; formats and outs: per layer the 4 linears' (qkv, o, gate_up, down) format and output
// count; keys, values [L, Hkv, capacity, hd] (positions past..past+T-1 written here); cos, sin [T, hd];
// mask: None for causal rows, else an additive float [T, past + T] (a draft tree's); feature_layers:
// layers whose outputs are returned too. Returns [x after the last layer, then each feature layer's output].
std::vector<at::Tensor> decoder_layers(const at::Tensor& x_in, at::TensorList weights, at::IntArrayRef formats,
                                      at::IntArrayRef outs, const at::Tensor& keys, const at::Tensor& values,
                                      int64_t past, const at::Tensor& cos, const at::Tensor& sin,
                                      const std::optional<at::Tensor>& mask, int64_t heads, double eps,
                                      at::IntArrayRef feature_layers) {
  const int64_t L = keys.size(0), Hkv = keys.size(1), capacity = keys.size(2), hd = keys.size(3);
  const int64_t T = x_in.size(0), D = x_in.size(1), N = past + T;
  TORCH_CHECK(static_cast<int64_t>(weights.size()) == 6 * L && static_cast<int64_t>(formats.size()) == 4 * L &&
                  static_cast<int64_t>(outs.size()) == 4 * L,
              "decoder_layers: 6 weights and 4 formats and outputs a layer");
  TORCH_CHECK(x_in.scalar_type() == at::kFloat && keys.scalar_type() == at::kFloat && keys.is_contiguous() &&
                  values.is_contiguous() && cos.is_contiguous() && sin.is_contiguous(),
              "decoder_layers: float32, contiguous");
  TORCH_CHECK(N <= capacity && hd % 16 == 0 && heads % Hkv == 0, "decoder_layers: the cache has no room, or odd heads");
  TORCH_CHECK(!mask || (mask->size(0) == T && mask->size(1) == N && mask->scalar_type() == at::kFloat),
              "decoder_layers: mask [T, past + T] float");
  const int64_t group = heads / Hkv;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const float* cs = cos.data_ptr<float>();
  const float* sn = sin.data_ptr<float>();
  const float* ms = mask ? mask->data_ptr<float>() : nullptr;
  at::Tensor x = x_in.contiguous().clone();
  std::vector<at::Tensor> features;
  for (int64_t i = 0; i < L; ++i) {
    const at::Tensor* w = &weights[6 * i];
    const int64_t* fm = &formats[4 * i];
    const int64_t* on = &outs[4 * i];
    at::Tensor qkv = linear(rms(x, w[0], eps), w[1], fm[0], on[0]);  // [T, (H + 2 Hkv) hd]
    const float* qs = qkv.data_ptr<float>();
    const int64_t width = qkv.size(1);
    float* kc = keys.data_ptr<float>() + i * Hkv * capacity * hd;  // [Hkv, capacity, hd] of layer i
    float* vc = values.data_ptr<float>() + i * Hkv * capacity * hd;
    at::Tensor q = at::empty({T, heads, hd}, x.options());
    float* qr = q.data_ptr<float>();
    for (int64_t t = 0; t < T; ++t) {
      const float* row = qs + t * width;
      for (int64_t h = 0; h < heads; ++h) rotate(row + h * hd, cs + t * hd, sn + t * hd, hd, qr + (t * heads + h) * hd);
      for (int64_t g = 0; g < Hkv; ++g) {
        rotate(row + (heads + g) * hd, cs + t * hd, sn + t * hd, hd, kc + (g * capacity + past + t) * hd);
        std::memcpy(vc + (g * capacity + past + t) * hd, row + (heads + Hkv + g) * hd, hd * sizeof(float));
      }
    }
    // Attention, a (row, head) at a time: scores over the positions it sees, softmax, the weighted values.
    at::Tensor att = at::empty({T, heads * hd}, x.options());
    float* as = att.data_ptr<float>();
    at::parallel_for(0, T * heads, 1, [&](int64_t b0, int64_t b1) {
      std::vector<float> p(N);
      std::vector<float> out(hd);
      for (int64_t b = b0; b < b1; ++b) {
        const int64_t t = b / heads, h = b % heads, g = h / group;
        const float* qv = qr + (t * heads + h) * hd;
        const int64_t seen = ms ? N : past + t + 1;  // causal: the cache and the new rows up to t
        float top = -INFINITY;
        for (int64_t j = 0; j < seen; ++j) {
          float s = dot(qv, kc + (g * capacity + j) * hd, hd) * scale;
          if (ms) s += ms[t * N + j];
          p[j] = s;
          top = std::max(top, s);
        }
        float total = 0.0f;
        for (int64_t j = 0; j < seen; ++j) total += (p[j] = std::exp(p[j] - top));
        std::fill(out.begin(), out.end(), 0.0f);
        for (int64_t j = 0; j < seen; ++j) {
          const float* vv = vc + (g * capacity + j) * hd;
          for (int64_t e = 0; e < hd; ++e) out[e] += p[j] * vv[e];
        }
        for (int64_t e = 0; e < hd; ++e) as[t * heads * hd + h * hd + e] = out[e] / total;
      }
    });
    x.add_(linear(att, w[2], fm[1], on[1]));
    at::Tensor gu = linear(rms(x, w[3], eps), w[4], fm[2], on[2]);  // [T, 2 I]: gate, then up
    const int64_t I = on[2] / 2;
    at::Tensor act = at::empty({T, I}, x.options());
    const float* gs = gu.data_ptr<float>();
    float* hs = act.data_ptr<float>();
    for (int64_t t = 0; t < T; ++t)
      for (int64_t e = 0; e < I; ++e) {
        const float gate = gs[t * 2 * I + e];
        hs[t * I + e] = gate / (1.0f + std::exp(-gate)) * gs[t * 2 * I + I + e];
      }
    x.add_(linear(act, w[5], fm[3], on[3]));
    for (int64_t f : feature_layers)
      if (f == i) features.push_back(x.clone());
  }
  std::vector<at::Tensor> result{x};
  result.insert(result.end(), features.begin(), features.end());
  return result;
}

TORCH_LIBRARY_FRAGMENT(specviz, m) {
  m.def(
      "decoder_layers(Tensor x, Tensor[] weights, int[] formats, int[] outs, Tensor(a!) keys, Tensor(b!) values, "
      "int past, Tensor cos, Tensor sin, Tensor? mask, int heads, float eps, int[] feature_layers) -> Tensor[]",
      &decoder_layers);
}
