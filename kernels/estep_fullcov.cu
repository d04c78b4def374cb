// EM statistics of one full-covariance GMM over all frames
// (`fgmm-global-acc-stats`' work, the `estep_fullcov` benchmark) as two
// GEMMs on the tensor cores, in FP16 with FP32 accumulation. Appended to
// gmm.cu and estep_f16.cu when the host defines FC16 (full covariances,
// tensor cores, D <= FCMAXD); uses their helpers (cp16, h2split, mma16,
// lse_push, PAIRS, ZORD). Host half: engine/cuda/estep_full.rs.
//
// With z = [x, x_i x_j (i >= j), 1] (natural order, the accumulators'
// layout) the scores are L = Z·W + gconst (frames × Gaussians) and the
// statistics S = Γᵀ·Z (Gaussians × z). Per chunk:
//   fc_wfrag  W' fragments of the scaled model (when the scales change);
//   fc_score  L[t][g] of every frame and Gaussian: z built in shared memory
//             from the frames' x, in the block-scoring order (ZORD: each
//             dimension's cancelling terms together), the constant left out
//             (gconst is added in FP32);
//   fc_post   per frame max, Σ exp and log-likelihood; γ' = 2^12·exp(L − ll)
//             as FP16 fragments; per 16 frames Σ ll in f64 (frame order).
//             The posteriors come from one L, so nothing can disagree;
//   fc_stats  S' = Γ'ᵀ·Z' over a range of frames per CTA (split K), z
//             built in shared memory from x again, partial sums to
//             partial[range][g][c];
//   fc_reduce the ranges in order, in f64, unscaled, into the accumulators.
//
// Precision: every operand v is split into FP16 hi = f16(v) and lo =
// f16(v − hi), and each product is lo·hi + hi·lo + hi·hi (22 bits of each
// operand, as 3xTF32, at twice its rate: see estep_f16.cu). FP16's range is
// narrow, so feature dimension d is scaled by an exact power of two s_d
// (x' = s_d x, chosen per chunk on the host from max|x_d| and the model:
// the largest |z'| and |w'| near the square root of the largest product);
// W' = W / (s_a s_b) for z_k = x_a x_b keeps every product, and the
// statistics are unscaled by 1/(s_a s_b 2^12) in the reduction. The tensor
// cores truncate as they add into their accumulator, so each sum restarts
// from zero every 32 k (scores) or 32 frames (statistics) and is added into
// an FP32 total.
#if FC16
#define FCMAXD 96                        // largest D (the host's FC_MAX_DIM)
#define FCB 128                          // frames (scores) / Gaussians / columns of a CTA tile
#define FKS ((KZ - 1 + 15) / 16)         // k-steps of 16 of the scores (z without the constant)
#define FCP ((KZ + FCB - 1) / FCB * FCB) // statistics columns (natural z), padded
#define FKC 2                            // k-steps per stage of fc_score
#define FQ 4                             // k-steps (16 frames each) per stage of fc_stats
#define FSF (16 * FQ)                    // frames per stage of fc_stats
#define XS ((D + 2) | 1)                 // row stride of an x tile: x', 1, 0, pad (odd)
#define FGSC 4096.0f                     // posterior scale
#define FZST (FKC * 8 * 64)              // uint4 of z' a fc_score stage: [step][mtile][lane][hi, lo]
#define FWST (FKC * 16 * 32)             // uint4 of W' a fc_score stage: [step][ntile][lane]
#define FGST (FQ * 8 * 64)               // uint4 of γ' a fc_stats stage: [q][mtile][lane][hi, lo]
#define FZSS (FQ * 16 * 32)              // uint4 of z' a fc_stats stage: [q][ntile][lane]
#define FT 512                           // threads of fc_score and fc_stats (16 warps)
#define FXR ((FSF * D + FT - 1) / FT)    // x values a thread stages for fc_stats

// Per-dimension multipliers s_d, passed by value (nothing uploaded between chunks).
struct XScales {
    float v[FCMAXD];
};

