// amtool's GMM kernels: scoring and EM statistics for diagonal and
// full-covariance Gaussians. Compiled at run time by NVRTC, once per model
// shape, with these macros defined by the host (src/engine/cuda/compile.rs):
//
//   D     feature dimension (1..)
//   KZ    length of the expanded feature z(x) (see below), constant 1 included
//   FULL  0: diagonal covariances, 1: full covariances
//   TF    frames (or (frame, state) entries) per tile; NT = 4*TF threads
//   LANES states per block of the padded layout (src/layout.rs builds the
//         blocks; the host asks it for blocks of this size)
//   GB    Gaussians per tile in the per-state kernels (64 diagonal, 16 full)
//   KCH   rows of z held in shared memory at once (KZ when it fits; long
//         full-covariance z are walked in NCH = ceil(KZ/KCH) chunks)
//   KW    rows of W per stage of the cp.async pipeline (staged kernels)
//   WRES  1: accum_stats keeps its Gaussian block's W in shared memory
//   LSTATS 1: accum_stats is the lane kernel (one warp a stream of entries,
//         lane g = Gaussian g; diagonal, GB == 32, short z), 0: the tiled one
//   SW    warps per CTA of the lane kernel (32*SW threads)
//   LQ    frames per step of the lane kernel (independent chains: 4, or 2
//         where 4 would spill); LMR its register cap (0: none)
//   TCW, KS, KC  tensor-core scoring (see below; KC > 0: the K-chunked kernel)
//   and, when FULL, the array PAIRS[p] = (i << 8) | j of packed index p (i >= j).
//
// Every Gaussian log-likelihood is one dot product (the GEMM formulation of
// Vaněk et al. 2012 and Machlica et al. 2011):
//   diagonal: z = [x, x², 1],             w = [μ/σ², −½/σ², gconst]
//   full:     z = [x, x_i x_j (i ≥ j), 1], w = [Σ⁻¹μ, c_ij, gconst]
//             with c_ii = −½ P_ii and c_ij = −P_ij (P = Σ⁻¹, Kaldi's packed
//             lower triangle order)
// and the EM statistics of a Gaussian are Σ γ z = [Σγx, Σγx² or Σγxxᵀ, Σγ]:
// the accumulators' own layout, so one kernel serves both covariance kinds.
//
// Determinism: no atomics. Every sum runs in a fixed order; partial
// statistics go to per-work-item slots and are reduced in item order in f64.

#if LANES != 64                  // 16 threads x 4 states a row; 8 x 8 mma columns
#error "the block-scoring kernels are written for 64-state blocks"
#endif
#define ZS (TF + 4)              // row stride of the k-major z tile (float4 aligned)
#define TGG (GB / 16)            // Gaussians per thread in the log-likelihood tile
#define SGW ((GB >= 64) ? 8 : 4) // Gaussians per thread in the statistics tile
#define SG (GB / SGW)            // thread rows of the statistics tile
#define NSX (NT / SG)            // thread columns of the statistics tile
#define RK ((KZ + NSX - 1) / NSX)
#define GS (GB + 4)              // row stride of the posterior tile
#define NEG_BIG (-3.402823466e38f)
#define NEG_INF __int_as_float(0xff800000)
#define NCH ((KZ + KCH - 1) / KCH)

// NVRTC has no standard headers: own names for these.
typedef unsigned long long u64;
__device__ __forceinline__ int imin(int a, int b) { return a < b ? a : b; }

struct Item {
    int state;  // state of the entries
    int first;  // first entry
    int count;  // entries (<= TF for log-likelihood items)
    int gblock; // Gaussian block (statistics items)
};

struct Group {
    int item_first;  // first statistics item of this (state, Gaussian block)
    int item_count;
    int gauss_first; // global index (state-major order) of its first Gaussian
    int gauss_count; // real Gaussians in the block
};

// z_k(x) for k < KZ; row = one frame's D features.
__device__ __forceinline__ float zval(const float* __restrict__ row, int k) {
    if (k < D) return row[k];
#if FULL
    if (k < KZ - 1) {
        unsigned p = PAIRS[k - D];
        return row[p >> 8] * row[p & 255u];
    }
#else
    if (k < 2 * D) {
        float v = row[k - D];
        return v * v;
    }
#endif
    return 1.0f;
}

// z in the block-scoring order (PAIRED): position k holds natural term
// ZORD[k] (defined by the host, cuda/compile.rs scoring_z_order): dimension
// by dimension, last first — diagonal x_i, x_i²; full x_i, x_i x_0 … x_i x_i
// — and the constant last, so each dimension's large cancelling terms meet
// before they are added to the rest (the CPU engine's order). The host
// orders the block weight rows the same way. The per-state kernels and the
// statistics keep the natural order of zval (the accumulators' layout).
template <bool PAIRED>
__device__ __forceinline__ float zval_t(const float* __restrict__ row, int k) {
    return zval(row, PAIRED ? (int)ZORD[k] : k);
}

// Online log-sum-exp (running max m, scaled sum s). m starts at NEG_BIG (not
// −∞) so virtual Gaussians (v = −∞) add exp(−∞) = 0 and never make NaN.
__device__ __forceinline__ void lse_push(float& m, float& s, float v) {
    float mn = fmaxf(m, v);
    s = s * __expf(m - mn) + __expf(v - mn);
    m = mn;
}

__device__ __forceinline__ void lse_merge(float& m, float& s, float mo, float so) {
    float mn = fmaxf(m, mo);
    s = s * __expf(m - mn) + so * __expf(mo - mn);
    m = mn;
}

// Where a tile's z rows come from: `n` entries from `e0`, entry e reading
// frame frame_of[e] (or e when frame_of is null).
struct ZSrc {
    const float* __restrict__ feats;
    const unsigned* __restrict__ frame_of;
    int e0, n;
};

// Fill rows [k0, k0+KCH) ∩ [0, KZ) of the k-major tile zs[k-k0][f] (and, if
// zt is not null, of the frame-major copy zt[f][k-k0]); entries past n get
// z = [0.., 1]. Call between barriers.
template <bool PAIRED = false>
__device__ __forceinline__ void load_z(float* zs, float* zt, const ZSrc& src, int k0) {
    const int rows = imin(KCH, KZ - k0);
    for (int el = threadIdx.x; el < rows * TF; el += NT) {
        const int kk = el / TF, f = el % TF, k = k0 + kk;
        float z = (k == KZ - 1) ? 1.0f : 0.0f;
        if (f < src.n) {
            const int e = src.e0 + f;
            const u64 t = src.frame_of ? (u64)src.frame_of[e] : (u64)e;
            z = zval_t<PAIRED>(src.feats + t * D, k);
        }
        zs[kk * ZS + f] = z;
        if (zt) zt[f * KCH + kk] = z;
    }
}

