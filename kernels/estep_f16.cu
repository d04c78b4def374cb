// EM statistics of one diagonal GMM over all frames (`gmm-global-acc-stats`'
// work, the `estep` benchmark) on the tensor cores in FP16 with FP32
// accumulation. Appended to gmm.cu when the host defines E16 (diagonal
// model, TCW > 0, 2D <= 96); uses its helpers. Macros from the host:
//
//   KP    2D rounded up to 16 (z = [x, x²] zero-padded; the constant 1 and
//         gconst stay out of the products: gconst is added in FP32)
//
// Precision. Every operand v is split into two FP16 numbers, hi = f16(v) and
// lo = f16(v − hi), and each product is lo·hi + hi·lo + hi·hi: 22 bits of
// each operand, as the 3xTF32 scheme of the scoring kernels, at twice the
// tensor-core rate. FP16 has a narrow exponent range, so row k of z and of
// W is scaled by exact powers of two 2^e_k and 2^−e_k (chosen on the host
// from max|x_d| of the chunk and max|w_k| of the model, balancing the two
// largest magnitudes, both then below 2^14.5); the products are unchanged.
// Posteriors are scaled by 2^12 (GSC) in the statistics; the reduction
// removes 2^−(12+e_k) exactly.
//
// Structure (Machlica et al. 2011, with the posteriors never leaving the
// registers):
//   zfrag16  z' fragments of every frame, once per chunk, in two orders: zb
//            (B operand of the scores, k × frames) and zs (B operand of the
//            statistics, frames × k), hi and lo;
//   wfrag16  W' fragments (A operand, Gaussians × k) of the scaled model;
//   gll16    pass 1: L_t = log Σ_m exp(c_tm) per frame (online log-sum-exp
//            over the Gaussians), and per CTA Σ L_t in f64;
//   gst16    pass 2: a warp owns 16 Gaussians over a range of frames, with
//            its W' fragments in registers. Per 16 frames it recomputes the
//            scores c (the same fragments and the same mma sequence as pass
//            1, so the same bits: a one-Gaussian GMM gets γ = 1 exactly),
//            γ = exp(c − L), and uses the C fragments of γ directly as the A
//            operand of Σγz (the rows of the scores are Gaussians, its
//            columns frames: the k of the second product). Statistics go to
//            FP32 registers, summed from zero every 64 frames (the tensor
//            cores truncate when they add into their accumulator) and
//            added to the running sums with rounding;
//   reduce16 the ranges' partial sums, in range order, in f64, unscaled.
// FP16 helpers, shared with the full-covariance E-step (estep_fullcov.cu).
#if E16 || FC16
__device__ __forceinline__ unsigned h2pack(float lo_half, float hi_half) {
    unsigned r;
    asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi_half), "f"(lo_half));
    return r;
}

// (a, b) as FP16 pairs hi = f16(a, b) and lo = f16(a − hi_a, b − hi_b); a in
// the low half.
__device__ __forceinline__ void h2split(float a, float b, unsigned& hi, unsigned& lo) {
    hi = h2pack(a, b);
    float ha, hb;
    asm("{.reg .b16 l, h;\n mov.b32 {l, h}, %2;\n cvt.f32.f16 %0, l;\n cvt.f32.f16 %1, h;\n}\n"
        : "=f"(ha), "=f"(hb)
        : "r"(hi));
    lo = h2pack(a - ha, b - hb);
}