// (a | b << 8) of natural z position c: z_c = xr[a]·xr[b] over a tile row
// xr = [x', 1, 0]; past KZ the zero.
__device__ __forceinline__ unsigned fc_pair_nat(int c) {
    if (c < D) return (unsigned)c | ((unsigned)D << 8);
    if (c < KZ - 1) {
        const unsigned p = PAIRS[c - D];
        return (p >> 8) | ((p & 255u) << 8);
    }
    if (c == KZ - 1) return (unsigned)D | ((unsigned)D << 8);
    return (unsigned)(D + 1) | ((unsigned)(D + 1) << 8);
}

// The pair of scoring position k (ZORD order, the constant left out).
__device__ __forceinline__ unsigned fc_pair_score(int k) {
    return k < KZ - 1 ? fc_pair_nat(ZORD[k]) : ((unsigned)(D + 1) | ((unsigned)(D + 1) << 8));
}

// s_a s_b of a pair (1 for the constant and the padding).
__device__ __forceinline__ float fc_pair_scale(const float* xs, unsigned p) {
    const unsigned a = p & 255u, b = p >> 8;
    return (a < D ? xs[a] : 1.0f) * (b < D ? xs[b] : 1.0f);
}

__device__ __forceinline__ float fc_z(const float* xr, unsigned p) { return xr[p & 255u] * xr[p >> 8]; }

// Three products of a split pair into one accumulator, small ones first.
// b = {hi b0b1, hi b2b3, lo b0b1, lo b2b3}.
__device__ __forceinline__ void fc_mma3(float (&c)[4], const uint4& ah, const uint4& al, const uint4& b) {
    mma16(c, al.x, al.y, al.z, al.w, b.x, b.y);
    mma16(c, ah.x, ah.y, ah.z, ah.w, b.z, b.w);
    mma16(c, ah.x, ah.y, ah.z, ah.w, b.x, b.y);
}

// tot += cc; cc = 0 (a chunk's sum into the FP32 total).
template <int A, int B>
__device__ __forceinline__ void fc_chunk_add(float (&tot)[A][B][4], float (&cc)[A][B][4]) {
#pragma unroll
    for (int a = 0; a < A; ++a)
#pragma unroll
        for (int b = 0; b < B; ++b)
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                tot[a][b][i] += cc[a][b][i];
                cc[a][b][i] = 0.0f;
            }
}

template <int A, int B>
__device__ __forceinline__ void fc_zero(float (&c)[A][B][4]) {
#pragma unroll
    for (int a = 0; a < A; ++a)
#pragma unroll
        for (int b = 0; b < B; ++b)
#pragma unroll
            for (int i = 0; i < 4; ++i) c[a][b][i] = 0.0f;
}

// W' of the scores: w32[mpad][16*FKS] (scoring order, constant left out,
// f32) divided by s_a s_b per position, as B fragments
// wf[s][ntile][lane] = {hi b0b1, hi b2b3, lo b0b1, lo b2b3}. One thread per
// (s, ntile, lane).
extern "C" __global__ void fc_wfrag(const float* __restrict__ w32, int mpad, const XScales xs,
                                    uint4* __restrict__ wf) {
    const int id = blockIdx.x * blockDim.x + threadIdx.x, nt8 = mpad / 8;
    if (id >= FKS * nt8 * 32) return;
    const int lane = id & 31, j = (id >> 5) % nt8, s = (id >> 5) / nt8, g = lane >> 2, t = lane & 3;
    const float* row = w32 + (u64)(8 * j + g) * (16 * FKS);
    float v[4];
#pragma unroll
    for (int q = 0; q < 4; ++q) {
        const int k = 16 * s + 2 * t + (q & 1) + ((q & 2) ? 8 : 0);
        v[q] = row[k] / fc_pair_scale(xs.v, fc_pair_score(k));
    }
    uint4 o;
    h2split(v[0], v[1], o.x, o.z);
    h2split(v[2], v[3], o.y, o.w);
    wf[id] = o;
}

// Frames [f0, f0 + rows) of the features, scaled, into xt[rows][XS] as
// x', 1, 0 (x' = 0 past n).
__device__ __forceinline__ void fc_load_x(float* xt, const float* __restrict__ feats, int n, int f0, int rows,
                                          const float* xsm) {
    for (int e = threadIdx.x; e < rows * XS; e += blockDim.x) {
        const int f = e / XS, d = e - f * XS;
        float v = d == D ? 1.0f : 0.0f;
        if (d < D && f0 + f < n) v = feats[(u64)(f0 + f) * D + d] * xsm[d];
        xt[e] = v;
    }
}

