// specviz's one native kernel: y = x w^T for a few rows x [M, K] against a float32 weight w [N, K]
// as loaded (row-major), streamed once from memory whatever M is. A target step on the CPU is this
// product for one to a few rows, and is bound by the bytes of w it reads: the kernel reads each
// weight row once, holding 4 rows of w and up to 4 rows of x in registers (the 4 rows of w stay in
// the L1 cache for the next rows of x), and splits the outputs over torch's threads. Built at load
// by specviz/engine/native.py for the CPU it runs on (-march=native), and chosen only where
// measured faster (specviz/engine/kernels.py).
//
// Exactness: every output (m, n) is summed in one fixed order (16 lanes over k, then the lanes,
// then the tail of k), whatever M, N and the thread split are, so a row's numbers are the same
// computed alone or among others: a verification pass and a one-token step agree bit for bit.

#include <ATen/core/Tensor.h>
#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>

#include <algorithm>

typedef float v16 __attribute__((vector_size(64)));

// y[m, n] = sum_k x[m, k] w[n, k] for rows m0..m0+MB and outputs n0..n0+NB. Every (m, n) is summed
// in the same order whatever MB and NB are: 16 lanes over k, then the lanes, then the k tail.
template <int MB, int NB>
static inline void tile(const float* x, int64_t K, const float* w, float* y, int64_t N, int64_t n0) {
  const int64_t K16 = K / 16 * 16;
  v16 acc[MB][NB];
  for (int m = 0; m < MB; ++m)
    for (int j = 0; j < NB; ++j) acc[m][j] = (v16){};
  for (int64_t k = 0; k < K16; k += 16) {
    v16 wv[NB];
    for (int j = 0; j < NB; ++j) __builtin_memcpy(&wv[j], w + (n0 + j) * K + k, 64);
    for (int m = 0; m < MB; ++m) {
      v16 xv;
      __builtin_memcpy(&xv, x + m * K + k, 64);
      for (int j = 0; j < NB; ++j) acc[m][j] += wv[j] * xv;
    }
  }
  for (int m = 0; m < MB; ++m)
    for (int j = 0; j < NB; ++j) {
      float s = 0.f;
      for (int i = 0; i < 16; ++i) s += acc[m][j][i];
      for (int64_t k = K16; k < K; ++k) s += x[m * K + k] * w[(n0 + j) * K + k];
      y[m * N + n0 + j] = s;
    }
}

// Outputs n0..n1 for every row: 4 weight rows at a time are read from memory once, then stay in
// the L1 cache for the next rows of x (4 at a time, then one by one).
static void outputs(const float* x, int64_t M, int64_t K, const float* w, float* y, int64_t N, int64_t n0, int64_t n1) {
  for (int64_t n = n0; n < n1; n += 4) {
    const bool four = n + 4 <= n1;
    int64_t m = 0;
    for (; m + 4 <= M; m += 4) {
      if (four) {
        tile<4, 4>(x + m * K, K, w, y + m * N, N, n);
      } else {
        for (int64_t j = n; j < n1; ++j) tile<4, 1>(x + m * K, K, w, y + m * N, N, j);
      }
    }
    for (; m < M; ++m) {
      if (four) {
        tile<1, 4>(x + m * K, K, w, y + m * N, N, n);
      } else {
        for (int64_t j = n; j < n1; ++j) tile<1, 1>(x + m * K, K, w, y + m * N, N, j);
      }
    }
  }
}

at::Tensor gemv(const at::Tensor& x, const at::Tensor& w) {
  TORCH_CHECK(x.dim() == 2 && w.dim() == 2 && x.size(1) == w.size(1), "gemv: x [M, K] and w [N, K]");
  TORCH_CHECK(x.scalar_type() == at::kFloat && w.scalar_type() == at::kFloat, "gemv: float32 only");
  TORCH_CHECK(x.device().is_cpu() && w.device().is_cpu(), "gemv: CPU tensors only");
  const at::Tensor xc = x.contiguous(), wc = w.contiguous();
  const int64_t M = xc.size(0), K = xc.size(1), N = wc.size(0);
  at::Tensor y = at::empty({M, N}, xc.options());
  const float* xp = xc.data_ptr<float>();
  const float* wp = wc.data_ptr<float>();
  float* yp = y.data_ptr<float>();
  at::parallel_for(0, (N + 3) / 4, 16, [&](int64_t b0, int64_t b1) {  // blocks of 4 outputs
    outputs(xp, M, K, wp, yp, N, b0 * 4, std::min(b1 * 4, N));
  });
  return y;
}

TORCH_LIBRARY(specviz, m) { m.def("gemv(Tensor x, Tensor w) -> Tensor", &gemv); }
