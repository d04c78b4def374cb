// ---------------------------------------------------------------------------
// Gaussian selection: statistics of one GMM where each frame is scored
// against its few selected components only (Kaldi's fgmm-global-acc-stats /
// gmm-global-acc-stats --gselect; host half engine/cuda/gselect.rs). The
// host groups a chunk's (frame, component) entries by component, in frame
// order within one (engine/cuda/gselect_plan.rs); an item is up to
// GSEL_ITEM entries of one component (Item.state = the component):
//   gsel_loglike  per item: each entry's log-likelihood into val[e]
//   gsel_softmax  per frame: Kaldi's float softmax over its entries, × the
//                 frame's weight, in place in val (now γ); per CTA
//                 Σ weight·log-likelihood in f64, in frame order
//   gsel_stats    per item: Σ γ z over its entries, f32 over sub-tiles of
//                 GS_TE entries and f64 across, into the item's own slot
//   gsel_reduce   per component: its items' slots, in item order, in f64,
//                 into the accumulators (no atomics anywhere: fixed order)
// Appended to gmm.cu: its Item, Group, u64, imin, D, KZ and FULL. The host
// defines (GselectShape::prelude):
//   GS_TE     entries per sub-tile
//   GS_DP     D rounded up to 4; GS_CT = GS_DP / 4 column threads
//   GS_JC     rows of A in shared memory at once (GS_NJC chunks)
//   GS_XS     row stride of the k-major x tile of gsel_loglike
//   GS_DA     D + 1 rounded up to 4; GS_TILES 4×4 tiles of the lower
//             triangle of the (D+1)×(D+1) statistics Σ γ [x,1][x,1]ᵀ
//   GS_NTL, GS_NTS  threads of gsel_loglike, gsel_stats (GS_PASSES passes)
//   GS_PL     floats of one component's parameters
//   GS_SMF    frames (threads) of a gsel_softmax CTA
// The parameters of component g, at params + g*GS_PL:
//   full:     A = −½Σ⁻¹ (D rows of GS_DP, zero-padded), b = Σ⁻¹μ (GS_DP,
//             zero-padded), gconst, 3 zeros
//   diagonal: b = μ/σ² (D), c = −½/σ² (D), gconst
// so that the log-likelihood is gconst + Σ_i x_i (b_i + (Ax)_i), diagonal
// gconst + Σ_i x_i (b_i + c_i x_i): each dimension's linear and quadratic
// terms meet before they are added to the rest, the last dimension first,
// the gconst last (the CPU engine's order of the terms by dimension).

// acc[i][c] += a_i · b_c: the outer product of two float4, fused.
__device__ __forceinline__ void outer4(float (&acc)[4][4], const float4& a, const float4& b) {
    const float aa[4] = {a.x, a.y, a.z, a.w};
    const float bb[4] = {b.x, b.y, b.z, b.w};
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int c = 0; c < 4; ++c) acc[i][c] = fmaf(aa[i], bb[c], acc[i][c]);
}

template <class T>
__device__ __forceinline__ void zero44(T (&a)[4][4]) {
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int c = 0; c < 4; ++c) a[i][c] = T(0);
}

// Per item: the log-likelihood of each entry into val. Full covariances as
// a small GEMM per sub-tile, Y = X·A over GS_TE entries: thread (tx, ty)
// owns entries 4ty.. and columns 4tx.., with x k-major in xs and A's rows in
// as (chunks of GS_JC rows when A is too large for shared memory). Then
// Σ_c x_c (b_c + Y_c), per thread over its columns (last first) and across
// the threads of an entry in red (last first), and the gconst.
// Diagonal: one thread per entry.
// Dynamic shared memory: full (GS_JC*GS_DP + D*GS_XS + GS_TE*GS_CT) floats,
// diagonal GS_PL floats.
extern "C" __global__ void __launch_bounds__(GS_NTL) gsel_loglike(
    const float* __restrict__ feats, const unsigned* __restrict__ frame_of,
    const Item* __restrict__ items, const float* __restrict__ params, float* __restrict__ val) {
    extern __shared__ __align__(16) float smem[];
    const Item it = items[blockIdx.x];
    const float* prm = params + (u64)it.state * GS_PL;
#if FULL
    float* as = smem;
    float* xs = as + GS_JC * GS_DP;
    float* red = xs + D * GS_XS;
    const int tx = threadIdx.x % GS_CT, ty = threadIdx.x / GS_CT;
    float bc[4];
#pragma unroll
    for (int c = 0; c < 4; ++c) bc[c] = prm[D * GS_DP + tx * 4 + c];
    const float gconst = prm[D * GS_DP + GS_DP];
    for (int sub = 0; sub < it.count; sub += GS_TE) {
        const int n = imin(GS_TE, it.count - sub), e0 = it.first + sub;
        __syncthreads(); // the last sub-tile is done with xs, as and red
        for (int el = threadIdx.x; el < GS_TE * D; el += GS_NTL) {
            const int e = el / D, j = el % D;
            xs[j * GS_XS + e] = e < n ? feats[(u64)frame_of[e0 + e] * D + j] : 0.0f;
        }
        float acc[4][4];
        zero44(acc);
        for (int j0 = 0; j0 < D; j0 += GS_JC) {
            const int rows = imin(GS_JC, D - j0);
            // One chunk of A stays for every sub-tile; several are reloaded.
            if (GS_NJC > 1 || sub == 0) {
                __syncthreads();
                for (int i = threadIdx.x * 4; i < rows * GS_DP; i += GS_NTL * 4)
                    *reinterpret_cast<float4*>(as + i) =
                        *reinterpret_cast<const float4*>(prm + (u64)j0 * GS_DP + i);
            }
            __syncthreads();
#pragma unroll 4
            for (int jj = 0; jj < rows; ++jj)
                outer4(acc, *reinterpret_cast<const float4*>(xs + (j0 + jj) * GS_XS + ty * 4),
                       *reinterpret_cast<const float4*>(as + jj * GS_DP + tx * 4));
        }
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            float s = 0.0f;
#pragma unroll
            for (int c = 3; c >= 0; --c) {
                const int col = tx * 4 + c;
                if (col < D) s = fmaf(xs[col * GS_XS + ty * 4 + i], bc[c] + acc[i][c], s);
            }
            red[(ty * 4 + i) * GS_CT + tx] = s;
        }
        __syncthreads();
        for (int e = threadIdx.x; e < n; e += GS_NTL) {
            float s = 0.0f;
            for (int q = GS_CT - 1; q >= 0; --q) s += red[e * GS_CT + q];
            val[e0 + e] = s + gconst;
        }
    }