// W' of stage st of fc_score: k-steps [st*FKC, ..) of the CTA's columns
// into buffer st & 1 (cp.async, committed).
__device__ __forceinline__ void fc_score_wcopy(uint4* stg, const uint4* __restrict__ wf, int nt8, int nt0, int st) {
    const int s0 = st * FKC, rows = imin(FKC, FKS - s0);
    uint4* ws = stg + (st & 1) * (FZST + FWST) + FZST;
    for (int i = threadIdx.x; i < rows * 512; i += blockDim.x) {
        const int kk = i >> 9, r = i & 511;
        cp16(reinterpret_cast<float*>(ws + i),
             reinterpret_cast<const float*>(wf + ((u64)(s0 + kk) * nt8 + nt0) * 32 + r));
    }
    cp_commit();
}

// z' of stage st for the CTA's frames, built from xt into zs (its stage's
// buffer): A fragments, rows frames (g, g+8 of m-tile mt), columns k. One
// item per thread (FT = FKC steps × 8 m-tiles × 32 lanes).
__device__ __forceinline__ void fc_score_build(uint4* zs, const float* xt, const unsigned short* pr, int st) {
    const int i = threadIdx.x, lane = i & 31, mt = (i >> 5) & 7, kk = i >> 8, g = lane >> 2, t = lane & 3;
    if (st * FKC + kk >= FKS) return;
    const int k = 16 * (st * FKC + kk) + 2 * t;
    const float* x0 = xt + (16 * mt + g) * XS;
    const float* x1 = x0 + 8 * XS;
    const unsigned p0 = pr[k], p1 = pr[k + 1], p8 = pr[k + 8], p9 = pr[k + 9];
    uint4 hi, lo;
    h2split(fc_z(x0, p0), fc_z(x0, p1), hi.x, lo.x);
    h2split(fc_z(x1, p0), fc_z(x1, p1), hi.y, lo.y);
    h2split(fc_z(x0, p8), fc_z(x0, p9), hi.z, lo.z);
    h2split(fc_z(x1, p8), fc_z(x1, p9), hi.w, lo.w);
    zs[2 * i] = hi;
    zs[2 * i + 1] = lo;
}

// Scores L[t][g] (row stride mpad) of FCB frames × FCB Gaussians per CTA;
// warp (wm, wn) of 16 owns 32 frames × 32 Gaussians. Each stage's mma are issued
// with the next stage's z' built between them (its W' copied meanwhile), so
// the tensor cores work while the build runs; one barrier a stage.
// Grid: (mpad/FCB, npad/FCB); FT threads. Dynamic shared memory:
// fc_score_smem() on the host.
extern "C" __global__ void __launch_bounds__(FT, 1) fc_score(const float* __restrict__ feats, int n,
                                                              const XScales xs, const uint4* __restrict__ wf,
                                                              const float* __restrict__ gconst, int mpad,
                                                              float* __restrict__ L) {
    extern __shared__ __align__(16) uint4 fsm[];
    uint4* stg = fsm;
    float* xt = reinterpret_cast<float*>(fsm + 2 * (FZST + FWST));
    float* xsm = xt + FCB * XS;
    unsigned short* pr = reinterpret_cast<unsigned short*>(xsm + FCMAXD);
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
    const int nt8 = mpad / 8, nt0 = blockIdx.x * (FCB / 8), f0 = blockIdx.y * FCB;
    for (int d = tid; d < D; d += blockDim.x) xsm[d] = xs.v[d];
    for (int k = tid; k < 16 * FKS; k += blockDim.x) pr[k] = (unsigned short)fc_pair_score(k);
    __syncthreads();
    fc_load_x(xt, feats, n, f0, FCB, xsm);
    __syncthreads();
    const int wm = warp & 3, wn = warp >> 2;
    float tot[2][4][4], cc[2][4][4];
    fc_zero(tot);
    fc_zero(cc);
    const int stages = (FKS + FKC - 1) / FKC;
    fc_score_wcopy(stg, wf, nt8, nt0, 0);
    fc_score_build(stg, xt, pr, 0);
    for (int st = 0; st < stages; ++st) {
        cp_wait<0>();
        __syncthreads();
        const bool next = st + 1 < stages;
        if (next) fc_score_wcopy(stg, wf, nt8, nt0, st + 1);
        const uint4* zs = stg + (st & 1) * (FZST + FWST);
        const uint4* ws = zs + FZST;
        uint4* zn = stg + ((st + 1) & 1) * (FZST + FWST);
        const int rows = imin(FKC, FKS - st * FKC);
#pragma unroll
        for (int kk = 0; kk < FKC; ++kk) {
            if (kk < rows) {
                uint4 ah[2], al[2];
#pragma unroll
                for (int mi = 0; mi < 2; ++mi) {
                    const uint4* a = zs + ((kk * 8 + 2 * wm + mi) * 32 + lane) * 2;
                    ah[mi] = a[0];
                    al[mi] = a[1];
                }
#pragma unroll
                for (int j = 0; j < 4; ++j) {
                    const uint4 b = ws[(kk * 16 + 4 * wn + j) * 32 + lane];
#pragma unroll
                    for (int mi = 0; mi < 2; ++mi) fc_mma3(cc[mi][j], ah[mi], al[mi], b);
                }
            }
            if (next && kk == 0) fc_score_build(zn, xt, pr, st + 1);
        }
        fc_chunk_add(tot, cc);
    }
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        const int gc = 8 * (nt0 + 4 * wn + j) + 2 * t;
        const float gc0 = gconst[gc], gc1 = gconst[gc + 1];
#pragma unroll
        for (int mi = 0; mi < 2; ++mi)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int fr = f0 + 16 * (2 * wm + mi) + g + 8 * h;
                *reinterpret_cast<float2*>(L + (u64)fr * mpad + gc) =
                    make_float2(tot[mi][j][2 * h] + gc0, tot[mi][j][2 * h + 1] + gc1);
            }
    }
}