// acc[i][j] += z(entry ty*4+i) · W[k*STRIDE + tx*TG + j] over all k.
// With NCH == 1 the caller has loaded zs; otherwise the chunks are loaded
// here (every thread of the CTA must call this together).
// Wt may point to global or shared memory (plain loads; inlined, the
// compiler picks the instruction).
template <int STRIDE, int TG, bool PAIRED = false>
__device__ __forceinline__ void dot_tile(const float* Wt, float* zs, const ZSrc& src,
                                         int tx, int ty, float acc[4][TG]) {
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < TG; ++j) acc[i][j] = 0.0f;
    for (int k0 = 0; k0 < KZ; k0 += KCH) {
        if (NCH > 1) {
            __syncthreads();
            load_z<PAIRED>(zs, nullptr, src, k0);
            __syncthreads();
        }
        const int rows = imin(KCH, KZ - k0);
        const float* Wk = Wt + (u64)k0 * STRIDE + tx * TG;
#pragma unroll 8
        for (int kk = 0; kk < rows; ++kk) {
            const float4 z = *reinterpret_cast<const float4*>(zs + kk * ZS + ty * 4);
            const float zz[4] = {z.x, z.y, z.z, z.w};
            float w[TG];
            if (TG == 4) {
                const float4 w4 = *reinterpret_cast<const float4*>(Wk + kk * STRIDE);
                w[0] = w4.x;
                w[1 % TG] = w4.y;
                w[2 % TG] = w4.z;
                w[3 % TG] = w4.w;
            } else {
#pragma unroll
                for (int j = 0; j < TG; ++j) w[j] = Wk[kk * STRIDE + j];
            }
#pragma unroll
            for (int i = 0; i < 4; ++i)
#pragma unroll
                for (int j = 0; j < TG; ++j) acc[i][j] = fmaf(zz[i], w[j], acc[i][j]);
        }
    }
}

// ---------------------------------------------------------------------------
// W staging: the weights of the next (Gaussian, row chunk) stage are copied
// into shared memory (cp.async, sm_80+) while the current stage computes, so
// the dot products read both operands from shared memory and the global loads
// are many and in flight at once instead of one per FMA block.
#define WST ((KZ + KW - 1) / KW) // stages per Gaussian slot

__device__ __forceinline__ void cp16(float* dst, const float* src) {
#if __CUDA_ARCH__ >= 800
    const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(d), "l"(src));
#else
    *reinterpret_cast<float4*>(dst) = *reinterpret_cast<const float4*>(src);
#endif
}
__device__ __forceinline__ void cp_commit() {
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.commit_group;\n" ::);
#endif
}
template <int N>
__device__ __forceinline__ void cp_wait() {
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
#endif
}

// Stage `st` of a walk over Gaussian slots: rows [c*KW, ..) of slot st/WST
// (slot stride KZ*STRIDE floats) into buffer st&1 of wb.
template <int STRIDE>
__device__ __forceinline__ void issue_stage(float* wb, const float* __restrict__ W, int st) {
    const int g = st / WST, c = st % WST, k0 = c * KW;
    const int n = imin(KW, KZ - k0) * STRIDE;
    const float* src = W + ((u64)g * KZ + k0) * STRIDE;
    float* dst = wb + (st & 1) * KW * STRIDE;
    for (int i = threadIdx.x * 4; i < n; i += NT * 4) cp16(dst + i, src + i);
    cp_commit();
}

// For each of `slots` Gaussian slots of W ([slot][k][STRIDE], z resident in
// zs): acc = z·w for this thread's 4 entries × TG columns, then fin(slot, acc).
template <int STRIDE, int TG, class Fin>
__device__ __forceinline__ void staged_walk(const float* __restrict__ W, int slots, const float* zs, float* wb,
                                            int tx, int ty, Fin fin) {
    const int stages = slots * WST;
    float acc[4][TG];
    if (stages > 0) issue_stage<STRIDE>(wb, W, 0);
    for (int st = 0; st < stages; ++st) {
        if (st + 1 < stages) {
            issue_stage<STRIDE>(wb, W, st + 1);
            cp_wait<1>();
        } else {
            cp_wait<0>();
        }
        __syncthreads();
        const int c = st % WST, k0 = c * KW, rows = imin(KW, KZ - k0);
        if (c == 0) {
#pragma unroll
            for (int i = 0; i < 4; ++i)
#pragma unroll
                for (int j = 0; j < TG; ++j) acc[i][j] = 0.0f;
        }
        const float* w = wb + (st & 1) * KW * STRIDE + tx * TG;
        const float* z = zs + k0 * ZS + ty * 4;
#pragma unroll 8
        for (int kk = 0; kk < rows; ++kk) {
            const float4 z4 = *reinterpret_cast<const float4*>(z + kk * ZS);
            const float zz[4] = {z4.x, z4.y, z4.z, z4.w};
            float wv[TG];
            if (TG == 4) {
                const float4 w4 = *reinterpret_cast<const float4*>(w + kk * STRIDE);
                wv[0] = w4.x;
                wv[1 % TG] = w4.y;
                wv[2 % TG] = w4.z;
                wv[3 % TG] = w4.w;
            } else {
#pragma unroll
                for (int j = 0; j < TG; ++j) wv[j] = w[kk * STRIDE + j];
            }
#pragma unroll
            for (int i = 0; i < 4; ++i)
#pragma unroll
                for (int j = 0; j < TG; ++j) acc[i][j] = fmaf(zz[i], wv[j], acc[i][j]);
        }
        if (c == WST - 1) fin(st / WST, acc);
        __syncthreads();
    }
}

// ---------------------------------------------------------------------------
// State log-likelihoods on the padded 64-state blocks (Vaněk et al. 2012,
// Algorithm 1): a CTA scores one block of 64 states against TF frames held in
// shared memory. Each thread owns 4 states × 4 frames, walks the block's
// Gaussian slots in order and keeps an online log-sum-exp per (frame, state).
// W is in the papers' Fig. 2 order: [slot][k][lane], so the 16 threads of a
// row read 64 consecutive floats (coalesced, float4).
// Grid: (frame tiles, blocks). Dynamic shared memory: KCH*ZS + 2*KW*LANES floats.
extern "C" __global__ void __launch_bounds__(NT) block_score(
    const float* __restrict__ feats, int T, const float* __restrict__ W,
    const int* __restrict__ block_off, const int* __restrict__ block_slots,
    const int* __restrict__ lane_state, float* __restrict__ out, int S) {
    extern __shared__ __align__(16) float smem[];
    float* zs = smem;
    const int t0 = blockIdx.x * TF, b = blockIdx.y, tid = threadIdx.x;
    const ZSrc src = {feats, nullptr, t0, imin(TF, T - t0)};
    if (NCH == 1) {
        load_z<true>(zs, nullptr, src, 0);
        __syncthreads();
    }
    const int tx = tid & 15, ty = tid >> 4;
    float m[4][4], s[4][4];
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            m[i][j] = NEG_BIG;
            s[i][j] = 0.0f;
        }
    const int G = block_slots[b];
    const float* Wg = W + (u64)block_off[b] * KZ * LANES;
#if NCH == 1
    staged_walk<LANES, 4>(Wg, G, zs, smem + KCH * ZS, tx, ty, [&](int, float (&acc)[4][4]) {
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
            for (int j = 0; j < 4; ++j) lse_push(m[i][j], s[i][j], acc[i][j]);
    });
#else
    for (int g = 0; g < G; ++g, Wg += (u64)KZ * LANES) {
        float acc[4][4];
        dot_tile<LANES, 4, true>(Wg, zs, src, tx, ty, acc);
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
            for (int j = 0; j < 4; ++j) lse_push(m[i][j], s[i][j], acc[i][j]);
    }
#endif
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        const int st = lane_state[b * LANES + tx * 4 + j];
        if (st < 0) continue;
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const int t = t0 + ty * 4 + i;
            if (t < T) out[(u64)t * S + st] = m[i][j] + logf(s[i][j]);
        }
    }
}

// ---------------------------------------------------------------------------
// Per-state kernels. Gaussians of a state are stored in blocks of GB:
// W[(state_gblock[s] + gb)][k][GB]; Gaussians past the state's count are zero
// there and masked to −∞ here.