__device__ __forceinline__ void mma16(float (&c)[4], unsigned a0, unsigned a1, unsigned a2, unsigned a3,
                                      unsigned b0, unsigned b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
#endif

#if E16
#define KS16 (KP / 16) // k-steps of 16
// Per-row multipliers, passed by value (no upload between chunks): the
// host's `Scales` (engine/cuda/estep16.rs), 104 floats for any KP <= 96.
struct Scales {
    float v[104];
};
#define NJ (KP / 8)    // column tiles of the statistics
#define GSC 4096.0f    // posterior scale in the statistics products
#define W1 4           // warps of gll16 (32 frames each)
#define MS 4           // Gaussian tiles (16) per stage of gll16
#define MTU (KS16 * 64) // uint4 of W' per Gaussian tile: [s][hi, lo][lane]
#define SF 64          // frames per stage of gst16
#define GSTW 6         // warps of gst16 (2 CTAs an SM: at most 170 registers)
#define ZBU (8 * KS16 * 32) // uint4 of zb per stage (8 column tiles of frames)
#define ZSU (4 * NJ * 32)   // uint4 of zs per stage (4 steps of 16 frames)

// A score's two accumulators: the hi·hi products (b) and the small lo·hi and
// hi·lo ones (s), two chains of mma, so the small terms never pass through
// the large sum. (The small ones had a chain each: one more addition a score
// and four more registers a tile, which left gll16 two CTAs an SM instead of
// three; summing them together moved no statistic's error against f64 and
// took the M=2048 E-step from 29.4 to 28.4 ms on the H100.)
struct Acc3 {
    float b[4], s[4];
};

__device__ __forceinline__ void acc3_zero(Acc3& c) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        c.b[i] = 0.0f;
        c.s[i] = 0.0f;
    }
}

// The three products of a split pair. b = {hi b0b1, hi b2b3, lo b0b1, lo b2b3}.
__device__ __forceinline__ void mma3(Acc3& c, const uint4& ah, const uint4& al, const uint4& b) {
    mma16(c.s, al.x, al.y, al.z, al.w, b.x, b.y);
    mma16(c.s, ah.x, ah.y, ah.z, ah.w, b.z, b.w);
    mma16(c.b, ah.x, ah.y, ah.z, ah.w, b.x, b.y);
}

// Score i of an accumulator: the one expression both passes use.
__device__ __forceinline__ float cfin(const Acc3& c, int i, float gc) { return (c.b[i] + c.s[i]) + gc; }

// z_k of frame t, unscaled (0 past T and for k >= 2D).
__device__ __forceinline__ float zval16(const float* __restrict__ feats, int T, int t, int k) {
    if (t >= T || k >= 2 * D) return 0.0f;
    const float x = feats[(u64)t * D + (k < D ? k : k - D)];
    return k < D ? x : x * x;
}

// Grid: groups of 16 frames (covering the padded chunk); blockDim 32 *
// (2*KS16 + NJ). zb[ntile of 8 frames][s][lane], zs[group][j][lane].
extern "C" __global__ void zfrag16(const float* __restrict__ feats, int T, const Scales zmul,
                                   uint4* __restrict__ zb, uint4* __restrict__ zs) {
    const int lane = threadIdx.x & 31, item = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
    const int f = blockIdx.x;
    float v[4];
    if (item < 2 * KS16) {
        const int j = item / KS16, s = item % KS16, fr = 16 * f + 8 * j + g, k = 16 * s + 2 * t;
        v[0] = zval16(feats, T, fr, k) * zmul.v[k];
        v[1] = zval16(feats, T, fr, k + 1) * zmul.v[k + 1];
        v[2] = zval16(feats, T, fr, k + 8) * zmul.v[k + 8];
        v[3] = zval16(feats, T, fr, k + 9) * zmul.v[k + 9];
    } else {
        const int j = item - 2 * KS16, k = 8 * j + g, fr = 16 * f + 2 * t;
        const float mk = zmul.v[k];
        v[0] = zval16(feats, T, fr, k) * mk;
        v[1] = zval16(feats, T, fr + 1, k) * mk;
        v[2] = zval16(feats, T, fr + 8, k) * mk;
        v[3] = zval16(feats, T, fr + 9, k) * mk;
    }
    uint4 o;
    h2split(v[0], v[1], o.x, o.z);
    h2split(v[2], v[3], o.y, o.w);
    if (item < 2 * KS16) {
        const int j = item / KS16, s = item % KS16;
        zb[((u64)(2 * f + j) * KS16 + s) * 32 + lane] = o;
    } else {
        zs[((u64)f * NJ + (item - 2 * KS16)) * 32 + lane] = o;
    }
}

