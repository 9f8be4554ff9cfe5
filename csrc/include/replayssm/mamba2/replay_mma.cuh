// The rank update of mamba2_decode's state-and-output route on tensor cores (replay_kernel.cuh's
// kMmaUpdate instances): acc = c0 S0 + X B over a CTA's (p_chunk x N) fp32 state tile, with
// X[p][j] = w_j x_j[p] and B[j][n] = B_j[n] over the row's n_upd entries, then y[p] = acc . C.
//
// Why: on the CUDA cores the update is one FFMA per state element and entry, plus its shared
// loads; at hist 8 those alone put the route at ~1.2x the output-only step's instructions, which
// issue-bound it (ncu, docs/perf-notes.md, Mamba-2 plain decode, "Session 33"). Here a warp's
// 16 x 32 piece of the tile takes, per 16 entries, three bf16 mma per 8 columns: X as three bf16
// terms whose sum is exactly the fp32 product w_j x_j[p] (split_bf16x3), B_j exact (bf16
// activations), accumulated in fp32 on the registers the state was loaded into. A tile that is
// not stored takes the first two terms only (ReplayMmaStream::run_tiles says why).
//
// How the work is split: every warp walks all 16-row tiles of the chunk, each warp its own 32
// columns (unit `warp`; the columns within it in the order of mma_staged_col, so that each lane
// moves four consecutive state columns per 16-byte access), so the warps of a CTA stay level
// whatever the chunk's row count. The spec kernels' MmaStateStream::run gives each warp
// whole tiles instead; on the decode (P = 80: five tiles for four warps) that left one warp with
// twice the others' rows, and put the state through at 54-61 % of copy bandwidth (session 11's
// wip/m2-so-mma, docs/perf-notes.md, "Session 11"). One unit (16 floats per lane) is in flight
// ahead of the one being worked on. The A fragments (X, three terms) are built once per CTA into
// shared memory in fragment order (replay_mma_build_a: one 16-byte load per term and lane); the
// B fragments come from the staged B_j rows by ldmatrix.trans (row stride ldmatrix_row_stride).
// Each warp's dot products with C (read from shared memory per tile) cover its columns only; the
// output sums the warps' partials.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "replayssm/common/mma_bf16.cuh"
#include "replayssm/common/mma_state_stream.cuh"
#include "replayssm/mamba2/entries.cuh"
#include "replayssm/mamba2/tile.cuh"