// Per-component log-likelihoods of one state: out[e][g] (row length G).
// Items: (state, first entry, count <= TF, Gaussian block).
extern "C" __global__ void __launch_bounds__(NT) component_ll(
    const float* __restrict__ feats, const Item* __restrict__ items, const float* __restrict__ W,
    const int* __restrict__ state_gblock, const int* __restrict__ state_ng, float* __restrict__ out) {
    extern __shared__ __align__(16) float smem[];
    float* zs = smem;
    const Item it = items[blockIdx.x];
    const ZSrc src = {feats, nullptr, it.first, it.count};
    if (NCH == 1) {
        load_z(zs, nullptr, src, 0);
        __syncthreads();
    }
    const int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;
    const int G = state_ng[it.state];
    float acc[4][TGG];
    dot_tile<GB, TGG>(W + (u64)(state_gblock[it.state] + it.gblock) * KZ * GB, zs, src, tx, ty, acc);
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < TGG; ++j) {
            const int f = ty * 4 + i, g = it.gblock * GB + tx * TGG + j;
            if (f < it.count && g < G) out[(u64)(it.first + f) * G + g] = acc[i][j];
        }
}

// Pass 1 of the statistics (Machlica's γ̂ and L kernels fused): the
// log-likelihood L_e of each (frame, state) entry over all the state's
// Gaussians, and per item Σ weight·L in f64 (fixed order).
// Items: (state, first entry, count <= TF, -).
extern "C" __global__ void __launch_bounds__(NT) entry_loglike(
    const float* __restrict__ feats, const unsigned* __restrict__ frame_of,
    const float* __restrict__ weight_of, const Item* __restrict__ items,
    const float* __restrict__ W, const int* __restrict__ state_gblock,
    const int* __restrict__ state_ng, float* __restrict__ entry_ll, double* __restrict__ item_wll) {
    extern __shared__ __align__(16) float smem[];
    float* zs = smem;
    __shared__ float ll[TF];
    const Item it = items[blockIdx.x];
    const ZSrc src = {feats, frame_of, it.first, it.count};
    if (NCH == 1) {
        load_z(zs, nullptr, src, 0);
        __syncthreads();
    }
    const int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;
    const int G = state_ng[it.state];
    const float* Wst = W + (u64)state_gblock[it.state] * KZ * GB;
    float m[4], s[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        m[i] = NEG_BIG;
        s[i] = 0.0f;
    }
#if NCH == 1
    staged_walk<GB, TGG>(Wst, (G + GB - 1) / GB, zs, smem + KCH * ZS, tx, ty, [&](int gb, float (&acc)[4][TGG]) {
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
            for (int j = 0; j < TGG; ++j) {
                const int g = gb * GB + tx * TGG + j;
                lse_push(m[i], s[i], g < G ? acc[i][j] : NEG_INF);
            }
    });
#else
    for (int gb = 0; gb * GB < G; ++gb) {
        float acc[4][TGG];
        dot_tile<GB, TGG>(Wst + (u64)gb * KZ * GB, zs, src, tx, ty, acc);
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
            for (int j = 0; j < TGG; ++j) {
                const int g = gb * GB + tx * TGG + j;
                lse_push(m[i], s[i], g < G ? acc[i][j] : NEG_INF);
            }
    }
#endif
    // Combine the 16 threads of a row (lanes differing in the low 4 bits);
    // the merge is symmetric, so every lane ends with the same bits.
#pragma unroll
    for (int off = 8; off >= 1; off >>= 1)
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const float mo = __shfl_xor_sync(0xffffffffu, m[i], off);
            const float so = __shfl_xor_sync(0xffffffffu, s[i], off);
            lse_merge(m[i], s[i], mo, so);
        }
    if (tx == 0) {
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const int f = ty * 4 + i;
            const float l = m[i] + logf(s[i]);
            ll[f] = l;
            if (f < it.count) entry_ll[it.first + f] = l;
        }
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        double sum = 0.0;
        for (int f = 0; f < it.count; ++f)
            sum += (double)(weight_of ? weight_of[it.first + f] : 1.0f) * (double)ll[f];
        item_wll[blockIdx.x] = sum;
    }
}

// Log-sum-exp of each of a thread's 4 frames over the GB Gaussians of the
// tile (G real ones), the 16 threads of a row merged as entry_loglike merges
// them, so every lane of the row ends with the same bits.
__device__ __forceinline__ void block_lse(const float (&acc)[4][TGG], int G, int tx, float (&l)[4]) {
    float m[4], s[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        m[i] = NEG_BIG;
        s[i] = 0.0f;
#pragma unroll
        for (int j = 0; j < TGG; ++j) lse_push(m[i], s[i], tx * TGG + j < G ? acc[i][j] : NEG_INF);
    }
#pragma unroll
    for (int off = 8; off >= 1; off >>= 1)
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const float mo = __shfl_xor_sync(0xffffffffu, m[i], off);
            const float so = __shfl_xor_sync(0xffffffffu, s[i], off);
            lse_merge(m[i], s[i], mo, so);
        }
#pragma unroll
    for (int i = 0; i < 4; ++i) l[i] = m[i] + logf(s[i]);
}

// Σ weight·L over the n entries of a tile (L in ll), in f64, by warp 0:
// entries lane, lane + 32, … a lane, then a butterfly (a fixed order; every
// lane gets the same bits). One thread summing them in turn held the
// tile's other warps at the next barrier.
__device__ __forceinline__ double tile_wll(const float* ll, const float* __restrict__ weight_of, int e0,
                                           int n, int lane) {
    double sum = 0.0;
    for (int f = lane; f < n; f += 32) sum += (double)(weight_of ? weight_of[e0 + f] : 1.0f) * (double)ll[f];
#pragma unroll
    for (int off = 16; off >= 1; off >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);
    return sum;
}

#if LSTATS
// ---------------------------------------------------------------------------
// Pass 2 for small GMMs, "one warp = one stream of entries, lane g =
// Gaussian g" (LSTATS = 1: diagonal models whose states all fit in one block
// of GB = 32 Gaussians, z short enough to live in registers; the host
// decides, engine/cuda/compile.rs KernelShape::sw). The same items, outputs
// and arithmetic as the tiled kernel below: per item (state, first entry,
// count, Gaussian block) the statistics Σγz of its 32 Gaussians into
// partial[item][GB][KZ] and, in one pass (entry_ll == nullptr), Σ weight·L
// into item_wll[item].
//
// Why this layout: with 32 Gaussians a 256-thread CTA tiling frames ×
// Gaussians spends its issue slots on shared-memory traffic (z held twice,
// the posteriors through shared memory, a block-wide log-sum-exp). Here lane
// g keeps its Gaussian's weight row w[KZ] and its accumulators acc[KZ] in
// registers for the whole item, so a frame costs one fmaf per (Gaussian, k)
// for the score and one for the statistics, z is read as float4 broadcasts
// (every lane the same address), the log-sum-exp over the Gaussians is a
// butterfly of shuffles, and γ never leaves its lane.
//
// A CTA of SW warps takes one item; warp w takes its entries in tiles of 32
// (tiles w, w + SW, …), loads their rows z_f = [x, x²] into its own tile
// (row stride ZR, float4 aligned) and walks them LQ frames at a time (LQ
// independent chains for the scores, log-sum-exps and statistics). At the
// end the warps' accumulators are added in warp order through shared memory
// (the tiles reused) and written to the item's slot coalesced.
//
// Arithmetic, matching the tiled kernels bit for bit where it matters: the
// score s = Σ_{k<KZ-1} z_k·w_k is one fmaf chain from 0 in ascending k, then
// + w[KZ-1] (dot_tile's and entry_loglike's order, so a two-pass L fits these
// scores: a one-Gaussian state gets γ = weight exactly); the statistics of
// each (Gaussian, k) are one fmaf chain over the warp's frames in order.
// Every sum runs in a fixed order; no atomics.
//
// Dynamic shared memory: SW*32*LSM floats (LSM = max(ZR, KZ): the tiles,
// then the warps' accumulators) and SW*32*D floats (each warp's staging
// area, where its next tile's rows arrive); static: SW doubles.
#if GB != 32 || FULL
#error "the lane statistics kernel is written for diagonal 32-Gaussian blocks"
#endif
#define ZR ((2 * D + 3) / 4 * 4) // row stride of a warp's z tile: x, x², padding
#define LSM (ZR > KZ ? ZR : KZ)  // floats of shared memory per thread
#define FULL_MASK 0xffffffffu
// With more than 4 warps a CTA, registers capped (LMR, from the host) so two
// CTAs fit an SM; __maxnreg__ needs NVRTC 12.4.
#if LMR && (__CUDACC_VER_MAJOR__ > 12 || (__CUDACC_VER_MAJOR__ == 12 && __CUDACC_VER_MINOR__ >= 4))
#define LANE_BOUNDS __maxnreg__(LMR)
#else
#define LANE_BOUNDS __launch_bounds__(32 * SW)
#endif