// Posteriors of 16 frames per CTA (256 threads): ll = log Σ_g exp L (g < m)
// per frame; gam[q][mtile][lane][hi, lo] = A fragments (rows Gaussians,
// columns frames) of γ' = 2^12·exp(L − ll), 0 for frames past n and
// Gaussians past m; wll[q] = Σ ll over the CTA's frames < n (f64, frame order).
extern "C" __global__ void __launch_bounds__(256) fc_post(const float* __restrict__ L, int n, int m, int mpad,
                                                         uint4* __restrict__ gam, double* __restrict__ wll) {
    __shared__ float lls[16];
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, q = blockIdx.x, f0 = 16 * q;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const int f = 2 * warp + h;
        const float* row = L + (u64)(f0 + f) * mpad;
        float mx = NEG_BIG, s = 0.0f;
        for (int gg = lane; gg < m; gg += 32) lse_push(mx, s, row[gg]);
#pragma unroll
        for (int off = 16; off >= 1; off >>= 1) {
            const float mo = __shfl_xor_sync(0xffffffffu, mx, off);
            const float so = __shfl_xor_sync(0xffffffffu, s, off);
            lse_merge(mx, s, mo, so);
        }
        if (lane == 0) lls[f] = mx + logf(s);
    }
    __syncthreads();
    if (tid == 0) {
        double sum = 0.0;
        for (int f = 0; f < 16; ++f)
            if (f0 + f < n) sum += (double)lls[f];
        wll[q] = sum;
    }
    const int mtiles = mpad / 16;
    for (int i = tid; i < mtiles * 32; i += blockDim.x) {
        const int ln = i & 31, mt = i >> 5, g = ln >> 2, t = ln & 3;
        float v[2][4];
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            const int gg = 16 * mt + g + 8 * r;
#pragma unroll
            for (int c = 0; c < 4; ++c) {
                const int f = 2 * t + (c & 1) + ((c & 2) ? 8 : 0);
                v[r][c] = (f0 + f < n && gg < m) ? __expf(L[(u64)(f0 + f) * mpad + gg] - lls[f]) * FGSC : 0.0f;
            }
        }
        uint4 hi, lo;
        h2split(v[0][0], v[0][1], hi.x, lo.x);
        h2split(v[1][0], v[1][1], hi.y, lo.y);
        h2split(v[0][2], v[0][3], hi.z, lo.z);
        h2split(v[1][2], v[1][3], hi.w, lo.w);
        uint4* o = gam + ((u64)q * mtiles + mt) * 64 + 2 * ln;
        o[0] = hi;
        o[1] = lo;
    }
}

