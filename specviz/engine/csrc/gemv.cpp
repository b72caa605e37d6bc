// specviz's one native kernel: y = x w^T for a few rows x [M, K] against a float32 weight w [N, K],
// streaming w once from memory whatever M is. A target step on the CPU is this product for one to a
// few rows, and is bound by the bytes of w it reads. So w is laid out once (pack_rows) in blocks of
// 4 output rows, 16 inputs at a time: [ceil(N/4), ceil(K/16), 4, 16], zeros padding both ends. The
// kernel then reads w in one sequential stream, holding a block's 4 rows and up to 6 rows of x (3 without
// AVX-512) in registers (the block stays in the L1 cache for the next rows of x), and splits the blocks over
// torch's threads. Built by specviz/engine/native.py for the CPU it runs on (-march=native).
//
// Keeping memory busy while it computes: a verification pass's 4 to 8 rows cost a core more
// arithmetic per weight byte than one row, and one core here keeps only so many reads in flight on
// its own, so without help its stream stalls while it computes. The sweeps over a block therefore
// ask for the block PREFETCH_BLOCKS ahead (into L2), and the rows are split into as few sweeps as
// the registers allow, of balanced sizes (7 rows: 3 + 4; without AVX-512, 2 + 2 + 3), each sweep
// holding its weights and rows of x in registers (GCC otherwise read them again for every product).
// Past 12 rows (a class's batched pass, bound by arithmetic) the sweeps run over a tile of blocks
// held in L2, and ask for the next tile (with AVX-512; without it, they stay over each block in L1,
// as below 12 rows: L2_TILES). Every sweep asks for its share of what comes next (sweep s of S: the
// k steps congruent to s mod S), so memory stays busy while any sweep computes: when only the first
// sweep asked, the stream stood still during the others, and 7 to 16 rows read the weights well
// below the bandwidth one row reaches. Measured on AMD EPYC: docs/benchmarks.md, "The native kernel,
// measured at load", "Verification flatter past six rows" and "The native kernel without AVX-512".
//
// Exactness: every output (m, n) is summed in one fixed order (16 lanes over k, 8 without AVX-512, then
// the lanes in a fixed tree, lane_sums), whatever M, N, the sweep sizes and the thread split are, so a row's
// numbers are the same computed alone or among others: a verification pass and a one-token step
// agree bit for bit. The padding adds exact zeros.
//
// The weights as shipped (gemv_blocks): the same loop reads a GGUF file's Q4_1 and Q8_0 blocks (a
// weight is d*q + m, or d*q: d and m fp16, q a 4- or 8-bit integer) laid out by rows of 4 like the
// float32 layout (specviz/engine/blocks.py), and expands each block in registers. d*q is exact in float32
// (11 significant bits times at most 8), so the expanded weight is the float32 number gguf's
// dequantisation writes (one rounding, of d*q + m, whether fused or not), and the sums run in the order
// above: every output is bit-identical to gemv on the float32 weights, in a fraction of the bytes.

#include <ATen/core/Tensor.h>
#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <torch/library.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

typedef float v16 __attribute__((vector_size(64)));

typedef float v8 __attribute__((vector_size(32)));

#if defined(__AVX512F__)
constexpr int MAX_ROWS_PER_SWEEP = 6;  // 6 x 4 accumulators + 4 weight vectors + 1 row of x: 29 of 32 registers
constexpr int64_t SWEEPS_PER_BLOCK = 2;  // up to 12 rows: every sweep over a block while it is in L1
constexpr bool L2_TILES = true;  // past that, sweeps over a tile of blocks held in L2
#else  // 16 registers of 8 floats (AVX2): the 8-lane sweeps below
constexpr int MAX_ROWS_PER_SWEEP = 3;  // 3 x 4 accumulators + 4 weight vectors + 1 row of x: 17 for 16 registers
constexpr int64_t SWEEPS_PER_BLOCK = 4;  // up to 12 rows, as with AVX-512
// Past 12 rows too, every sweep runs over a block while it is in L1: the 3-row sweeps read their
// weights again for each sweep, and from L2 tiles that was slower than from L1 at 16 to 48 rows.
constexpr bool L2_TILES = false;
#endif
constexpr int64_t PREFETCH_BLOCKS = 4;  // how far ahead the sweeps ask for the weight stream (measured: 3-4 best)
constexpr int64_t TILE_BYTES = 256 * 1024;  // past that: sweeps over a tile of blocks held in L2 (1 MB a core)