#else
    float* ps = smem;
    for (int i = threadIdx.x; i < GS_PL; i += GS_NTL) ps[i] = prm[i];
    __syncthreads();
    for (int e = threadIdx.x; e < it.count; e += GS_NTL) {
        const float* x = feats + (u64)frame_of[it.first + e] * D;
        float s = 0.0f;
        for (int i = D - 1; i >= 0; --i) {
            const float xi = x[i];
            s = fmaf(xi, fmaf(ps[D + i], xi, ps[i]), s);
        }
        val[it.first + e] = s + ps[2 * D];
    }
#endif
}

// Per kept frame f (one thread each): Kaldi's VectorBase<float>::ApplySoftMax
// over the values of its entries (entry_of[frame_first[f] ..
// frame_first[f+1]]): max, exp(v − max), their sum, × 1/sum; then × the
// frame's weight (Kaldi's Scale(weight)), back in place. The CTA's
// Σ weight·(max + log sum) in f64, in frame order, into cta_like[blockIdx.x].
extern "C" __global__ void __launch_bounds__(GS_SMF) gsel_softmax(
    float* __restrict__ val, const unsigned* __restrict__ entry_of,
    const unsigned* __restrict__ frame_first, const float* __restrict__ frame_weight, int frames,
    double* __restrict__ cta_like) {
    __shared__ double like[GS_SMF];
    const int f = blockIdx.x * GS_SMF + threadIdx.x;
    double l = 0.0;
    if (f < frames) {
        const unsigned p0 = frame_first[f], p1 = frame_first[f + 1];
        float mx = NEG_INF;
        for (unsigned p = p0; p < p1; ++p) mx = fmaxf(mx, val[entry_of[p]]);
        float sum = 0.0f;
        for (unsigned p = p0; p < p1; ++p) {
            const unsigned e = entry_of[p];
            const float v = expf(val[e] - mx);
            val[e] = v;
            sum += v;
        }
        const float inv = 1.0f / sum, w = frame_weight[f];
        for (unsigned p = p0; p < p1; ++p) {
            const unsigned e = entry_of[p];
            val[e] = val[e] * inv * w;
        }
        l = (double)w * (double)(mx + logf(sum));
    }
    like[threadIdx.x] = l;
    __syncthreads();
    if (threadIdx.x == 0) {
        double s = 0.0;
        for (int i = 0; i < GS_SMF; ++i) s += like[i];
        cta_like[blockIdx.x] = s;
    }
}