// x' of FSF frames from t0 into registers (0 past n); fc_x_store puts them
// into the x tile.
__device__ __forceinline__ void fc_x_fetch(float (&xr)[FXR], const float* __restrict__ feats, int n, int t0,
                                           const float* xsm) {
#pragma unroll
    for (int i = 0; i < FXR; ++i) {
        const int e = threadIdx.x + FT * i, f = e / D, d = e - f * D;
        xr[i] = (e < FSF * D && t0 + f < n) ? feats[(u64)(t0 + f) * D + d] * xsm[d] : 0.0f;
    }
}

__device__ __forceinline__ void fc_x_store(float* xt, const float (&xr)[FXR]) {
#pragma unroll
    for (int i = 0; i < FXR; ++i) {
        const int e = threadIdx.x + FT * i, f = e / D, d = e - f * D;
        if (e < FSF * D) xt[f * XS + d] = xr[i];
    }
}

// The γ' fragments of FQ steps of 16 frames from step qg0 for the CTA's 8
// Gaussian tiles into gs (cp.async, committed).
__device__ __forceinline__ void fc_gam_copy(uint4* gs, const uint4* __restrict__ gam, int mtiles, int mt0,
                                            int qg0) {
    for (int i = threadIdx.x; i < FQ * 512; i += blockDim.x) {
        const int q = i >> 9, r = i & 511;
        cp16(reinterpret_cast<float*>(gs + i),
             reinterpret_cast<const float*>(gam + ((u64)(qg0 + q) * mtiles + mt0) * 64 + r));
    }
    cp_commit();
}

// z' of step q (16 frames) of a stage for the CTA's columns, built from its
// x tile xt into zs: B fragments {hi b0b1, hi b2b3, lo b0b1, lo b2b3}, rows
// frames, columns z. One item per thread (FT = 16 n-tiles × 32 lanes).
__device__ __forceinline__ void fc_stats_build(uint4* zs, const float* xt, const unsigned short* pr, int q) {
    {
        const int i = q * 512 + threadIdx.x;
        const int lane = i & 31, nt = (i >> 5) & 15, g = lane >> 2, t = lane & 3;
        const unsigned p = pr[8 * nt + g];
        const float* xa = xt + (16 * q + 2 * t) * XS;
        uint4 o;
        h2split(fc_z(xa, p), fc_z(xa + XS, p), o.x, o.z);
        h2split(fc_z(xa + 8 * XS, p), fc_z(xa + 9 * XS, p), o.y, o.w);
        zs[i] = o;
    }
}