#if defined(__AVX512F__)  // 32 registers of 16 floats
typedef v16 vec;
// A 64-byte vector fits one register only with AVX-512: pinned there, GCC keeps the block's weights
// and a row of x in registers instead of reading them again.
static inline void keep_in_register(v16& v) { asm("" : "+v"(v)); }
// The lane sums of 4 accumulators at once, each in one fixed tree (lanes i + (i+8), then i + (i+4),
// then (0 + 2) + (1 + 3)): the same adds, in the same order, for every output.
static inline void lane_sums(const v16 a[4], float out[4]) {
  const v16 h01 = __builtin_shufflevector(a[0], a[1], 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23) +
                  __builtin_shufflevector(a[0], a[1], 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
  const v16 h23 = __builtin_shufflevector(a[2], a[3], 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23) +
                  __builtin_shufflevector(a[2], a[3], 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
  const v16 q = __builtin_shufflevector(h01, h23, 0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27) +
                __builtin_shufflevector(h01, h23, 4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 28, 29, 30, 31);
  const v8 e = __builtin_shufflevector(q, q, 0, 1, 4, 5, 8, 9, 12, 13) +
               __builtin_shufflevector(q, q, 2, 3, 6, 7, 10, 11, 14, 15);
  for (int j = 0; j < 4; ++j) out[j] = e[2 * j] + e[2 * j + 1];
}

#else
// Without AVX-512 a 16-float vector takes two of the 16 registers, and the AVX-512 sweeps (24 such
// accumulators) spilled to memory: a verification pass cost nearly its rows' one-row passes. Here each
// output sums in 8 lanes, a k step's two halves of 16 in turn, and a sweep holds 3 rows: their 12
// accumulators, the block's 4 weight vectors of the half and one row of x, one more than the 16
// registers, so GCC reads one operand from L1. Sweeps of 2 and of 4 rows were each faster at one row
// count and slower at another (docs/benchmarks.md, "The native kernel without AVX-512").

typedef v8 vec;
static inline void keep_in_register(v8&) {}  // 3 rows' accumulators leave no register to pin one in

// The lane sums of 4 accumulators, each in one fixed tree: the same adds, in the same order, for
// every output.
static inline void lane_sums(const v8 a[4], float out[4]) {
  for (int j = 0; j < 4; ++j) {
    float l[8];
    std::memcpy(l, &a[j], sizeof(l));
    out[j] = ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]));
  }
}

#endif
constexpr int LANES = sizeof(vec) / sizeof(float);  // floats an accumulator holds: 16, or 8 without AVX-512

// ----- the weight formats: what a row block holds for F::INPUTS inputs (a "chunk" of F::BYTES bytes) -----
// Each format gives, for k step s of a chunk (16 inputs) and its LANES-float piece h, row j's weights:
// F::step(chunk, s, state) once a step, then F::weights(chunk, state, j, s, h) for each of the 4 rows.

typedef uint8_t bytes __attribute__((vector_size(LANES)));  // LANES quantised weights, one byte each
typedef int32_t ints __attribute__((vector_size(LANES * 4)));

// float32: a chunk is 16 inputs of the block's 4 rows, [4, 16] floats.
struct F32 {
  static constexpr int64_t INPUTS = 16, BYTES = 4 * 16 * sizeof(float);
  struct State {};
  static inline void step(const uint8_t*, int, State&) {}
  static inline vec weights(const uint8_t* c, const State&, int j, int, int h) {
    vec w;
    std::memcpy(&w, c + (j * 16 + h) * sizeof(float), sizeof(vec));
    return w;
  }
};