// One float from global to shared memory without the registers (cp.async,
// sm_80+; a plain copy before).
__device__ __forceinline__ void cp4(float* dst, const float* src) {
#if __CUDA_ARCH__ >= 800
    const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(d), "l"(src));
#else
    *dst = *src;
#endif
}

// Start copying the rows of entries e0 .. e0 + n (entry e reads frame
// frame_of[e], or e) into this warp's staging area stage[f*D + d], every
// float's copy in flight at once (cp_commit / cp_wait by the caller): the
// next tile's rows arrive while the warp computes on this one. Lane l reads
// entry e0 + l's frame; a row's floats are consecutive (coalesced where the
// entries' frames are).
__device__ __forceinline__ void lane_issue_tile(float* stage, const float* __restrict__ feats,
                                                const unsigned* __restrict__ frame_of, int e0, int n,
                                                int lane) {
    unsigned t = 0;
    if (lane < n) t = frame_of ? frame_of[e0 + lane] : (unsigned)(e0 + lane);
#pragma unroll 4
    for (int el = lane; el < 32 * D; el += 32) {
        const int f = el / D, d = el - f * D;
        const unsigned tf = __shfl_sync(FULL_MASK, t, f);
        if (f < n) cp4(stage + el, feats + (u64)tf * D + d);
    }
}

// This warp's tile from its staging area: row f = z_f[0..2D) = [x, x²] of
// the tile's entry f, zeros for f >= n. Call after the copies have landed.
__device__ __forceinline__ void lane_build_tile(float* zt, const float* stage, int n, int lane) {
#pragma unroll 4
    for (int el = lane; el < 32 * D; el += 32) {
        const int f = el / D, d = el - f * D;
        const float x = f < n ? stage[el] : 0.0f;
        zt[f * ZR + d] = x;
        zt[f * ZR + D + d] = x * x;
    }
}

// Component j (0..3) of a float4 (j a compile-time constant once unrolled).
__device__ __forceinline__ float f4(const float4& v, int j) {
    return j == 0 ? v.x : j == 1 ? v.y : j == 2 ? v.z : v.w;
}

// s[q] = z_{f0+q} · w: one fmaf chain from 0 over k < KZ-1 ascending, then
// + w[KZ-1] (z_{KZ-1} = 1), as dot_tile sums.
__device__ __forceinline__ void lane_scores(const float* zt, int f0, const float (&w)[KZ],
                                            float (&s)[LQ]) {
#pragma unroll
    for (int q = 0; q < LQ; ++q) s[q] = 0.0f;
#pragma unroll
    for (int k = 0; k < 2 * D; k += 4) {
#pragma unroll
        for (int q = 0; q < LQ; ++q) {
            const float4 z = *reinterpret_cast<const float4*>(zt + (f0 + q) * ZR + k);
#pragma unroll
            for (int j = 0; j < 4; ++j)
                if (k + j < 2 * D) s[q] = fmaf(f4(z, j), w[k + j < KZ ? k + j : 0], s[q]);
        }
    }
#pragma unroll
    for (int q = 0; q < LQ; ++q) s[q] += w[KZ - 1];
}

// L[q] = log Σ_g exp(v[q]) over the warp's lanes (v = −∞ on masked lanes):
// max, then Σ exp(v − max), each a butterfly, so every lane gets the same
// bits. The max is kept above NEG_BIG (no −∞ − −∞).
__device__ __forceinline__ void warp_lse(const float (&v)[LQ], float (&L)[LQ]) {
    float m[LQ], e[LQ];
#pragma unroll
    for (int q = 0; q < LQ; ++q) m[q] = v[q];
#pragma unroll
    for (int off = 16; off >= 1; off >>= 1)
#pragma unroll
        for (int q = 0; q < LQ; ++q) m[q] = fmaxf(m[q], __shfl_xor_sync(FULL_MASK, m[q], off));
#pragma unroll
    for (int q = 0; q < LQ; ++q) {
        m[q] = fmaxf(m[q], NEG_BIG);
        e[q] = __expf(v[q] - m[q]);
    }
#pragma unroll
    for (int off = 16; off >= 1; off >>= 1)
#pragma unroll
        for (int q = 0; q < LQ; ++q) e[q] += __shfl_xor_sync(FULL_MASK, e[q], off);
#pragma unroll
    for (int q = 0; q < LQ; ++q) L[q] = m[q] + logf(e[q]);
}

// acc[k] += γ[q]·z_{f0+q}[k] for every k, frames in order; acc[KZ-1] += γ[q].
__device__ __forceinline__ void lane_accumulate(const float* zt, int f0, const float (&gam)[LQ],
                                                float (&acc)[KZ]) {
#pragma unroll
    for (int k = 0; k < 2 * D; k += 4) {
#pragma unroll
        for (int q = 0; q < LQ; ++q) {
            const float4 z = *reinterpret_cast<const float4*>(zt + (f0 + q) * ZR + k);
#pragma unroll
            for (int j = 0; j < 4; ++j)
                if (k + j < 2 * D) {
                    float& a = acc[k + j < KZ ? k + j : 0];
                    a = fmaf(gam[q], f4(z, j), a);
                }
        }
    }
#pragma unroll
    for (int q = 0; q < LQ; ++q) acc[KZ - 1] += gam[q];
}