// Statistics S'[g][c] = Σ_t γ'[t][g] z'[t][c] over frames [r0, r0 + rf) ∩
// [0, npad) (r0 = blockIdx.z * rf; rf and npad multiples of FSF) for FCB
// Gaussians × FCB columns per CTA; warp (wm, wn) of 16 owns 32 Gaussians ×
// 32 columns. Stage st's mma are issued with stage st+1's z' built between
// them (from the second x tile) and its γ' copied meanwhile; the x of stage
// st+3 is loaded into registers across the mma, and stored at the next
// stage. One barrier a stage.
// Grid: (FCP/FCB, mpad/FCB, ranges); FT threads; partial[range][mpad][FCP].
// Dynamic shared memory: fc_stats_smem() on the host.
extern "C" __global__ void __launch_bounds__(FT, 1) fc_stats(const float* __restrict__ feats, int n, int npad,
                                                              int rf, const XScales xs,
                                                              const uint4* __restrict__ gam, int mpad,
                                                              float* __restrict__ partial) {
    extern __shared__ __align__(16) uint4 fsm[];
    uint4* stg = fsm;
    float* xt = reinterpret_cast<float*>(fsm + 2 * (FGST + FZSS)); // two tiles of FSF rows
    float* xsm = xt + 2 * FSF * XS;
    unsigned short* pr = reinterpret_cast<unsigned short*>(xsm + FCMAXD);
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
    const int c0 = blockIdx.x * FCB, mtiles = mpad / 16, mt0 = blockIdx.y * (FCB / 16);
    const int r0 = blockIdx.z * rf, stages = (imin(npad, r0 + rf) - r0) / FSF;
    for (int d = tid; d < D; d += blockDim.x) xsm[d] = xs.v[d];
    for (int c = tid; c < FCB; c += blockDim.x) pr[c] = (unsigned short)fc_pair_nat(c0 + c);
    for (int e = tid; e < 2 * FSF * XS; e += blockDim.x) {
        const int d = e % XS;
        if (d >= D) xt[e] = d == D ? 1.0f : 0.0f;
    }
    __syncthreads();
    float xr[FXR];
    fc_x_fetch(xr, feats, n, r0, xsm);
    fc_x_store(xt, xr);
    if (stages > 1) {
        fc_x_fetch(xr, feats, n, r0 + FSF, xsm);
        fc_x_store(xt + FSF * XS, xr);
    }
    __syncthreads();
    fc_gam_copy(stg, gam, mtiles, mt0, r0 / 16);
#pragma unroll
    for (int q = 0; q < FQ; ++q) fc_stats_build(stg + FGST, xt, pr, q);
    if (stages > 2) fc_x_fetch(xr, feats, n, r0 + 2 * FSF, xsm);
    const int wm = warp & 3, wn = warp >> 2;
    float tot[2][4][4], cc[2][4][4];
    fc_zero(tot);
    fc_zero(cc);
    for (int st = 0; st < stages; ++st) {
        cp_wait<0>();
        __syncthreads();
        const bool next = st + 1 < stages;
        uint4* gn = stg + ((st + 1) & 1) * (FGST + FZSS);
        if (next) fc_gam_copy(gn, gam, mtiles, mt0, (r0 + (st + 1) * FSF) / 16);
        if (st + 2 < stages) fc_x_store(xt + (st & 1) * FSF * XS, xr);
        if (st + 3 < stages) fc_x_fetch(xr, feats, n, r0 + (st + 3) * FSF, xsm);
        const uint4* gs = stg + (st & 1) * (FGST + FZSS);
        const uint4* zs = gs + FGST;
        const float* xn = xt + ((st + 1) & 1) * FSF * XS;
#pragma unroll 2
        for (int q = 0; q < FQ; ++q) {
            uint4 b[4];
#pragma unroll
            for (int j = 0; j < 4; ++j) b[j] = zs[(q * 16 + 4 * wn + j) * 32 + lane];
#pragma unroll
            for (int mi = 0; mi < 2; ++mi) {
                const uint4* a = gs + ((q * 8 + 2 * wm + mi) * 32 + lane) * 2;
                const uint4 ah = a[0], al = a[1];
#pragma unroll
                for (int j = 0; j < 4; ++j) fc_mma3(cc[mi][j], ah, al, b[j]);
            }
            if (next) fc_stats_build(gn + FGST, xn, pr, q);
            if (q & 1) fc_chunk_add(tot, cc);
        }
    }
    float* out = partial + (u64)blockIdx.z * mpad * FCP;
#pragma unroll
    for (int mi = 0; mi < 2; ++mi)
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int gg = 16 * (mt0 + 2 * wm + mi) + g + 8 * h;
                const int c = c0 + 8 * (4 * wn + j) + 2 * t;
                *reinterpret_cast<float2*>(out + (u64)gg * FCP + c) =
                    make_float2(tot[mi][j][2 * h], tot[mi][j][2 * h + 1]);
            }
}

// acc[g][c] += Σ_r partial[r][g][c] (range order, f64) / (s_a s_b 2^12), for
// g < m, c < KZ. One thread per element.
extern "C" __global__ void fc_reduce(const float* __restrict__ partial, int ranges, int m, int mpad,
                                     const XScales xs, double* __restrict__ acc) {
    const int el = blockIdx.x * blockDim.x + threadIdx.x;
    if (el >= m * KZ) return;
    const int g = el / KZ, c = el - g * KZ;
    double sum = 0.0;
    for (int r = 0; r < ranges; ++r) sum += (double)partial[((u64)r * mpad + g) * FCP + c];
    acc[el] += sum / ((double)fc_pair_scale(xs.v, fc_pair_nat(c)) * (double)FGSC);
}
#endif