// Q4_1 (ggml type 3; specviz/engine/blocks.py lays it out): a chunk is 64 inputs (two GGUF blocks) of 4
// rows: the scales as float32, d[2][4] then m[2][4] (block, row: exact copies of the fp16 ones), then the
// quants as two 64-byte vectors of 16 32-bit lanes, the first for rows 0 and 1, the second for rows 2 and
// 3. Lane l holds 8 nibbles: bits 4 n to 4 n + 3 are the quant of input 16 s + l of row 2 p + r, n = 4 r + s
// (r: which row of the pair, s: the k step). Weight = d q + m, d and m of the input's block (s / 2).
struct Q4_1 {
  static constexpr int64_t INPUTS = 64, BYTES = 16 * 4 + 128;
  static inline const float* d(const uint8_t* c) { return reinterpret_cast<const float*>(c); }
  static inline ints quants(const uint8_t* c, int j, int h) {  // lanes h.. of row j's pair
    ints q;
    std::memcpy(&q, c + 64 + (j / 2) * 64 + h * 4, sizeof(q));
    return q;
  }
#if defined(__AVX512F__)
  // A row's 16 possible weights d i + m (i = 0..15) of the step's block in one register, each weight
  // picked from it by its nibble (vpermps reads only an index's low 4 bits): fewer instructions a weight
  // than masking, converting and scaling each one. Each entry is the same one rounding of d i + m.
  struct State { v16 table[4]; };
  static inline void step(const uint8_t* c, int s, State& st) {
    if (s % 2) return;  // the second step of a block reads the same tables
    const v16 iota = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) st.table[j] = d(c)[(s / 2) * 4 + j] * iota + d(c)[8 + (s / 2) * 4 + j];
  }
  static inline vec weights(const uint8_t* c, const State& st, int j, int s, int) {
    const ints q = quants(c, j, 0) >> (4 * (4 * (j % 2) + s));
    return __builtin_shuffle(st.table[j], q);
  }
#else
  struct State {};
  static inline void step(const uint8_t*, int, State&) {}
  static inline vec weights(const uint8_t* c, const State&, int j, int s, int h) {
    const ints q = (quants(c, j, h) >> (4 * (4 * (j % 2) + s))) & 15;
    return d(c)[(s / 2) * 4 + j] * __builtin_convertvector(q, vec) + d(c)[8 + (s / 2) * 4 + j];  // one rounding
  }
#endif
};

// Q8_0 (ggml type 8): a chunk is 32 inputs (one GGUF block) of 4 rows: d[4] as float32 (exact copies of
// the fp16 ones), then 32 signed bytes a row. Weight = d q.
struct Q8_0 {
  static constexpr int64_t INPUTS = 32, BYTES = 16 + 4 * 32;
  struct State {};
  static inline void step(const uint8_t*, int, State&) {}
  static inline vec weights(const uint8_t* c, const State&, int j, int s, int h) {
    bytes q;
    std::memcpy(&q, c + 16 + j * 32 + s * 16 + h, sizeof(q));
    asm("" : "+x"(q));  // one vector load: GCC 12 otherwise read the bytes one by one
    // Signed bytes read as unsigned and made signed in 32 bits: GCC 12 widened signed bytes one at a time.
    const vec qf = __builtin_convertvector((__builtin_convertvector(q, ints) ^ 128) - 128, vec);
    return reinterpret_cast<const float*>(c)[j] * qf;  // exact
  }
};

// One block of 4 outputs (n0..n0+3, `valid` of them real) for MB rows of x; x rows are KP floats
// apart (padded with zeros to a whole number of chunks). `ahead`, when not null, is the block to
// prefetch: this sweep asks for its chunks congruent to `phase` mod `every` (the sweeps over the
// block). Each k step of 16 inputs is summed in LANES-float pieces (one with AVX-512, two halves
// without), in the same order for every format.
template <typename F, int MB>
static inline void block(const float* x, int64_t KP, const uint8_t* wb, float* y, int64_t N, int64_t n0, int valid,
                         const uint8_t* ahead, int phase, int every) {
  vec acc[MB][4];
#pragma GCC unroll 8
  for (int m = 0; m < MB; ++m)
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) acc[m][j] = (vec){};
  const int64_t chunks = KP / F::INPUTS;
  for (int64_t c = 0; c < chunks; ++c) {
    const uint8_t* chunk = wb + c * F::BYTES;
    if (ahead && (every == 1 || c % every == phase)) {
#pragma GCC unroll 4
      for (int64_t o = 0; o < F::BYTES; o += 64) __builtin_prefetch(ahead + c * F::BYTES + o, 0, 2);  // into L2
    }
    typename F::State st;
#pragma GCC unroll 4
    for (int s = 0; s < F::INPUTS / 16; ++s) {
      F::step(chunk, s, st);
#pragma GCC unroll 2
      for (int h = 0; h < 16; h += LANES) {
        vec wv[4];
#pragma GCC unroll 4
        for (int j = 0; j < 4; ++j) {
          wv[j] = F::weights(chunk, st, j, s, h);
          keep_in_register(wv[j]);  // GCC would otherwise read (or expand) it again for every row of x
        }
#pragma GCC unroll 8
        for (int m = 0; m < MB; ++m) {
          vec xv;
          std::memcpy(&xv, x + m * KP + c * F::INPUTS + s * 16 + h, sizeof(vec));
          keep_in_register(xv);  // read once for the block's 4 rows, not once for each
#pragma GCC unroll 4
          for (int j = 0; j < 4; ++j) acc[m][j] += wv[j] * xv;
        }
      }
    }
  }