// W' fragments: w32[Mpad][KP] (row-major, f32) scaled by wmul[k] into
// wa[tile][s][hi, lo][lane]. One thread per (tile, s, lane).
extern "C" __global__ void wfrag16(const float* __restrict__ w32, int tiles, const Scales wm,
                                   uint4* __restrict__ wa) {
    const float* wmul = wm.v;
    const int id = blockIdx.x * blockDim.x + threadIdx.x;
    if (id >= tiles * KS16 * 32) return;
    const int lane = id & 31, s = (id >> 5) % KS16, mt = (id >> 5) / KS16, g = lane >> 2, t = lane & 3;
    const int k = 16 * s + 2 * t;
    const float* r0 = w32 + (u64)(16 * mt + g) * KP;
    const float* r1 = r0 + 8 * KP;
    uint4 hi, lo;
    h2split(r0[k] * wmul[k], r0[k + 1] * wmul[k + 1], hi.x, lo.x);
    h2split(r1[k] * wmul[k], r1[k + 1] * wmul[k + 1], hi.y, lo.y);
    h2split(r0[k + 8] * wmul[k + 8], r0[k + 9] * wmul[k + 9], hi.z, lo.z);
    h2split(r1[k + 8] * wmul[k + 8], r1[k + 9] * wmul[k + 9], hi.w, lo.w);
    uint4* o = wa + ((u64)(mt * KS16 + s) * 2) * 32 + lane;
    o[0] = hi;
    o[32] = lo;
}

// Stage st of gll16's walk: Gaussian tiles [st*MS, ..) (W' and gconst).
__device__ __forceinline__ void issue_wstage(uint4* buf, const uint4* __restrict__ wa,
                                             const float* __restrict__ gconst, int tiles, int st) {
    const int mt0 = st * MS, n = imin(MS, tiles - mt0);
    uint4* dst = buf + (st & 1) * (MS * MTU + MS * 4);
    const uint4* src = wa + (u64)mt0 * MTU;
    for (int i = threadIdx.x; i < n * MTU; i += blockDim.x)
        cp16(reinterpret_cast<float*>(dst + i), reinterpret_cast<const float*>(src + i));
    for (int i = threadIdx.x; i < n * 4; i += blockDim.x)
        cp16(reinterpret_cast<float*>(dst + MS * MTU + i), gconst + (u64)mt0 * 16 + 4 * i);
    cp_commit();
}