namespace replayssm::mamba2 {

// The instances built with the tensor-core update: an fp32 checkpoint (the accumulator is the
// state), bf16 activations (B_j exact in bf16), and N one 32-column unit per warp (N = 128 at four
// warps: the model geometries). Two units per warp (N = 256) held 16 C values per lane and spilled
// 136 bytes at the 64-register bound (sm_90a), so that width keeps the CUDA-core update. The
// launcher also requires a 16-byte aligned state view (16-byte lane loads and stores without a
// run-time test) and the state-and-output route (replay_mma_choice).
template <typename Act, typename St, int N, int kWarps>
constexpr bool kReplayMma = std::is_same_v<St, float> && std::is_same_v<Act, __nv_bfloat16> && N == 32 * kWarps;

// 32-bit words of the A fragments in shared memory: per 16-row tile of the chunk and per 16
// entries of the ring, three terms of 32 lanes x 4 registers.
constexpr int kMmaAFragWords = 3 * 32 * 4;
__host__ __device__ inline int replay_mma_a_words(int R, int p_chunk) {
  return (p_chunk + kMmaTileRows - 1) / kMmaTileRows * ((R + 15) / 16) * kMmaAFragWords;
}

// The A fragments of X[p][j] = weight[j] * x_raw[j * p_chunk + p] (zero for p >= plen or
// j >= n_upd): word ((tile * ksteps + ks) * 3 + term) * 128 + lane * 4 + m is register m of lane
// (4 g + t) for rows tile * 16 + g (+ 8 for odd m) and entries 16 ks + 2t (+ 8 for m >= 2), +1.
// Each of the kThreads (one per word of a (tile, k-step) block) writes its word of every block.
// kTerms: the terms run_tiles reads, 3 where the tile is stored (a flush row's fold), else 2 (the
// third is then neither formed nor written).
// Why k-steps outside the tiles, with the entries' weights and x rows set up once per k-step and
// the packed splits: with tiles outside, ptxas formed every block's entry offsets, bounds tests
// and weight loads again and went through __nv_bfloat162 for the splits, ~60 instructions per block
// and thread; at nano's five tiles that was ~17 % of the state-and-output non-flush step's
// instructions (ncu, session 63's profile at 80 SMs, read in session 64). The words are the same
// bit for bit (split_bf16x2_packed's two terms are split_bf16x3_packed's first two).
template <int kThreads, int kTerms>
__device__ __forceinline__ void replay_mma_build_a(uint32_t* a_frag, const float* weight, const __nv_bfloat16* x_raw,
                                                   int p_chunk, int plen, int n_upd, int tid) {
  static_assert(kThreads == 128, "one thread per word of a (tile, k-step) block of the A fragments");
  static_assert(kTerms == 2 || kTerms == 3, "two or three bf16 terms per fp32 product");
  const int m = tid & 3, lane = tid >> 2;
  const int row = (lane >> 2) + 8 * (m & 1), k = 2 * (lane & 3) + 8 * (m >> 1);
  const int ksteps = (n_upd + 15) / 16;
  const int block_stride = ksteps * kMmaAFragWords;  // from one tile's block to the next's
  for (int ks = 0; ks < ksteps; ++ks) {
    const int j = 16 * ks + k;
    // Entries past n_upd contribute zeros; their staged rows may lie past the ring's section.
    const bool has0 = j < n_upd, has1 = j + 1 < n_upd;
    const float w0 = has0 ? weight[j] : 0.f, w1 = has1 ? weight[j + 1] : 0.f;
    // x_j at this thread's row of the tile (x_{j+1} one staged row further), stepped by a tile per
    // iteration: indexed as j * p_chunk + p at every tile, the loop kept 31 SASS instructions per
    // tile; stepped, ptxas unrolls it by four at ~22 (sm_90a).
    const __nv_bfloat16* x_row = x_raw + j * p_chunk + row;
    uint32_t* dst = a_frag + ks * kMmaAFragWords + lane * 4 + m;
    for (int rows_left = plen - row; rows_left > -row;
         rows_left -= kMmaTileRows, x_row += kMmaTileRows, dst += block_stride) {
      float v0 = 0.f, v1 = 0.f;
      if (rows_left > 0) {  // the tile's row m0 + row exists
        if (has0) v0 = w0 * __bfloat162float(x_row[0]);
        if (has1) v1 = w1 * __bfloat162float(x_row[p_chunk]);
      }
      if constexpr (kTerms == 3) {
        split_bf16x3_packed(v0, v1, dst[0], dst[128], dst[256]);
      } else {
        split_bf16x2_packed(v0, v1, dst[0], dst[128]);
      }
    }
  }
}

// The column order of the staged B_j rows: within each 16-column block, staged position 8 h + g
// holds state column 4 (g / 2) + 2 h + g % 2. ldmatrix.trans gives n-tile h's accumulator column
// c the B column at staged position 8 h + c, so a lane (4 g + t) then holds state columns 4t ..
// 4t + 3 of each block (n-tile 0: 4t, 4t + 1; n-tile 1: 4t + 2, 4t + 3): one 16-byte load per row
// and block instead of two 8-byte ones (MmaStateStream's order, whose loads kept L1 77 % busy at
// nano batch 256: ncu, session 35).
__host__ __device__ constexpr int mma_staged_col(int n) {  // state column n -> staged position
  return (n & ~15) + 8 * ((n >> 1) & 1) + 2 * ((n & 15) >> 2) + (n & 1);
}
__host__ __device__ constexpr int mma_state_col(int q) {  // staged position q -> state column
  return (q & ~15) + 4 * ((q & 7) >> 1) + 2 * ((q >> 3) & 1) + (q & 1);
}
__host__ __device__ constexpr bool mma_staged_order_inverts() {
  for (int n = 0; n < 32; ++n)
    if (mma_state_col(mma_staged_col(n)) != n || mma_staged_col(n) >> 4 != n >> 4) return false;
  return true;
}
static_assert(mma_staged_order_inverts() && mma_staged_col(6) == 10,
              "the staged order is a permutation within 16-column blocks");

// The B_j rows of entries 0 .. n_ent-1 for the tensor-core update (row stride ld). Where `vec`,
// by 16-byte cp.async in state column order, each 16-column block (32 bytes) by one thread, which
// puts it in mma_staged_col order after the copies land (permute_b_mma_order); else element by
// element, straight into that order. The copies are stage_entries' 16-byte pieces: copying 4-byte
// pieces (the finest that keep a staged pair together) straight into the staged order takes four
// times the cp.async, and that form ran batch 1 at B = 32 3 % slower than the 8-byte lane order it
// replaced (H200, session 36, call 1). The caller commits and waits.
// f(j, n) for each 16-column block (entry j, first column n) that thread tid owns: the one mapping
// of stage_b_mma_order's copies and permute_b_mma_order's in-place reorder, which must agree (a
// thread reorders only blocks whose copies it waited for).
template <int kThreads, typename F>
__device__ __forceinline__ void for_each_b_block(int n_ent, int N, int tid, F&& f) {
  const int blocks = N / 16;
  for (int e = tid; e < n_ent * blocks; e += kThreads) {
    const int j = e / blocks;
    f(j, 16 * (e - j * blocks));
  }
}

template <int kThreads>
__device__ __forceinline__ void stage_b_mma_order(__nv_bfloat16* dst, int ld, const EntryRows<__nv_bfloat16>& rows,
                                                  int n_ent, int N, bool vec, int tid) {
  if (vec) {
    for_each_b_block<kThreads>(n_ent, N, tid, [&](int j, int n) {
      cp_async16(dst + j * ld + n, rows.row(j) + n);
      cp_async16(dst + j * ld + n + 8, rows.row(j) + n + 8);
    });
  } else {
    for (int e = tid; e < n_ent * N; e += kThreads) {
      const int j = e / N, n = e - j * N;
      dst[j * ld + mma_staged_col(n)] = rows.row(j)[n];
    }
  }
}

// The second half of stage_b_mma_order's `vec` path, by the same threads after their copies have
// landed (cp_async_wait: a thread's own copies are then visible to it, so no barrier stands
// between): each 16-column block from state column order to mma_staged_col order, in place. Word
// w of a block holds columns 2w, 2w + 1; staged half h takes words h, h + 2, h + 4, h + 6.
template <int kThreads>
__device__ __forceinline__ void permute_b_mma_order(__nv_bfloat16* dst, int ld, int n_ent, int N, bool vec, int tid) {
  if (!vec) return;
  for_each_b_block<kThreads>(n_ent, N, tid, [&](int j, int n) {
    uint4* const block = reinterpret_cast<uint4*>(dst + j * ld + n);
    const uint4 lo = block[0], hi = block[1];
    block[0] = make_uint4(lo.x, lo.z, hi.x, hi.z);
    block[1] = make_uint4(lo.y, lo.w, hi.y, hi.w);
  });
}
static_assert(mma_staged_col(2) == 8 && mma_staged_col(4) == 2 && mma_staged_col(9) == 5,
              "permute_b_mma_order's word order: staged half h holds columns 4 k + 2 h, + 1");

template <int N, int kWarps>
struct ReplayMmaStream {
  using Tiles = MmaStateStream<N, kWarps, 1>;
  using Unit = typename Tiles::Unit;
  static_assert(Tiles::kUnits == kWarps, "one 32-column unit per warp");
  static_assert((kWarps & (kWarps - 1)) == 0, "run_tiles picks the prefetching warp by a mask");