#pragma GCC unroll 8
  for (int m = 0; m < MB; ++m) {
    float sums[4];
    lane_sums(acc[m], sums);
    for (int j = 0; j < valid; ++j) y[m * N + n0 + j] = sums[j];
  }
}

// One sweep of `rows` (1..MAX_ROWS_PER_SWEEP) rows of x over one block.
template <typename F>
static inline void sweep(int rows, const float* x, int64_t KP, const uint8_t* wb, float* y, int64_t N, int64_t n0,
                         int valid, const uint8_t* ahead, int phase, int every) {
  switch (rows) {
    case 1: return block<F, 1>(x, KP, wb, y, N, n0, valid, ahead, phase, every);
    case 2: return block<F, 2>(x, KP, wb, y, N, n0, valid, ahead, phase, every);
#if defined(__AVX512F__)
    case 3: return block<F, 3>(x, KP, wb, y, N, n0, valid, ahead, phase, every);
    case 4: return block<F, 4>(x, KP, wb, y, N, n0, valid, ahead, phase, every);
    case 5: return block<F, 5>(x, KP, wb, y, N, n0, valid, ahead, phase, every);
    default: return block<F, 6>(x, KP, wb, y, N, n0, valid, ahead, phase, every);
#else
    default: return block<F, 3>(x, KP, wb, y, N, n0, valid, ahead, phase, every);
#endif
  }
}

// A block of F's format expanded into the float32 layout ([KP/16, 4, 16] floats), the same numbers the
// registers hold in `block`.
template <typename F>
static inline void expand(const uint8_t* wb, int64_t KP, float* out) {
  for (int64_t c = 0; c < KP / F::INPUTS; ++c) {
    const uint8_t* chunk = wb + c * F::BYTES;
    typename F::State st;
#pragma GCC unroll 4
    for (int s = 0; s < F::INPUTS / 16; ++s) {
      F::step(chunk, s, st);
#pragma GCC unroll 2
      for (int h = 0; h < 16; h += LANES)
#pragma GCC unroll 4
        for (int j = 0; j < 4; ++j) {
          const vec w = F::weights(chunk, st, j, s, h);
          std::memcpy(out + ((c * (F::INPUTS / 16) + s) * 4 + j) * 16 + h, &w, sizeof(vec));
        }
    }
  }
}

// Blocks for more rows than two sweeps hold (a class's batched pass): each block is expanded once into
// float32 in L1, and the float32 sweeps run over it, so the expansion is paid once a block, not once a
// sweep. The same weights in the same order: the same sums. Up to two sweeps (a verification pass of 7
// rows) expanding in registers twice was faster (docs/benchmarks.md, "The weights as shipped").
template <typename F>
static void product_expanded(const float* xs, int64_t M, int64_t KP, const uint8_t* ws, float* ys, int64_t N) {
  const int64_t blocks = (N + 3) / 4, sweeps = (M + MAX_ROWS_PER_SWEEP - 1) / MAX_ROWS_PER_SWEEP;
  const int64_t block_bytes = KP / F::INPUTS * F::BYTES;
  at::parallel_for(0, blocks, 16, [&](int64_t b0, int64_t b1) {
    std::vector<float> expanded(KP * 4);
    const uint8_t* wf = reinterpret_cast<const uint8_t*>(expanded.data());
    for (int64_t b = b0; b < b1; ++b) {
      const uint8_t* wb = ws + b * block_bytes;
      if (b + PREFETCH_BLOCKS < blocks)
        for (int64_t o = 0; o < block_bytes; o += 64) __builtin_prefetch(wb + PREFETCH_BLOCKS * block_bytes + o, 0, 2);
      expand<F>(wb, KP, expanded.data());
      const int valid = static_cast<int>(std::min<int64_t>(4, N - b * 4));
      int64_t m = 0;
      for (int64_t s = 0; s < sweeps; ++s) {
        const int rows = static_cast<int>((M - m) / (sweeps - s));  // balanced sizes, as below
        sweep<F32>(rows, xs + m * KP, KP, wf, ys + m * N, N, b * 4, valid, nullptr, 0, 1);
        m += rows;
      }
    }
  });
}