// Pass 1. Grid: ceil(T / (32*W1)); W1 warps of 32 frames; each walks all
// Gaussian tiles (W' streamed through shared memory, the frames' B
// fragments in registers). ll[t] = L_t (+inf for the padding frames up to
// the CTAs' end: ll holds gridDim.x*32*W1 floats); wll[cta] = Σ L_t (f64,
// frame order).
// Dynamic shared memory: 2 * (MS*MTU + MS*4) uint4.
// (The explicit 1 CTA an SM is the bound that was measured: ptxas then takes
// 161 registers, three CTAs an SM; without it the code comes out otherwise.)
extern "C" __global__ void __launch_bounds__(32 * W1, 1) gll16(const uint4* __restrict__ zb, int T,
                                                            const uint4* __restrict__ wa,
                                                            const float* __restrict__ gconst, int tiles,
                                                            float* __restrict__ ll, double* __restrict__ wll) {
    extern __shared__ __align__(16) uint4 sm4[];
    __shared__ float lls[32 * W1];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int f0 = blockIdx.x * 32 * W1 + warp * 32;
    const int ntiles = (T + 15) / 16 * 2; // column tiles of 8 frames in zb
    uint4 bf[4][KS16];
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
        for (int s = 0; s < KS16; ++s) {
            const int nt = f0 / 8 + j;
            bf[j][s] = nt < ntiles ? zb[((u64)nt * KS16 + s) * 32 + lane] : make_uint4(0, 0, 0, 0);
        }
    float m[4][2], sm[4][2];
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
        for (int c = 0; c < 2; ++c) {
            m[j][c] = NEG_BIG;
            sm[j][c] = 0.0f;
        }
    const int stages = (tiles + MS - 1) / MS;
    issue_wstage(sm4, wa, gconst, tiles, 0);
    for (int st = 0; st < stages; ++st) {
        if (st + 1 < stages) {
            issue_wstage(sm4, wa, gconst, tiles, st + 1);
            cp_wait<1>();
        } else {
            cp_wait<0>();
        }
        __syncthreads();
        const uint4* buf = sm4 + (st & 1) * (MS * MTU + MS * 4);
        const float* gcs = reinterpret_cast<const float*>(buf + MS * MTU);
        const int n = imin(MS, tiles - st * MS);
        for (int q = 0; q < n; ++q) {
            Acc3 ca[4];
#pragma unroll
            for (int j = 0; j < 4; ++j) acc3_zero(ca[j]);
            const uint4* w = buf + q * MTU + lane;
#pragma unroll
            for (int s = 0; s < KS16; ++s) {
                const uint4 ah = w[(2 * s) * 32], al = w[(2 * s + 1) * 32];
#pragma unroll
                for (int j = 0; j < 4; ++j) mma3(ca[j], ah, al, bf[j][s]);
            }
            const float gc0 = gcs[16 * q + g], gc1 = gcs[16 * q + g + 8];
#pragma unroll
            for (int j = 0; j < 4; ++j)
#pragma unroll
                for (int c = 0; c < 2; ++c) {
                    lse_push1(m[j][c], sm[j][c], cfin(ca[j], c, gc0));
                    lse_push1(m[j][c], sm[j][c], cfin(ca[j], c + 2, gc1));
                }
        }
        __syncthreads();
    }
    // Merge the 8 lanes of a column (lane bits 2..4); symmetric, so every
    // lane ends with the same bits.
#pragma unroll
    for (int off = 4; off <= 16; off <<= 1)
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
            for (int c = 0; c < 2; ++c) {
                const float mo = __shfl_xor_sync(0xffffffffu, m[j][c], off);
                const float so = __shfl_xor_sync(0xffffffffu, sm[j][c], off);
                lse_merge(m[j][c], sm[j][c], mo, so);
            }
    if (g == 0) {
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
            for (int c = 0; c < 2; ++c) {
                const int fl = warp * 32 + 8 * j + 2 * t + c, fr = blockIdx.x * 32 * W1 + fl;
                const float l = m[j][c] + logf(sm[j][c]);
                lls[fl] = l;
                ll[fr] = fr < T ? l : __int_as_float(0x7f800000);
            }
    }
    __syncthreads();
    // Σ L_t of the CTA's frames in f64 by warp 0: W1 consecutive frames a
    // lane, then a butterfly (fixed order; every lane gets the same bits).
    if (warp == 0) {
        const int n = imin(32 * W1, T - blockIdx.x * 32 * W1);
        double sum = 0.0;
#pragma unroll
        for (int q = 0; q < W1; ++q)
            if (lane * W1 + q < n) sum += (double)lls[lane * W1 + q];
#pragma unroll
        for (int off = 16; off >= 1; off >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);
        if (lane == 0) wll[blockIdx.x] = sum;
    }
}

// The scores of step `step` (16 frames) of a gst16 stage: two column tiles
// of 8 frames against the warp's 16 Gaussians (W' in registers).
__device__ __forceinline__ void score_step(Acc3 (&c)[2], const uint4 (&ah)[KS16], const uint4 (&al)[KS16],
                                           const uint4* buf, int step, int lane) {
    acc3_zero(c[0]);
    acc3_zero(c[1]);
#pragma unroll
    for (int s = 0; s < KS16; ++s)
#pragma unroll
        for (int j = 0; j < 2; ++j) mma3(c[j], ah[s], al[s], buf[((2 * step + j) * KS16 + s) * 32 + lane]);
}