  Tiles tiles;  // S = the chunk's first row, tile_rows = plen
  int warp;

  // Where this lane's pieces of its unit sit in a tile: rows g (half 0) and g + 8 (half 1), columns
  // 32 warp + 16 ss + 4 t .. + 3 (v[ss][h][2 half + e] is column 32 warp + 16 ss + 4 t + 2 h + e:
  // mma_staged_col's order). piece0 is the first of them, at row g of the tile at row m0; the
  // others sit at constant offsets from it (piece_offset), and the next tile's 16 N floats on. Set
  // up once rather than per piece and tile: formed from (row, column) at every access, the 64-bit
  // address arithmetic of the four loads and the four stores was ~110 of the tile loop's ~400
  // static SASS instructions (sm_90a, session 45).
  __device__ __forceinline__ float* piece0(int m0) const {
    const int lane = threadIdx.x & 31;
    return tiles.S + (m0 + (lane >> 2)) * N + 32 * warp + 4 * (lane & 3);
  }
  static constexpr int piece_offset(int ss, int half) { return 8 * N * half + 16 * ss; }

  // The lane's pieces at piece0 p; rows_left: the tile's rows from the lane's row g on (row g + 8
  // half exists where 8 half < rows_left; the others read as zeros). A whole tile (tile_full,
  // warp-uniform: the tile's 16 rows all exist) takes the loads without tests or zeroing: 8
  // instructions per tile fewer on sm_90a.
  static __device__ __forceinline__ void load_at(const float* p, int rows_left, bool tile_full, Unit& v) {
    if (tile_full) {
#pragma unroll
      for (int ss = 0; ss < 2; ++ss)
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          const float4 x = __ldcs(reinterpret_cast<const float4*>(p + piece_offset(ss, half)));
          v[ss][0][2 * half] = x.x, v[ss][0][2 * half + 1] = x.y, v[ss][1][2 * half] = x.z, v[ss][1][2 * half + 1] = x.w;
        }
      return;
    }
#pragma unroll
    for (int ss = 0; ss < 2; ++ss)
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        float4 x = make_float4(0.f, 0.f, 0.f, 0.f);
        if (8 * half < rows_left) x = __ldcs(reinterpret_cast<const float4*>(p + piece_offset(ss, half)));
        v[ss][0][2 * half] = x.x, v[ss][0][2 * half + 1] = x.y, v[ss][1][2 * half] = x.z, v[ss][1][2 * half + 1] = x.w;
      }
  }

  static __device__ __forceinline__ void store_at(float* p, int rows_left, const Unit& v) {
#pragma unroll
    for (int ss = 0; ss < 2; ++ss)
#pragma unroll
      for (int half = 0; half < 2; ++half)
        if (8 * half < rows_left)
          __stcs(reinterpret_cast<float4*>(p + piece_offset(ss, half)),
                 make_float4(v[ss][0][2 * half], v[ss][0][2 * half + 1], v[ss][1][2 * half], v[ss][1][2 * half + 1]));
  }

  // The first unit, loaded as soon as the slot is known, and tile 1 asked of L2 (one bulk prefetch
  // by warp 1's lane 0; the stream asks for each later tile two tiles ahead, in run).
  __device__ __forceinline__ void first_unit(Unit& v) const {
    load_at(piece0(0), tiles.tile_rows - static_cast<int>((threadIdx.x & 31) >> 2), tiles.tile_rows >= kMmaTileRows, v);
    if (warp == 1 % kWarps) tiles.prefetch_tile(kMmaTileRows);
  }

  // C at the columns this lane holds: c[ss][h][e] = C[16 (2 warp + ss) + 4 t + 2 h + e].
  __device__ __forceinline__ void load_c(const __nv_bfloat16* C_in, float (&c)[2][2][2]) const {
    const int t = threadIdx.x & 3;
#pragma unroll
    for (int ss = 0; ss < 2; ++ss)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const float2 v = __bfloat1622float2(
            *reinterpret_cast<const __nv_bfloat162*>(C_in + 16 * (2 * warp + ss) + 4 * t + 2 * h));
        c[ss][h][0] = v.x, c[ss][h][1] = v.y;
      }
  }

  // C from load_c into shared memory (c_s[n] = C[n], state column order), by lanes 0-3 of each
  // warp for the warp's 32 columns; run_tiles reads it back per tile. Held in registers over the
  // stream, its 8 values per lane spilled at the 64-register bound (sm_90a 4 bytes, sm_100a 20,
  // reloaded in the tile loops).
  __device__ __forceinline__ void store_c(const float (&c)[2][2][2], float* c_s) const {
    const int lane = threadIdx.x & 31, t = lane & 3;
    if (lane < 4)
#pragma unroll
      for (int ss = 0; ss < 2; ++ss)
        *reinterpret_cast<float4*>(c_s + 16 * (2 * warp + ss) + 4 * t) =
            make_float4(c[ss][0][0], c[ss][0][1], c[ss][1][0], c[ss][1][1]);
  }
  __device__ __forceinline__ void load_c_shared(const float* c_s, float (&c)[2][2][2]) const {
    const int t = threadIdx.x & 3;
#pragma unroll
    for (int ss = 0; ss < 2; ++ss) {
      const float4 v = *reinterpret_cast<const float4*>(c_s + 16 * (2 * warp + ss) + 4 * t);
      c[ss][0][0] = v.x, c[ss][0][1] = v.y, c[ss][1][0] = v.z, c[ss][1][1] = v.w;
    }
  }

  // This warp's share of the dot products with C of rows g and g + 8 of a tile: part[half] = the
  // sum over the lane's columns.
  __device__ __forceinline__ static void add_dots(const Unit& v, const float (&c)[2][2][2], float (&part)[2]) {
    part[0] = 0.f, part[1] = 0.f;
#pragma unroll
    for (int half = 0; half < 2; ++half)
#pragma unroll
      for (int ss = 0; ss < 2; ++ss)
#pragma unroll
        for (int h = 0; h < 2; ++h)
#pragma unroll
          for (int e = 0; e < 2; ++e) part[half] = fmaf(v[ss][h][2 * half + e], c[ss][h][e], part[half]);
  }

  // The whole stream of this warp over the chunk's tiles: per tile, v = c0 v + X B over the warp's
  // unit (v holds the unit's state as loaded), the state write (kStore), and the warp's partial dot
  // products with C into dot_part[warp * p_chunk + row]. cur: this warp's first unit, loaded as soon
  // as the slot was known.
  // A tile that is stored (a flush row's fold) takes X's three terms: the checkpoint carries its
  // error into every later step. One that is not (a state-and-output row that does not flush) is
  // read only for its dot products with C, rounded to the activation dtype: X's first two terms
  // (relative error below 2^-16 per product, against bf16's 2^-9 on the output) save a third of
  // the mma and A fragment loads.
  // kStore is a template argument, so that rows that do not flush run a loop without the stores and
  // the third term's tests, as the GDN window kernel's folding and other CTAs do. The first k-step
  // of a tile is written out of the loop over k-steps (at B <= 16 it is the only one). With the
  // addresses set up once (piece0), C from shared memory (store_c) and whole tiles loaded without
  // tests (load_at), the loop issues ~125 SASS instructions per tile on rows that do not flush and
  // ~150 on flush rows at B <= 16 (sm_90a, the nano / super instance; 64 registers and no spill on
  // sm_90a and sm_100a), against ~217 and ~290 in the form before (session 45, from the SASS).
  // Measured on an H100 (session 50), bit-identical results: the state-and-output cycle 0.7-1.1 %
  // faster at B = 16 batch 256, 3.7-4.8 % at B = 32, 3.6-6.9 % at batch 1.
  // Rows past the tile left unset instead of zeroed saved as much on sm_90a but spilled 52 bytes on
  // sm_100a (the predicated loads then keep the old values live).
  // Two tiles per iteration with cur and nxt trading roles, instead of the carry at the end of each,
  // made ptxas move the mma accumulators around every k-step (~206 static instructions per tile).
  template <bool kStore>
  __device__ __forceinline__ void run_tiles(Unit& cur, float c0, int n_upd, const uint32_t* a_frag,
                                            const __nv_bfloat16* b_raw, int ldb, const __nv_bfloat16* zeros,
                                            const float* c_s, float* dot_part, int p_chunk) const {
    constexpr int kTerms = kStore ? 3 : 2;
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int mat = lane >> 3, mat_row = lane & 7;  // the ldmatrix row this lane addresses
    const int plen = tiles.tile_rows;
    const int num_tiles = (plen + kMmaTileRows - 1) / kMmaTileRows;
    const int ksteps = (n_upd + 15) / 16;
    // B: matrix m holds entries 16 ks + (m & 1) * 8 .. and columns (m >> 1) * 8 .. of the 16
    // columns of ss: registers 0, 1 are n-tile 0's fragment, 2, 3 n-tile 1's. 16 ks + jk0 is the
    // entry this lane addresses.
    const int jk0 = (mat & 1) * 8 + mat_row;
    const int b_lane = jk0 * ldb + 32 * warp + (mat >> 1) * 8;
    // v += X B over k-step ks of the tile: A from block tile * ksteps + ks of the fragments.
    auto kstep = [&](int tile, int ks, Unit& v) {
      uint32_t b[2][4];
#pragma unroll
      for (int ss = 0; ss < 2; ++ss)
        ldmatrix_x4_trans(b[ss], 16 * ks + jk0 < n_upd ? b_raw + 16 * ks * ldb + b_lane + 16 * ss : zeros);
      // One term's A fragment at a time (4 registers live, not 12), smallest terms first as in
      // MmaStateStream::fold_unit: the accumulator then meets them before it grows.
      const uint4* const a = reinterpret_cast<const uint4*>(a_frag + (tile * ksteps + ks) * kMmaAFragWords) + lane;
#pragma unroll
      for (int term = kTerms - 1; term >= 0; --term) {
        const uint4 a4 = a[32 * term];
        const uint32_t a_term[4] = {a4.x, a4.y, a4.z, a4.w};
#pragma unroll
        for (int ss = 0; ss < 2; ++ss)
#pragma unroll
          for (int h = 0; h < 2; ++h) mma_bf16_16816(v[ss][h], a_term, b[ss][2 * h], b[ss][2 * h + 1]);
      }
    };
    // v = c0 v where a unit enters cur: the first here, each later one as it is carried over from
    // nxt at the end of the tile before (cur = c0 nxt). Decayed at the top of each tile instead,
    // the carry was 16 MOV and the decay 16 FMUL per tile and lane (sm_90a, ncu in session 65).
    // The same products, so the same words bit for bit. H100, batch 256, tree / before (session 66):
    // the non-flush step 0.976-0.994 at 80 / 96 SMs, the flush step 1.02-1.035 at B = 16 (the
    // nine-CTA instance now spills 8 bytes on sm_90a, two local loads per tile of the flush rows'
    // loop; keeping that loop in the old form spilled more), the cycle 0.987-0.995 at 80 / 96 SMs
    // and level on all 132.
#pragma unroll
    for (int ss = 0; ss < 2; ++ss)
#pragma unroll
      for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int e = 0; e < 4; ++e) cur[ss][h][e] *= c0;
    float* state = piece0(0);  // this lane's first piece of the tile