// Items: (state, first entry, count, Gaussian block); grid: items; block:
// 32*SW threads. Dynamic shared memory: SW*32*(LSM + D) floats.
extern "C" __global__ void LANE_BOUNDS accum_stats(
    const float* __restrict__ feats, const unsigned* __restrict__ frame_of,
    const float* __restrict__ weight_of, const float* __restrict__ entry_ll,
    const Item* __restrict__ items, const float* __restrict__ W,
    const int* __restrict__ state_gblock, const int* __restrict__ state_ng,
    float* __restrict__ partial, double* __restrict__ item_wll) {
    extern __shared__ __align__(16) float smem[];
    __shared__ double warp_wll[SW];
    const Item it = items[blockIdx.x];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const bool real = it.gblock * GB + lane < state_ng[it.state];
    float w[KZ], acc[KZ];
    {
        const float* Wg = W + (u64)(state_gblock[it.state] + it.gblock) * KZ * GB + lane;
#pragma unroll
        for (int k = 0; k < KZ; ++k) {
            w[k] = Wg[k * GB];
            acc[k] = 0.0f;
        }
    }
    double wll = 0.0;
    float* zt = smem + warp * 32 * ZR;
    float* stage = smem + SW * 32 * LSM + warp * 32 * D;
    if (warp * 32 < it.count)
        lane_issue_tile(stage, feats, frame_of, it.first + warp * 32, imin(32, it.count - warp * 32), lane);
    cp_commit();
    for (int sub = warp * 32; sub < it.count; sub += 32 * SW) {
        const int n = imin(32, it.count - sub), e0 = it.first + sub;
        // Lane l's entry: its weight and (two passes) its log-likelihood.
        float wt_l = 0.0f, ll_l = 0.0f;
        if (lane < n) {
            wt_l = weight_of ? weight_of[e0 + lane] : 1.0f;
            if (entry_ll) ll_l = entry_ll[e0 + lane];
        }
        cp_wait<0>();
        __syncwarp();
        lane_build_tile(zt, stage, n, lane);
        __syncwarp();
        // The next tile's rows come in while this one is computed.
        const int nx = sub + 32 * SW;
        if (nx < it.count) lane_issue_tile(stage, feats, frame_of, it.first + nx, imin(32, it.count - nx), lane);
        cp_commit();
        for (int f0 = 0; f0 < n; f0 += LQ) {
            float s[LQ], L[LQ], gam[LQ], wt[LQ];
            lane_scores(zt, f0, w, s);
#pragma unroll
            for (int q = 0; q < LQ; ++q) {
                wt[q] = __shfl_sync(FULL_MASK, wt_l, f0 + q);
                L[q] = __shfl_sync(FULL_MASK, ll_l, f0 + q);
            }
            if (!entry_ll) {
                float v[LQ];
#pragma unroll
                for (int q = 0; q < LQ; ++q) v[q] = real ? s[q] : NEG_INF;
                warp_lse(v, L);
#pragma unroll
                for (int q = 0; q < LQ; ++q)
                    if (f0 + q < n) wll += (double)wt[q] * (double)L[q];
            }
#pragma unroll
            for (int q = 0; q < LQ; ++q) gam[q] = (real && f0 + q < n) ? wt[q] * __expf(s[q] - L[q]) : 0.0f;
            // Read z again rather than keep the scores' 2D·LQ values live
            // across the log-sum-exp (the barrier stops the compiler reusing
            // those loads; without it the kernel spills).
            __syncwarp();
            lane_accumulate(zt, f0, gam, acc);
        }
    }
    // The warps' accumulators, added in warp order; red[warp][g*KZ + k]
    // (KZ is odd: lanes' stores hit distinct banks).
    __syncthreads();
    float* red = smem + warp * 32 * KZ + lane * KZ;
#pragma unroll
    for (int k = 0; k < KZ; ++k) red[k] = acc[k];
    if (lane == 0) warp_wll[warp] = wll;
    __syncthreads();
    float* p = partial + (u64)blockIdx.x * GB * KZ;
    for (int el = threadIdx.x; el < 32 * KZ; el += 32 * SW) {
        float v = smem[el];
#pragma unroll
        for (int ww = 1; ww < SW; ++ww) v += smem[ww * 32 * KZ + el];
        p[el] = v;
    }
    if (!entry_ll && threadIdx.x == 0) {
        double sum = 0.0;
        for (int ww = 0; ww < SW; ++ww) sum += warp_wll[ww];
        item_wll[blockIdx.x] = sum;
    }
}
#else
// Pass 2 (Machlica's γ and ε kernels fused): for up to `count` entries of one
// state and one block of GB Gaussians, γ = weight·exp(γ̂ − L) in shared memory
// tile by tile, and the statistics Σγz: in registers when z fits in one chunk
// (NCH == 1), else added chunk by chunk into this item's slot in global
// memory. Either way the result lands in partial[item][GB][KZ], this item's
// own slot (no atomics).
// Items: (state, first entry, count, Gaussian block).
// One pass (entry_ll == nullptr, every state's Gaussians in one block): L is
// the log-sum-exp of this block's own scores, taken here as entry_loglike
// takes it, and the item's Σ weight·L goes to item_wll[item] (fixed order).
// Dynamic shared memory: KCH*ZS + TF*KCH + TF*GS (+ KZ*GB with WRES) floats.
extern "C" __global__ void __launch_bounds__(NT) accum_stats(
    const float* __restrict__ feats, const unsigned* __restrict__ frame_of,
    const float* __restrict__ weight_of, const float* __restrict__ entry_ll,
    const Item* __restrict__ items, const float* __restrict__ W,
    const int* __restrict__ state_gblock, const int* __restrict__ state_ng,
    float* __restrict__ partial, double* __restrict__ item_wll) {
    extern __shared__ __align__(16) float smem[];
    float* zs = smem;
    float* zt = zs + KCH * ZS;
    float* gs = zt + TF * KCH;
    __shared__ float ll1[TF];
    double wll = 0.0;
    const Item it = items[blockIdx.x];
    const int tid = threadIdx.x, tx = tid & 15, ty = tid >> 4;
    const int G = state_ng[it.state];
#if WRES
    // The item walks many entries with one Gaussian block: keep its W here.
    float* Wgb = gs + TF * GS;
    {
        const float* src = W + (u64)(state_gblock[it.state] + it.gblock) * KZ * GB;
        for (int i = tid * 4; i < KZ * GB; i += NT * 4)
            *reinterpret_cast<float4*>(Wgb + i) = *reinterpret_cast<const float4*>(src + i);
    }
#else
    const float* Wgb = W + (u64)(state_gblock[it.state] + it.gblock) * KZ * GB;
#endif
    float* p = partial + (u64)blockIdx.x * GB * KZ;
#if NCH == 1
    const int sy = tid / NSX, sx = tid % NSX;
    float sacc[SGW][RK];
#pragma unroll
    for (int j = 0; j < SGW; ++j)
#pragma unroll
        for (int r = 0; r < RK; ++r) sacc[j][r] = 0.0f;
#endif

    for (int sub = 0; sub < it.count; sub += TF) {
        const int n = imin(TF, it.count - sub), e0 = it.first + sub;
        const ZSrc src = {feats, frame_of, e0, n};
        __syncthreads();
        if (NCH == 1) {
            load_z(zs, zt, src, 0);
            __syncthreads();
        }
        float acc[4][TGG];
        dot_tile<GB, TGG>(Wgb, zs, src, tx, ty, acc);
        float l1[4];
        if (!entry_ll) block_lse(acc, G, tx, l1);
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const int f = ty * 4 + i;
            float l = 0.0f, w = 0.0f;
            if (f < n) {
                l = entry_ll ? entry_ll[e0 + f] : l1[i];
                w = weight_of ? weight_of[e0 + f] : 1.0f;
            }
            if (!entry_ll && tx == 0) ll1[f] = l;
#pragma unroll
            for (int j = 0; j < TGG; ++j) {
                const int g = it.gblock * GB + tx * TGG + j;
                gs[f * GS + tx * TGG + j] = (f < n && g < G) ? w * __expf(acc[i][j] - l) : 0.0f;
            }
        }
        __syncthreads();
        if (!entry_ll && tid < 32) wll += tile_wll(ll1, weight_of, e0, n, tid);
#if NCH == 1
        for (int f = 0; f < TF; ++f) {
            float gg[SGW];
#pragma unroll
            for (int q = 0; q < SGW; q += 4) {
                const float4 v = *reinterpret_cast<const float4*>(gs + f * GS + sy * SGW + q);
                gg[q] = v.x;
                gg[q + 1] = v.y;
                gg[q + 2] = v.z;
                gg[q + 3] = v.w;
            }
#pragma unroll
            for (int r = 0; r < RK; ++r) {
                const int k = sx + NSX * r;
                if (k < KZ) {
                    const float z = zt[f * KCH + k];
#pragma unroll
                    for (int j = 0; j < SGW; ++j) sacc[j][r] = fmaf(gg[j], z, sacc[j][r]);
                }
            }
        }
#else
        for (int k0 = 0; k0 < KZ; k0 += KCH) {
            __syncthreads();
            load_z(zs, zt, src, k0);
            __syncthreads();
            const int rows = imin(KCH, KZ - k0);
            for (int el = tid; el < GB * rows; el += NT) {
                const int g = el / rows, kk = el % rows;
                float v = 0.0f;
                for (int f = 0; f < TF; ++f) v = fmaf(gs[f * GS + g], zt[f * KCH + kk], v);
                float* q = p + (u64)g * KZ + k0 + kk;
                *q = (sub == 0) ? v : *q + v;
            }
        }
#endif
    }