// Stage st of gst16: frames [f0 + st*SF, +SF) of zb, zs and ll.
__device__ __forceinline__ void issue_fstage(uint4* smem, const uint4* __restrict__ zb,
                                             const uint4* __restrict__ zs, const float* __restrict__ ll,
                                             int f0, int st) {
    const int fs = f0 + st * SF;
    uint4* dst = smem + (st & 1) * (ZBU + ZSU + SF / 4);
    const uint4* b = zb + (u64)(fs / 8) * KS16 * 32;
    const uint4* s = zs + (u64)(fs / 16) * NJ * 32;
    for (int i = threadIdx.x; i < ZBU; i += blockDim.x)
        cp16(reinterpret_cast<float*>(dst + i), reinterpret_cast<const float*>(b + i));
    for (int i = threadIdx.x; i < ZSU; i += blockDim.x)
        cp16(reinterpret_cast<float*>(dst + ZBU + i), reinterpret_cast<const float*>(s + i));
    for (int i = threadIdx.x; i < SF / 4; i += blockDim.x)
        cp16(reinterpret_cast<float*>(dst + ZBU + ZSU + i), ll + fs + 4 * i);
    cp_commit();
}

// A warp's partial sums of Gaussian tile mt into its range's rows of
// `partial` (see gst16): S[j][i] in the C layout of n8 block j (rows g and
// g + 8, columns 2t and 2t + 1), occ the rows' Σ γ (lane t = 0 writes it).
__device__ __forceinline__ void put_partial(float* __restrict__ partial, int mpad, int mt, int g, int t,
                                            const float (&S)[NJ][4], const float (&occ)[2]) {
    float* p0 = partial + ((u64)blockIdx.y * mpad + 16 * mt + g) * KZ;
    float* p1 = p0 + 8 * KZ;
#pragma unroll
    for (int j = 0; j < NJ; ++j)
#pragma unroll
        for (int c = 0; c < 2; ++c) {
            const int k = 8 * j + 2 * t + c;
            if (k < 2 * D) {
                p0[k] = S[j][c];
                p1[k] = S[j][c + 2];
            }
        }
    if (t == 0) {
        p0[KZ - 1] = occ[0];
        p1[KZ - 1] = occ[1];
    }
}