#pragma unroll 1
    for (int tile = 0; tile < num_tiles; ++tile, state += kMmaTileRows * N) {
      const int m0 = tile * kMmaTileRows;
      // The next tile's unit in registers, and the one after it asked of L2 (by one warp per tile):
      // each warp holds one unit in flight, and the CTA's prologue and its outputs have nothing else
      // in flight.
      if ((tile & (kWarps - 1)) == warp) tiles.prefetch_tile(m0 + 2 * kMmaTileRows);
      Unit nxt;
      if (tile + 1 < num_tiles)
        load_at(state + kMmaTileRows * N, plen - m0 - kMmaTileRows - g, plen - m0 >= 2 * kMmaTileRows, nxt);
      // k-step 0's B addresses are the same in every tile, so ptxas hoists them out of the loop.
      // On flush rows (kStore), with the third term's fragment live, the nine-CTA instance then
      // spilled them on sm_90a (8 bytes: two local loads per tile ahead of the ldmatrix). An opaque
      // zero for ks has them formed again per tile from the lane: no spill there, ~8 instructions
      // per tile more (ptxas; sm_100a's eight-CTA instance also went from 8 bytes of spill to none,
      // its nine-CTA one stays at 24). H100, batch 256, B = 16: the flush step 2.5-3.8 % faster at
      // 132 / 96 / 80 SMs, the non-flush step level (session 68).
      int ks0 = 0;
      if constexpr (kStore) asm volatile("" : "+r"(ks0));
      if (ksteps > 0) kstep(tile, ks0, cur);
#pragma unroll 1
      for (int ks = 1; ks < ksteps; ++ks) kstep(tile, ks, cur);
      if constexpr (kStore) store_at(state, plen - m0 - g, cur);
      float c[2][2][2];
      load_c_shared(c_s, c);
      float part[2];
      add_dots(cur, c, part);
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        part[half] += __shfl_xor_sync(0xffffffffu, part[half], 1);
        part[half] += __shfl_xor_sync(0xffffffffu, part[half], 2);
        const int r = m0 + g + 8 * half;
        if (t == 0 && r < plen) dot_part[warp * p_chunk + r] = part[half];
      }
#pragma unroll
      for (int ss = 0; ss < 2; ++ss)
#pragma unroll
        for (int h = 0; h < 2; ++h)
#pragma unroll
          for (int e = 0; e < 4; ++e) cur[ss][h][e] = c0 * nxt[ss][h][e];
    }
  }

  __device__ __forceinline__ void run(Unit& cur, float c0, int n_upd, bool store, const uint32_t* a_frag,
                                      const __nv_bfloat16* b_raw, int ldb, const __nv_bfloat16* zeros,
                                      const float* c_s, float* dot_part, int p_chunk) const {
    if (store) {
      run_tiles<true>(cur, c0, n_upd, a_frag, b_raw, ldb, zeros, c_s, dot_part, p_chunk);
    } else {
      run_tiles<false>(cur, c0, n_upd, a_frag, b_raw, ldb, zeros, c_s, dot_part, p_chunk);
    }
  }
};

}  // namespace replayssm::mamba2