#if NCH == 1
#pragma unroll
    for (int j = 0; j < SGW; ++j)
#pragma unroll
        for (int r = 0; r < RK; ++r) {
            const int k = sx + NSX * r;
            if (k < KZ) p[(sy * SGW + j) * KZ + k] = sacc[j][r];
        }
#endif
    if (!entry_ll && tid == 0) item_wll[blockIdx.x] = wll;
}

#endif // LSTATS

// Sum the statistics items of each (state, Gaussian block) in item order, in
// f64, into the model's accumulator acc[gaussian][KZ]. Grid: (groups, element
// tiles of blockDim.x); one thread column per accumulator element, so a group
// of many items (one GMM over a long chunk) is summed by many CTAs. With
// blockDim.y = S > 1 (at most 256 threads), the S threads of a column sum S
// contiguous runs of the items at once, added in run order: a GMM's thousand
// items were one thread's thousand dependent loads a element (the host takes
// S = 1, the plain order, for groups of few items).
extern "C" __global__ void reduce_partials(const float* __restrict__ partial,
                                           const Group* __restrict__ groups,
                                           double* __restrict__ acc) {
    __shared__ double runs[256];
    const Group gr = groups[blockIdx.x];
    const int tx = threadIdx.x, sy = threadIdx.y, ns = blockDim.y;
    const int el = blockIdx.y * blockDim.x + tx;
    const bool on = el < gr.gauss_count * KZ;
    const int g = el / KZ, k = el % KZ;
    const int per = (gr.item_count + ns - 1) / ns;
    const int i1 = imin(gr.item_count, (sy + 1) * per);
    double sum = 0.0;
    if (on)
        for (int i = sy * per; i < i1; ++i)
            sum += (double)partial[((u64)(gr.item_first + i) * GB + g) * KZ + k];
    if (ns > 1) {
        runs[sy * blockDim.x + tx] = sum;
        __syncthreads();
        if (sy > 0) return;
        for (int r = 1; r < ns; ++r) sum += runs[r * blockDim.x + tx];
    }
    if (on) acc[(u64)(gr.gauss_first + g) * KZ + k] += sum;
}

// total += Σ v[0..n) in a fixed order (one CTA of 256 threads: contiguous
// per-thread ranges, then a fixed tree).
extern "C" __global__ void sum_f64(const double* __restrict__ v, int n, double* __restrict__ total) {
    __shared__ double part[256];
    const int tid = threadIdx.x;
    const int per = (n + 255) / 256;
    double s = 0.0;
    for (int i = tid * per; i < imin(n, (tid + 1) * per); ++i) s += v[i];
    part[tid] = s;
    __syncthreads();
    for (int w = 128; w >= 1; w >>= 1) {
        if (tid < w) part[tid] += part[tid + w];
        __syncthreads();
    }
    if (tid == 0) *total += part[0];
}

// Each frame's own columns of a block of state scores (forced alignment: an
// utterance needs the few pdfs of its graph). ll holds the n frames from t0,
// S scores each; frame t's utterance needs the cols[2t+1] states listed from
// states[cols[2t]], and its row of out starts at row_out[t]. One warp a frame.
extern "C" __global__ void gather_columns(const float* __restrict__ ll, int S, int t0, int n,
                                          const u64* __restrict__ row_out, const int* __restrict__ cols,
                                          const unsigned* __restrict__ states, float* __restrict__ out) {
    const int w = (int)(((u64)blockIdx.x * blockDim.x + threadIdx.x) >> 5);
    const int lane = threadIdx.x & 31;
    if (w >= n) return;
    const int t = t0 + w;
    const int first = cols[2 * t], count = cols[2 * t + 1];
    const float* __restrict__ row = ll + (u64)w * S;
    float* __restrict__ dst = out + row_out[t];
    for (int c = lane; c < count; c += 32) dst[c] = row[states[first + c]];
}

// ---------------------------------------------------------------------------
// Tensor-core scoring (sm_80+, compiled when the host defines TCW > 0): the
// same dot products z·w on the tensor cores, as mma.sync m16n8k8 in TF32 with
// both operands split into a TF32 "hi" part and a TF32 "lo" remainder and
// three products per tile (lo·hi + hi·lo + hi·hi, small terms first), which
// keeps float32 accuracy (the "3xTF32" scheme) at several times the FP32 FMA
// rate.
//
//   TCW   warps per CTA; each warp owns 16 frames, so a CTA scores 16*TCW
//   KS    k-steps of 8: z is zero-padded from KZ to 8*KS
//
// Operands live in shared memory in mma fragment order, so every fragment is
// one conflict-free 16-byte load per lane:
//   z tile: zf[warp][kstep][part (hi, lo)][lane][4]   (a0..a3 of the A fragment)
//   W slot: wf[kstep][ntile (8 columns)][lane][4]      (b0 hi, b1 hi, b0 lo, b1 lo)
// The host writes W in that order already split (see engine/cuda/model.rs),
// one slot = 64 columns (states of a padded block, or Gaussians of one state).
// Virtual Gaussians carry gconst −1e30 rather than −∞ (0·−∞ would be NaN in
// the split products); exp(−1e30 − m) is 0 all the same.
//
// The statistics kernels below stay on FP32 FMAs: their two passes (the
// normaliser L in entry_loglike, the numerators in accum_stats) must use the
// same arithmetic, or a one-Gaussian state gets posteriors of exp(δ) ≠ 1.
// Global statistics of a large diagonal GMM have both passes on the tensor
// cores instead (estep_f16.cu), and so do those of a full-covariance GMM
// (estep_fullcov.cu: the posteriors computed once from stored scores).
#if TCW
#define TFC (16 * TCW)
#define NTC (32 * TCW)
#define SLOTF (KS * 1024)

__device__ __forceinline__ float tf32r(float x) {
    unsigned r;
    asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
    return __uint_as_float(r);
}

__device__ __forceinline__ void mma_tf32(float (&c)[4], const float4& a, float b0, float b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(__float_as_uint(a.x)), "r"(__float_as_uint(a.y)), "r"(__float_as_uint(a.z)),
          "r"(__float_as_uint(a.w)), "r"(__float_as_uint(b0)), "r"(__float_as_uint(b1)));
}