// Pass 2. Grid: (ceil(tiles / warps), ranges of rf frames, rf a multiple of
// SF); blockDim 32 * warps; warp w owns Gaussian tile blockIdx.x*warps + w.
// partial[range][Mpad][KZ]: Σ GSC·γ·z' (k < 2D) and Σ γ (k = KZ − 1).
// zb, zs and ll cover the chunk padded to a multiple of SF frames.
// Dynamic shared memory: 2 * (ZBU + ZSU + SF/4) uint4.
extern "C" __global__ void __launch_bounds__(32 * GSTW, 2) gst16(const uint4* __restrict__ zb,
                                                        const uint4* __restrict__ zs,
                                                        const float* __restrict__ ll, int T, int rf,
                                                        const uint4* __restrict__ wa,
                                                        const float* __restrict__ gconst, int tiles,
                                                        float* __restrict__ partial, int mpad) {
    extern __shared__ __align__(16) uint4 sm4[];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int mt = blockIdx.x * (blockDim.x >> 5) + warp;
    const bool active = mt < tiles;
    const int f0 = blockIdx.y * rf, f1 = imin(T, f0 + rf);
    uint4 ah[KS16], al[KS16];
#pragma unroll
    for (int s = 0; s < KS16; ++s) {
        const uint4* w = wa + ((u64)(active ? mt : 0) * KS16 + s) * 64 + lane;
        ah[s] = w[0];
        al[s] = w[32];
    }
    const float gc0 = gconst[16 * (active ? mt : 0) + g], gc1 = gconst[16 * (active ? mt : 0) + g + 8];
    float S[NJ][4], occ[2] = {0.0f, 0.0f};
#pragma unroll
    for (int j = 0; j < NJ; ++j)
#pragma unroll
        for (int i = 0; i < 4; ++i) S[j][i] = 0.0f;
    const int stages = (f1 - f0 + SF - 1) / SF;
    if (stages > 0) issue_fstage(sm4, zb, zs, ll, f0, 0);
    for (int st = 0; st < stages; ++st) {
        if (st + 1 < stages) {
            issue_fstage(sm4, zb, zs, ll, f0, st + 1);
            cp_wait<1>();
        } else {
            cp_wait<0>();
        }
        __syncthreads();
        const uint4* buf = sm4 + (st & 1) * (ZBU + ZSU + SF / 4);
        const float* lls = reinterpret_cast<const float*>(buf + ZBU + ZSU);
        const int fs = f0 + st * SF;
        float acc[NJ][4], oc[2] = {0.0f, 0.0f};
#pragma unroll
        for (int j = 0; j < NJ; ++j)
#pragma unroll
            for (int i = 0; i < 4; ++i) acc[j][i] = 0.0f;
        // Each step's scores, then its posteriors and statistics. (A
        // software pipeline, the scores of step + 1 issued before the
        // statistics of step, took 28.45 ms for the M = 2048 E-step on the
        // H100 against 27.70 without, in one call: the same bits; it
        // spilled less but ran slower.)
#pragma unroll
        for (int step = 0; step < SF / 16; ++step) {
            Acc3 cc[2]; // [column tile of 8 frames]
            score_step(cc, ah, al, buf, step, lane);
            // γ in the C layout: (j, i) = Gaussian g (+8 for i >= 2), frame
            // 8j + 2t + (i & 1) of this step.
            // Frames past T have L = +inf (gll16), so γ = 0 there.
            float gm[2][4];
#pragma unroll
            for (int j = 0; j < 2; ++j) {
                const float2 l2 = *reinterpret_cast<const float2*>(lls + 16 * step + 8 * j + 2 * t);
#pragma unroll
                for (int i = 0; i < 4; ++i) {
                    const float c = cfin(cc[j], i, (i < 2) ? gc0 : gc1);
                    gm[j][i] = __expf(c - ((i & 1) ? l2.y : l2.x));
                    oc[i >> 1] += gm[j][i];
                }
            }
            unsigned gh[4], gl[4];
            h2split(GSC * gm[0][0], GSC * gm[0][1], gh[0], gl[0]);
            h2split(GSC * gm[0][2], GSC * gm[0][3], gh[1], gl[1]);
            h2split(GSC * gm[1][0], GSC * gm[1][1], gh[2], gl[2]);
            h2split(GSC * gm[1][2], GSC * gm[1][3], gh[3], gl[3]);
            const uint4* zsb = buf + ZBU + step * NJ * 32 + lane;
#pragma unroll
            for (int j = 0; j < NJ; ++j) {
                const uint4 b = zsb[j * 32];
                mma16(acc[j], gl[0], gl[1], gl[2], gl[3], b.x, b.y);
                mma16(acc[j], gh[0], gh[1], gh[2], gh[3], b.z, b.w);
                mma16(acc[j], gh[0], gh[1], gh[2], gh[3], b.x, b.y);
            }
        }
#pragma unroll
        for (int j = 0; j < NJ; ++j)
#pragma unroll
            for (int i = 0; i < 4; ++i) S[j][i] += acc[j][i];
        occ[0] += oc[0];
        occ[1] += oc[1];
        __syncthreads();
    }
#pragma unroll
    for (int off = 1; off <= 2; off <<= 1) {
        occ[0] += __shfl_xor_sync(0xffffffffu, occ[0], off);
        occ[1] += __shfl_xor_sync(0xffffffffu, occ[1], off);
    }
    if (!active) return;
    put_partial(partial, mpad, mt, g, t, S, occ);
}

// acc[g*KZ + k] += kmul.v[k] · Σ_r partial[r][g][k] (f64, range order) for
// g < M (the GMM is state 0: its rows come first). One thread per (g, k).
extern "C" __global__ void reduce16(const float* __restrict__ partial, int ranges, int m, int mpad,
                                    const Scales kmul, double* __restrict__ acc) {
    const int el = blockIdx.x * blockDim.x + threadIdx.x;
    if (el >= m * KZ) return;
    double sum = 0.0;
    for (int r = 0; r < ranges; ++r) sum += (double)partial[(u64)r * mpad * KZ + el];
    acc[el] += sum * (double)kmul.v[el % KZ];
}
#endif