// Per item: its statistics Σ γ z into partial[item][KZ], the accumulators'
// layout ([Σγx, Σγx² or Σγ x_i x_j (i ≥ j, packed), Σγ]), every element
// written. Sums run in f32 over a sub-tile of GS_TE entries and in f64
// across sub-tiles. The entries' frame and γ are staged in fr and gm.
// Full: S = Σ γ x̃ x̃ᵀ over x̃ = [x, 1, 0…] (GS_DA long), lower triangle, by
// 4×4 tiles; thread t owns tile pass*GS_NTS + t, summing (γx̃_i)·x̃_j from
// ut = γx̃ and xt = x̃. Row D of S is Σγx̃ᵀ: the means and the occupancy.
// Diagonal: thread k owns z_k (pass*GS_NTS + k).
// Dynamic shared memory: full 2*GS_TE*GS_DA floats, diagonal GS_TE*D.
extern "C" __global__ void __launch_bounds__(GS_NTS) gsel_stats(
    const float* __restrict__ feats, const unsigned* __restrict__ frame_of,
    const float* __restrict__ val, const Item* __restrict__ items, double* __restrict__ partial) {
    extern __shared__ __align__(16) float smem[];
    __shared__ unsigned fr[GS_TE];
    __shared__ float gm[GS_TE];
    const Item it = items[blockIdx.x];
    double* out = partial + (u64)blockIdx.x * KZ;
#if FULL
    float* xt = smem;
    float* ut = xt + GS_TE * GS_DA;
    for (int pass = 0; pass < GS_PASSES; ++pass) {
        const int tile = pass * GS_NTS + threadIdx.x;
        const bool mine = tile < GS_TILES;
        int bi = 0;
        while ((bi + 1) * (bi + 2) / 2 <= tile) ++bi;
        const int bj = tile - bi * (bi + 1) / 2;
        double s64[4][4];
        zero44(s64);
        for (int sub = 0; sub < it.count; sub += GS_TE) {
            const int n = imin(GS_TE, it.count - sub), e0 = it.first + sub;
            __syncthreads(); // the last sub-tile is done with fr, gm, xt and ut
            for (int e = threadIdx.x; e < GS_TE; e += GS_NTS) {
                fr[e] = e < n ? frame_of[e0 + e] : 0u;
                gm[e] = e < n ? val[e0 + e] : 0.0f;
            }
            __syncthreads();
            for (int el = threadIdx.x; el < GS_TE * GS_DA; el += GS_NTS) {
                const int e = el / GS_DA, j = el % GS_DA;
                float x = 0.0f;
                if (e < n) x = j < D ? feats[(u64)fr[e] * D + j] : (j == D ? 1.0f : 0.0f);
                xt[el] = x;
                ut[el] = gm[e] * x;
            }
            __syncthreads();
            if (mine) {
                float s[4][4];
                zero44(s);
                for (int e = 0; e < n; ++e)
                    outer4(s, *reinterpret_cast<const float4*>(ut + e * GS_DA + bi * 4),
                           *reinterpret_cast<const float4*>(xt + e * GS_DA + bj * 4));
#pragma unroll
                for (int r = 0; r < 4; ++r)
#pragma unroll
                    for (int c = 0; c < 4; ++c) s64[r][c] += (double)s[r][c];
            }
        }
        if (mine) {
#pragma unroll
            for (int r = 0; r < 4; ++r)
#pragma unroll
                for (int c = 0; c < 4; ++c) {
                    const int i = bi * 4 + r, j = bj * 4 + c;
                    if (i > D || j > i) continue;
                    const int k = (i == D) ? (j == D ? KZ - 1 : j) : D + i * (i + 1) / 2 + j;
                    out[k] = s64[r][c];
                }
        }
    }
#else
    float* xt = smem;
    for (int pass = 0; pass < GS_PASSES; ++pass) {
        const int k = pass * GS_NTS + threadIdx.x;
        double s64 = 0.0;
        for (int sub = 0; sub < it.count; sub += GS_TE) {
            const int n = imin(GS_TE, it.count - sub), e0 = it.first + sub;
            __syncthreads(); // the last sub-tile is done with fr, gm and xt
            for (int e = threadIdx.x; e < GS_TE; e += GS_NTS) {
                fr[e] = e < n ? frame_of[e0 + e] : 0u;
                gm[e] = e < n ? val[e0 + e] : 0.0f;
            }
            __syncthreads();
            for (int el = threadIdx.x; el < GS_TE * D; el += GS_NTS) {
                const int e = el / D, j = el % D;
                xt[el] = e < n ? feats[(u64)fr[e] * D + j] : 0.0f;
            }
            __syncthreads();
            float s = 0.0f;
            if (k < D) {
                for (int e = 0; e < n; ++e) s = fmaf(gm[e], xt[e * D + k], s);
            } else if (k < 2 * D) {
                for (int e = 0; e < n; ++e) {
                    const float x = xt[e * D + k - D];
                    s = fmaf(gm[e] * x, x, s);
                }
            } else if (k == KZ - 1) {
                for (int e = 0; e < n; ++e) s += gm[e];
            }
            s64 += (double)s;
        }
        if (k < KZ) out[k] = s64;
    }
#endif
}

// Per component with entries (blockIdx.x: its Group, gauss_first = the
// component): acc[component][k] += Σ partial[item][k] over its items in item
// order, in f64. Grid: (groups, element tiles of blockDim.x).
extern "C" __global__ void gsel_reduce(const double* __restrict__ partial,
                                       const Group* __restrict__ groups, double* __restrict__ acc) {
    const Group gr = groups[blockIdx.x];
    const int k = blockIdx.y * blockDim.x + threadIdx.x;
    if (k >= KZ) return;
    double s = 0.0;
    for (int i = 0; i < gr.item_count; ++i) s += partial[(u64)(gr.item_first + i) * KZ + k];
    acc[(u64)gr.gauss_first * KZ + k] += s;
}