// y [M, N] = x [M, KP] w^T over a layout of ceil(N/4) row blocks of KP / F::INPUTS chunks each.
template <typename F>
static void product(const float* xs, int64_t M, int64_t KP, const uint8_t* ws, float* ys, int64_t N) {
  const int64_t blocks = (N + 3) / 4, sweeps = (M + MAX_ROWS_PER_SWEEP - 1) / MAX_ROWS_PER_SWEEP;
  const int64_t block_bytes = KP / F::INPUTS * F::BYTES;
  if (!std::is_same<F, F32>::value && sweeps > 2) return product_expanded<F>(xs, M, KP, ws, ys, N);
  // Many rows (a class's batched pass) are bound by arithmetic, not memory: with L2_TILES their sweeps
  // then run over a tile of blocks that stays in L2, so each sweep reads its weights from L2, not from
  // memory; without, every sweep runs over a block while it is in L1, whatever the rows.
  const int64_t tile = !L2_TILES || sweeps <= SWEEPS_PER_BLOCK ? 1 : std::max<int64_t>(1, TILE_BYTES / block_bytes);
  // What the sweeps ask for: the block PREFETCH_BLOCKS ahead, or, over tiles, the next tile's block.
  const int64_t reach = tile == 1 ? PREFETCH_BLOCKS : tile;
  at::parallel_for(0, (blocks + tile - 1) / tile, std::max<int64_t>(1, 16 / tile), [&](int64_t t0, int64_t t1) {
    for (int64_t b0 = t0 * tile; b0 < std::min(blocks, t1 * tile); b0 += tile) {
      const int64_t b1 = std::min(blocks, b0 + tile);
      int64_t m = 0;
      for (int64_t s = 0; s < sweeps; ++s) {
        const int rows = static_cast<int>((M - m) / (sweeps - s));  // balanced sizes: 7 rows are 3 + 4
        for (int64_t b = b0; b < b1; ++b) {
          const uint8_t* wb = ws + b * block_bytes;
          const uint8_t* ahead = b + reach < blocks ? wb + reach * block_bytes : nullptr;
          const int valid = static_cast<int>(std::min<int64_t>(4, N - b * 4));
          sweep<F>(rows, xs + m * KP, KP, wb, ys + m * N, N, b * 4, valid, ahead, static_cast<int>(s),
                   static_cast<int>(sweeps));
        }
        m += rows;
      }
    }
  });
}

at::Tensor pack_rows(const at::Tensor& w) {
  TORCH_CHECK(w.dim() == 2 && w.scalar_type() == at::kFloat && w.device().is_cpu(), "pack_rows: a float32 CPU w [N, K]");
  const at::Tensor wc = w.contiguous();
  const int64_t N = wc.size(0), K = wc.size(1), KB = (K + 15) / 16;
  at::Tensor out = at::zeros({(N + 3) / 4, KB, 4, 16}, wc.options());
  const float* src = wc.data_ptr<float>();
  float* dst = out.data_ptr<float>();
  for (int64_t n = 0; n < N; ++n)
    for (int64_t kb = 0; kb < KB; ++kb) {
      const int64_t width = std::min<int64_t>(16, K - kb * 16);
      std::memcpy(dst + ((n / 4) * KB + kb) * 64 + (n % 4) * 16, src + n * K + kb * 16, width * sizeof(float));
    }
  return out;
}