// Online log-sum-exp with one exponential per value: the smaller of (m, v)
// is folded in relative to the larger.
__device__ __forceinline__ void lse_push1(float& m, float& s, float v) {
    const float d = v - m;
    const float e = __expf(-fabsf(d));
    const bool up = d > 0.0f;
    s = up ? fmaf(s, e, 1.0f) : s + e;
    m = up ? v : m;
}

// The A fragments (hi and lo) of TFC entries of src, in fragment order.
// Entries past src.n get z = [0.., 1]; k in [KZ, 8*KS) gets 0.
__device__ __forceinline__ void load_zfrag(float* zf, const ZSrc& src) {
    for (int el = threadIdx.x; el < TCW * KS * 128; el += NTC) {
        const int i = el & 3, lane = (el >> 2) & 31, rest = el >> 7;
        const int s = rest % KS, w = rest / KS;
        const int f = 16 * w + (lane >> 2) + ((i & 1) ? 8 : 0);
        const int k = 8 * s + (lane & 3) + ((i & 2) ? 4 : 0);
        float z = 0.0f;
        if (k < KZ) {
            z = (k == KZ - 1) ? 1.0f : 0.0f;
            if (f < src.n) {
                const int e = src.e0 + f;
                const u64 t = src.frame_of ? (u64)src.frame_of[e] : (u64)e;
                z = zval_t<true>(src.feats + t * D, k);
            }
        }
        const float hi = tf32r(z);
        float* q = zf + (w * KS + s) * 256 + lane * 4 + i;
        q[0] = hi;
        q[128] = tf32r(z - hi);
    }
}

__device__ __forceinline__ void issue_slot(float* wb, const float* __restrict__ Wf, int g) {
    const float* src = Wf + (u64)g * SLOTF;
    float* dst = wb + (g & 1) * SLOTF;
    for (int i = threadIdx.x * 4; i < SLOTF; i += NTC * 4) cp16(dst + i, src + i);
    cp_commit();
}

// The tensor cores add into their accumulator with truncation relative to
// its size. So a chunk of k-steps is summed from zero, its hi·hi products
// (cb) apart from the small lo·hi + hi·lo ones (cs), and the chunk's sum is
// added to the running total c in FP32 (c is set by the first chunk).
__device__ __forceinline__ void chunk_zero(float (&cb)[8][4], float (&cs)[8][4]) {
#pragma unroll
    for (int j = 0; j < 8; ++j)
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            cb[j][i] = 0.0f;
            cs[j][i] = 0.0f;
        }
}

__device__ __forceinline__ void chunk_add(float (&c)[8][4], const float (&cb)[8][4],
                                          const float (&cs)[8][4], bool first) {
#pragma unroll
    for (int j = 0; j < 8; ++j)
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const float t = cb[j][i] + cs[j][i];
            c[j][i] = first ? t : c[j][i] + t;
        }
}

// For each of `slots` slots of Wf: c[j][*] = this warp's 16 frames × columns
// 8j.. of the slot (C fragment layout), then fin(slot, c). Every thread of
// the CTA calls this together.
template <class Fin>
__device__ __forceinline__ void tc_walk(const float* __restrict__ Wf, int slots, const float* zf,
                                        float* wb, Fin fin) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const float* za = zf + warp * KS * 256 + lane * 4;
    if (slots > 0) issue_slot(wb, Wf, 0);
    for (int g = 0; g < slots; ++g) {
        if (g + 1 < slots) {
            issue_slot(wb, Wf, g + 1);
            cp_wait<1>();
        } else {
            cp_wait<0>();
        }
        __syncthreads();
        const float* wl = wb + (g & 1) * SLOTF + lane * 4;
        // Chunks of TKC k-steps (chunk_zero / chunk_add).
        float c[8][4];
        for (int s0 = 0; s0 < KS; s0 += TKC) {
            float cb[8][4], cs[8][4];
            chunk_zero(cb, cs);
#pragma unroll
            for (int s = s0; s < imin(s0 + TKC, KS); ++s) {
                const float4 ah = *reinterpret_cast<const float4*>(za + s * 256);
                const float4 al = *reinterpret_cast<const float4*>(za + s * 256 + 128);
#pragma unroll
                for (int j = 0; j < 8; ++j) {
                    const float4 b = *reinterpret_cast<const float4*>(wl + (s * 8 + j) * 128);
                    mma_tf32(cs[j], al, b.x, b.y);
                    mma_tf32(cs[j], ah, b.z, b.w);
                    mma_tf32(cb[j], ah, b.x, b.y);
                }
            }
            chunk_add(c, cb, cs, s0 == 0);
        }
        fin(g, c);
        __syncthreads();
    }
}

// Shared by the two tensor-core scoring kernels: the running log-sum-exp
// state of a thread's C fragment (8 column tiles × 4), this CTA's share
// [g0, g1) of block b's slots (split blockIdx.z of gridDim.z), and the store
// of the result: log-likelihoods to `out`, or with several splits the
// partial (max, scaled sum) pairs to `part` for merge_splits. Element (j, i)
// is frame 16*warp + g (+8 for i >= 2) and lane 8j + 2t (+1 for odd i).
__device__ __forceinline__ void lse_init(float (&m)[8][4], float (&s)[8][4]) {
#pragma unroll
    for (int j = 0; j < 8; ++j)
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            m[j][i] = NEG_BIG;
            s[j][i] = 0.0f;
        }
}

__device__ __forceinline__ void split_slots(int nsl, int& g0, int& g1) {
    const int per = (nsl + gridDim.z - 1) / gridDim.z;
    g0 = imin(nsl, blockIdx.z * per);
    g1 = imin(nsl, g0 + per);
}

__device__ __forceinline__ void store_block_lse(const float (&m)[8][4], const float (&s)[8][4], int b, int t0,
                                                int T, const int* __restrict__ lane_state,
                                                float* __restrict__ out, int S, float2* __restrict__ part) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int j = 0; j < 8; ++j)
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const int st = lane_state[b * LANES + 8 * j + 2 * t + (i & 1)];
            const int fr = t0 + 16 * warp + g + ((i & 2) ? 8 : 0);
            if (st < 0 || fr >= T) continue;
            if (gridDim.z == 1)
                out[(u64)fr * S + st] = m[j][i] + logf(s[j][i]);
            else
                part[((u64)blockIdx.z * T + fr) * S + st] = make_float2(m[j][i], s[j][i]);
        }
}

// block_score on the tensor cores: a CTA scores TFC frames against one block
// of 64 states; element (j, i) of a thread's C fragment is frame
// 16*warp + g (+8 for i >= 2) and lane 8j + 2t (+1 for odd i).
// Grid: (frame tiles of TFC, blocks, splits). With one split the CTA walks
// all of its block's slots and writes log-likelihoods to `out`; with several
// (few frames, e.g. 256-frame decoding windows, would leave most SMs idle)
// split z walks its share of the slots and writes its partial (max, scaled
// sum) to part[z][frame][state], which merge_splits combines in split order.
// Dynamic shared memory: TCW*KS*256 + 2*SLOTF floats.
extern "C" __global__ void __launch_bounds__(NTC) block_score_tc(
    const float* __restrict__ feats, int T, const float* __restrict__ Wf,
    const int* __restrict__ block_off, const int* __restrict__ block_slots,
    const int* __restrict__ lane_state, float* __restrict__ out, int S,
    float2* __restrict__ part) {
    extern __shared__ __align__(16) float smem[];
    float* zf = smem;
    float* wb = smem + TCW * KS * 256;
    const int t0 = blockIdx.x * TFC, b = blockIdx.y;
    const ZSrc src = {feats, nullptr, t0, imin(TFC, T - t0)};
    load_zfrag(zf, src);
    __syncthreads();
    float m[8][4], s[8][4];
    lse_init(m, s);
    int g0, g1;
    split_slots(block_slots[b], g0, g1);
    tc_walk(Wf + ((u64)block_off[b] + g0) * SLOTF, g1 - g0, zf, wb, [&](int, float (&c)[8][4]) {
#pragma unroll
        for (int j = 0; j < 8; ++j)
#pragma unroll
            for (int i = 0; i < 4; ++i) lse_push1(m[j][i], s[j][i], c[j][i]);
    });
    store_block_lse(m, s, b, t0, T, lane_state, out, S, part);
}

#if KC
// ---------------------------------------------------------------------------
// K-chunked tensor-core scoring for long z (full covariances: KZ = D + D(D+1)/2
// + 1, e.g. 703 at D = 36), where neither a tile's z fragments nor a whole W
// slot fit in shared memory. Both operands stream through a double-buffered
// cp.async pipeline in chunks of KC k-steps, in fragment order: W already
// split into TF32 hi/lo by the host (the same order as block_score_tc's), z
// plain f32, split in registers once per k-step and used for 8 column tiles.
// A warp owns 16 frames × one slot (64 states) at a time.
//
// Accuracy: the tensor cores add into their accumulator with truncation,
// relative to the accumulator's size, and the log-likelihood of a full
// covariance is a small result of a long sum of cancelling terms. So each
// chunk starts from zero, the hi·hi products and the small lo·hi + hi·lo
// ones go to separate accumulators (the small terms never pass through the
// large one), and the chunk sums are added to the running total in FP32.
//   zq: [group of 16 frames][KS][lane][4]          a0..a3 (zfrag_plain)
//   Wf: [slot][KS][tile (8)][lane][4]              b0 hi, b1 hi, b0 lo, b1 lo
// (engine/cuda/operands.rs writes Wf.)
#define NCK ((KS + KC - 1) / KC) // chunks of a slot
#define ZCH (TCW * KC * 128)     // floats of z a stage
#define WCH (KC * 1024)          // floats of W a stage (one slot)
#define STG (ZCH + WCH)

// zq for groups [0, gridDim.x) of 16 frames: frames past T get z = [0.., 1],
// k in [KZ, 8*KS) gets 0. Grid: (groups, KS); 128 threads (lane*4 + i).
extern "C" __global__ void zfrag_plain(const float* __restrict__ feats, int T, float* __restrict__ zq) {
    const int lane = threadIdx.x >> 2, i = threadIdx.x & 3, s = blockIdx.y;
    const int f = 16 * blockIdx.x + (lane >> 2) + ((i & 1) ? 8 : 0);
    const int k = 8 * s + (lane & 3) + ((i & 2) ? 4 : 0);
    float z = 0.0f;
    if (k < KZ) {
        z = (k == KZ - 1) ? 1.0f : 0.0f;
        if (f < T) z = zval_t<true>(feats + (u64)f * D, k);
    }
    zq[((u64)blockIdx.x * KS + s) * 128 + threadIdx.x] = z;
}

// Stage st of a walk over slots of Wb: chunk st % NCK of slot st / NCK (and
// the same chunk of this CTA's z) into buffer st & 1.
__device__ __forceinline__ void issue_kstage(float* smem, const float* __restrict__ zq, int grp0,
                                             const float* __restrict__ Wb, int st) {
    const int g = st / NCK, s0 = (st % NCK) * KC, rows = imin(KC, KS - s0);
    float* dst = smem + (st & 1) * STG;
    const int zn = rows * 128;
    for (int i = threadIdx.x * 4; i < TCW * zn; i += NTC * 4) {
        const int w = i / zn, r = i % zn;
        cp16(dst + w * KC * 128 + r, zq + ((u64)(grp0 + w) * KS + s0) * 128 + r);
    }
    const float* src = Wb + ((u64)g * KS + s0) * 1024;
    for (int i = threadIdx.x * 4; i < rows * 1024; i += NTC * 4) cp16(dst + ZCH + i, src + i);
    cp_commit();
}

__device__ __forceinline__ void split4(const float4& v, float4& hi, float4& lo) {
    hi = make_float4(tf32r(v.x), tf32r(v.y), tf32r(v.z), tf32r(v.w));
    lo = make_float4(tf32r(v.x - hi.x), tf32r(v.y - hi.y), tf32r(v.z - hi.z), tf32r(v.w - hi.w));
}

// block_score_tc for long z: the same grid, splits and outputs; z comes from
// zq (zfrag_plain) instead of the features.
// Dynamic shared memory: 2*STG floats.
extern "C" __global__ void __launch_bounds__(NTC) block_score_tck(
    const float* __restrict__ zq, int T, const float* __restrict__ Wf,
    const int* __restrict__ block_off, const int* __restrict__ block_slots,
    const int* __restrict__ lane_state, float* __restrict__ out, int S,
    float2* __restrict__ part) {
    extern __shared__ __align__(16) float smem[];
    const int t0 = blockIdx.x * TFC, b = blockIdx.y;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    float m[8][4], s[8][4], ct[8][4];
    lse_init(m, s);
    int g0, g1;
    split_slots(block_slots[b], g0, g1);
    const int stages = (g1 - g0) * NCK;
    const float* Wb = Wf + ((u64)block_off[b] + g0) * KS * 1024;
    const int grp0 = blockIdx.x * TCW;
    if (stages > 0) issue_kstage(smem, zq, grp0, Wb, 0);
    for (int st = 0; st < stages; ++st) {
        if (st + 1 < stages) {
            issue_kstage(smem, zq, grp0, Wb, st + 1);
            cp_wait<1>();
        } else {
            cp_wait<0>();
        }
        __syncthreads();
        const int ch = st % NCK, rows = imin(KC, KS - ch * KC);
        float cb[8][4], cs[8][4];
        chunk_zero(cb, cs);
        const float* buf = smem + (st & 1) * STG;
        const float* za = buf + warp * KC * 128 + lane * 4;
        const float* wa = buf + ZCH + lane * 4;
#pragma unroll 2
        for (int k = 0; k < rows; ++k) {
            float4 ah, al;
            split4(*reinterpret_cast<const float4*>(za + k * 128), ah, al);
#pragma unroll
            for (int j = 0; j < 8; ++j) {
                const float4 bv = *reinterpret_cast<const float4*>(wa + (k * 8 + j) * 128);
                mma_tf32(cs[j], al, bv.x, bv.y);
                mma_tf32(cs[j], ah, bv.z, bv.w);
                mma_tf32(cb[j], ah, bv.x, bv.y);
            }
        }
        chunk_add(ct, cb, cs, ch == 0);
        if (ch == NCK - 1) {
#pragma unroll
            for (int j = 0; j < 8; ++j)
#pragma unroll
                for (int i = 0; i < 4; ++i) lse_push1(m[j][i], s[j][i], ct[j][i]);
        }
        __syncthreads();
    }
    store_block_lse(m, s, b, t0, T, lane_state, out, S, part);
}
#endif

// out[i] = log-sum-exp of the split partials of element i (i < n = T*S), in
// split order.
extern "C" __global__ void merge_splits(const float2* __restrict__ part, int splits, u64 n,
                                        float* __restrict__ out) {
    const u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float m = NEG_BIG, s = 0.0f;
    for (int z = 0; z < splits; ++z) {
        const float2 p = part[(u64)z * n + i];
        lse_merge(m, s, p.x, p.y);
    }
    out[i] = m + logf(s);
}

#endif