// x [M, K] contiguous, its rows padded with zeros to KP, the layout's width (the padding weights are zeros too).
static at::Tensor padded_rows(const at::Tensor& x, int64_t KP) {
  const at::Tensor xc = x.contiguous();
  if (xc.size(1) == KP) return xc;
  at::Tensor padded = at::zeros({xc.size(0), KP}, x.options());
  padded.narrow(1, 0, xc.size(1)).copy_(xc);
  return padded;
}

at::Tensor gemv(const at::Tensor& x, const at::Tensor& packed, int64_t N) {
  TORCH_CHECK(x.dim() == 2 && packed.dim() == 4 && packed.size(2) == 4 && packed.size(3) == 16 && packed.is_contiguous(),
              "gemv: x [M, K] and a pack_rows layout");
  TORCH_CHECK(x.device().is_cpu() && packed.device().is_cpu(), "gemv: CPU tensors only");
  TORCH_CHECK(x.scalar_type() == at::kFloat && packed.scalar_type() == at::kFloat, "gemv: float32 only");
  TORCH_CHECK(packed.size(0) == (N + 3) / 4, "gemv: the layout holds another number of outputs than N");
  TORCH_CHECK(packed.size(1) == (x.size(1) + 15) / 16, "gemv: x [M, K] and w [N, K] differ in K");
  TORCH_CHECK(x.size(1) > 0, "gemv: K must be at least 1");
  const int64_t M = x.size(0), KP = packed.size(1) * 16;
  const at::Tensor xp = padded_rows(x, KP);
  at::Tensor y = at::empty({M, N}, x.options());
  product<F32>(xp.data_ptr<float>(), M, KP, reinterpret_cast<const uint8_t*>(packed.data_ptr<float>()),
               y.data_ptr<float>(), N);
  return y;
}

constexpr int64_t GGML_Q4_1 = 3, GGML_Q8_0 = 8;  // ggml's numbers for the two block formats

at::Tensor gemv_blocks(const at::Tensor& x, const at::Tensor& layout, int64_t N, int64_t format) {
  TORCH_CHECK(format == GGML_Q4_1 || format == GGML_Q8_0, "gemv_blocks: format 3 (Q4_1) or 8 (Q8_0), not ", format);
  const int64_t bytes = format == GGML_Q4_1 ? Q4_1::BYTES : Q8_0::BYTES;
  const int64_t inputs = format == GGML_Q4_1 ? Q4_1::INPUTS : Q8_0::INPUTS;
  TORCH_CHECK(x.dim() == 2 && layout.dim() == 3 && layout.size(2) == bytes && layout.is_contiguous(),
              "gemv_blocks: x [M, K] and a blocks layout [ceil(N/4), chunks, ", bytes, "]");
  TORCH_CHECK(x.device().is_cpu() && layout.device().is_cpu(), "gemv_blocks: CPU tensors only");
  TORCH_CHECK(x.scalar_type() == at::kFloat && layout.scalar_type() == at::kByte, "gemv_blocks: float32 x, uint8 layout");
  TORCH_CHECK(layout.size(0) == (N + 3) / 4, "gemv_blocks: the layout holds another number of outputs than N");
  const int64_t M = x.size(0), K = x.size(1), KP = layout.size(1) * inputs;
  TORCH_CHECK(K > 0 && (K + inputs - 1) / inputs == layout.size(1), "gemv_blocks: x [M, K] and the layout differ in K");
  const at::Tensor xp = padded_rows(x, KP);
  at::Tensor y = at::empty({M, N}, x.options());
  const uint8_t* ws = layout.data_ptr<uint8_t>();
  if (format == GGML_Q4_1)
    product<Q4_1>(xp.data_ptr<float>(), M, KP, ws, y.data_ptr<float>(), N);
  else
    product<Q8_0>(xp.data_ptr<float>(), M, KP, ws, y.data_ptr<float>(), N);
  return y;
}

TORCH_LIBRARY(specviz, m) {
  m.def("pack_rows(Tensor w) -> Tensor", &pack_rows);
  m.def("gemv(Tensor x, Tensor packed, int N) -> Tensor", &gemv);
  m.def("gemv_blocks(Tensor x, Tensor layout, int N, int format) -> Tensor", &gemv_blocks);
}
