// The FP16 E-step (estep_f16.cu) on Hopper's warpgroup tensor-core
// instructions (wgmma, sm_90a): gllw and gstw do gll16's and gst16's work.
// Appended after estep_f16.cu when the host defines WG (a compute capability
// 9.0 device); its helpers and macros are used. The same products as there
// (W' and z' split into FP16 hi and lo halves; the hi·hi products in one
// accumulator, lo·hi and hi·lo in another; score = (b + s) + gconst), so
// gstw's recomputed scores have gllw's bits and a one-Gaussian GMM still
// gets γ = 1 exactly.
//
// Why: mma.sync keeps a warp issuing a tensor instruction per 16 × 8 × 16
// product and waiting on its latency (ncu, H100: gll16 tensor pipe ~52 %,
// gst16 ~49 %, both latency-bound at 3 warps a scheduler). One wgmma does
// 64 rows × N × 16 asynchronously from a warpgroup. M = 2048 on one H200:
// 27.9 ms with gll16/gst16, 25.1 with gllw, 19.8 with gllw and gstw.
//
// gllw's layout. A (frames × k) comes from registers: warp w of a
// warpgroup holds rows 16w..16w+15, whose fragments it reads from z' in
// gstw's layout (zw, made by zfragw; zfrag16 does not run). B (k × Gaussians) is
// read by the tensor cores from shared memory as "core matrices" of 8
// Gaussians × 8 k (16 bytes a row, 128 bytes each, no swizzle): a tile of GT
// Gaussians holds, for hi then lo, core matrix (n8 block i, k8 block c) at
// ((i·KP/8) + c)·128 bytes (wfragw writes it so in global memory; a stage
// copies it as it is). The descriptor's leading (k) offset is then 128
// bytes, its stride (Gaussian) offset KP/8·128.
#if E16 && WG
// WGN (warpgroups of a gllw CTA, 64 frames each) and GWG (warpgroups of a
// gstw CTA, 64 Gaussians each) come from the host (engine/cuda/estep16_wg.rs).
#define GT 32                           // Gaussians of a gllw tile (the wgmma's N)
#define MSW (128 / GT)                   // tiles per stage (128 Gaussians)
#define WTU (GT * KP * 2 * 2 / 16)      // uint4 of a tile: hi and lo
#define WSU (MSW * WTU + MSW * GT / 4)  // uint4 of a stage: tiles, then gconsts
#define WBUF 3                          // stages in flight
#define WLL (64 * WGN)                  // frames of a CTA

// The shared-memory descriptor of an unswizzled operand at p: leading
// (lbo) and stride (sbo) byte offsets between core matrices (for a K-major
// operand: along k and along the rows; for an MN-major one: along k and
// along the columns).
__device__ __forceinline__ u64 wg_desc2(const uint4* p, unsigned lbo, unsigned sbo) {
    const unsigned a = (unsigned)__cvta_generic_to_shared(p);
    return (u64)((a & 0x3FFFF) >> 4) | ((u64)(lbo >> 4) << 16) | ((u64)(sbo >> 4) << 32);
}

// gllw's B (W' tiles, see above).
__device__ __forceinline__ u64 wg_desc(const uint4* p) { return wg_desc2(p, 128, (KP / 8) * 128); }

// d (+)= a · B: one m64nGTk16 wgmma (f32 += f16 · f16); acc = 0 starts d
// from the product alone.
__device__ __forceinline__ void wg_mma(float (&d)[16], const unsigned (&a)[4], u64 desc, int acc) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %21, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n32k16.f32.f16.f16 "
        "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15}, {%16,%17,%18,%19}, %20, p, 1, 1, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(acc));
}

__device__ __forceinline__ void wg_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wg_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wg_wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// Keeps the compiler from moving the accumulators across the async window.
template <int N>
__device__ __forceinline__ void wg_hold(float (&d)[N]) {
#pragma unroll
    for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// A tile's two accumulators: hi·hi (b) and lo·hi + hi·lo (s), as Acc3.
struct WAcc {
    float b[GT / 2], s[GT / 2];
};

// Issue the products of tile `tile` (in shared memory) for the warp's A
// fragments: per k-step the same three products as mma3, in its order.
// `tile` is the descriptor of the tile's start: the address field counts
// 16-byte units, so an offset in uint4 is added to it.
__device__ __forceinline__ void wg_tile(WAcc& c, const unsigned (&ah)[KS16][4], const unsigned (&al)[KS16][4],
                                        u64 tile) {
    wg_fence();
#pragma unroll
    for (int s = 0; s < KS16; ++s) {
        const u64 hi = tile + s * 16, lo = tile + WTU / 2 + s * 16;
        wg_mma(c.s, ah[s], lo, s > 0);
        wg_mma(c.s, al[s], hi, 1);
        wg_mma(c.b, ah[s], hi, s > 0);
    }
    wg_commit();
}

// Fold a finished tile's scores into the running log-sum-exps m/sm[r] of
// row r (frame g, g + 8): the tile's largest score first, so the sum is
// rescaled once a tile and each score costs one exponential.
__device__ __forceinline__ void wg_lse(WAcc& c, const float* gcs, int t, float (&m)[2], float (&sm)[2]) {
    wg_hold(c.b);
    wg_hold(c.s);
    float v[2][GT / 4];
#pragma unroll
    for (int i = 0; i < GT / 8; ++i) {
        const float2 gc = *reinterpret_cast<const float2*>(gcs + 8 * i + 2 * t);
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            v[r][2 * i] = (c.b[4 * i + 2 * r] + c.s[4 * i + 2 * r]) + gc.x;
            v[r][2 * i + 1] = (c.b[4 * i + 2 * r + 1] + c.s[4 * i + 2 * r + 1]) + gc.y;
        }
    }
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        float mx = v[r][0];
#pragma unroll
        for (int j = 1; j < GT / 4; ++j) mx = fmaxf(mx, v[r][j]);
        const float mn = fmaxf(m[r], mx);
        float a = sm[r] * __expf(m[r] - mn);
#pragma unroll
        for (int j = 0; j < GT / 4; ++j) a += __expf(v[r][j] - mn);
        sm[r] = a;
        m[r] = mn;
    }
}

// Stage st: Gaussian tiles [st*MSW, ..) of wb and their gconsts into buffer
// st % WBUF; always one commit group (empty past the last stage).
__device__ __forceinline__ void wg_stage(uint4* smem, const uint4* __restrict__ wb,
                                         const float* __restrict__ gconst, int tiles, int st) {
    const int mt0 = st * MSW, n = imin(MSW, tiles - mt0);
    uint4* dst = smem + (st % WBUF) * WSU;
    if (n > 0) {
        const uint4* src = wb + (u64)mt0 * WTU;
        for (int i = threadIdx.x; i < n * WTU; i += blockDim.x)
            cp16(reinterpret_cast<float*>(dst + i), reinterpret_cast<const float*>(src + i));
        for (int i = threadIdx.x; i < n * GT / 4; i += blockDim.x)
            cp16(reinterpret_cast<float*>(dst + MSW * WTU + i), gconst + (u64)mt0 * GT + 4 * i);
    }
    cp_commit();
}

// d (+)= a · B for 16 frames: one m64n16k16 wgmma (B K-major).
__device__ __forceinline__ void wg_n16(float (&d)[8], const unsigned (&a)[4], u64 desc, int acc) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %13, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n16k16.f32.f16.f16 "
        "{%0,%1,%2,%3,%4,%5,%6,%7}, "
        "{%8,%9,%10,%11}, %12, p, 1, 1, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(acc));
}

// d (+)= γ · z over 16 frames for all KP columns: one m64nKPk16 wgmma with
// B (frames × k) read k-contiguous (MN-major, transposed).
#if KP == 16
__device__ __forceinline__ void wg_stats(float (&d)[8], const unsigned (&a)[4], u64 desc, int acc) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %13, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n16k16.f32.f16.f16 "
        "{%0,%1,%2,%3,%4,%5,%6,%7}, "
        "{%8,%9,%10,%11}, %12, p, 1, 1, 1;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(acc));
}
#elif KP == 32
__device__ __forceinline__ void wg_stats(float (&d)[16], const unsigned (&a)[4], u64 desc, int acc) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %21, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n32k16.f32.f16.f16 "
        "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15}, "
        "{%16,%17,%18,%19}, %20, p, 1, 1, 1;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(acc));
}
#elif KP == 48
__device__ __forceinline__ void wg_stats(float (&d)[24], const unsigned (&a)[4], u64 desc, int acc) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %29, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n48k16.f32.f16.f16 "
        "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23}, "
        "{%24,%25,%26,%27}, %28, p, 1, 1, 1;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]),
          "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]),
          "+f"(d[22]), "+f"(d[23])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(acc));
}
#elif KP == 64
__device__ __forceinline__ void wg_stats(float (&d)[32], const unsigned (&a)[4], u64 desc, int acc) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 "
        "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24"
        ",%25,%26,%27,%28,%29,%30,%31}, "
        "{%32,%33,%34,%35}, %36, p, 1, 1, 1;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]),
          "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]),
          "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]),
          "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(acc));
}
#elif KP == 80
__device__ __forceinline__ void wg_stats(float (&d)[40], const unsigned (&a)[4], u64 desc, int acc) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %45, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n80k16.f32.f16.f16 "
        "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24"
        ",%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39}, "
        "{%40,%41,%42,%43}, %44, p, 1, 1, 1;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]),
          "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]),
          "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]),
          "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]),
          "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(acc));
}
#elif KP == 96
__device__ __forceinline__ void wg_stats(float (&d)[48], const unsigned (&a)[4], u64 desc, int acc) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %53, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n96k16.f32.f16.f16 "
        "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24"
        ",%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%"
        "47}, "
        "{%48,%49,%50,%51}, %52, p, 1, 1, 1;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]),
          "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]),
          "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]),
          "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]),
          "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]),
          "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(acc));
}
#endif

// ---------------------------------------------------------------------------
// Pass 2 (gst16's work) on wgmma. A warpgroup owns 64 Gaussians (warp w of
// it gst16's 16-Gaussian tile 4·tile64 + w, with its W' A fragments in
// registers, as gst16). Per 16 frames it recomputes the scores (the same
// three products in the same order: the same bits as gllw), takes
// γ = exp(c − L), and multiplies the posteriors, its C fragments turned into
// A fragments as in gst16, with z of the 16 frames: Σγz of 64 Gaussians × KP
// in one m64nKPk16 wgmma per product. Both B operands come from one shared-
// memory image of the stage's z' (zfragw): per 8-frame block, hi then lo,
// core matrices of 8 frames × 8 k (k contiguous). The scores read it K-major
// (leading offset 128 bytes: next k block; stride ZWB bytes: next frame
// block), the statistics MN-major (leading ZWB: next frame block, the k of
// that product; stride 128: next k block).
#define ZWU (2 * KP)           // uint4 of an 8-frame block: hi and lo
#define ZWB (ZWU * 16)         // its bytes
#define GSU (SF / 8 * ZWU + SF / 4) // uint4 of a stage: SF frames of z', then their L
#define GBUF 3                 // stages in flight

// z' of the chunk in gstw's layout: zw[block][hi, lo][k block][row] (uint4:
// 8 k values of one frame). One thread per (block, k block, row); frames up
// to the padded chunk (zeros past T).
extern "C" __global__ void zfragw(const float* __restrict__ feats, int T, int blocks, const Scales zmul,
                                  uint4* __restrict__ zw) {
    const int id = blockIdx.x * blockDim.x + threadIdx.x;
    if (id >= blocks * (KP / 8) * 8) return;
    const int b = id / (KP / 8 * 8), c = (id / 8) % (KP / 8), r = id % 8;
    const int fr = 8 * b + r, k = 8 * c;
    unsigned hi[4], lo[4];
#pragma unroll
    for (int e = 0; e < 4; ++e)
        h2split(zval16(feats, T, fr, k + 2 * e) * zmul.v[k + 2 * e],
                zval16(feats, T, fr, k + 2 * e + 1) * zmul.v[k + 2 * e + 1], hi[e], lo[e]);
    uint4* o = zw + (u64)b * ZWU + c * 8 + r;
    o[0] = make_uint4(hi[0], hi[1], hi[2], hi[3]);
    o[KP] = make_uint4(lo[0], lo[1], lo[2], lo[3]);
}

// Stage st of gstw: frames [f0 + st*SF, +SF) of zw and ll into buffer
// st % GBUF; always one commit group.
__device__ __forceinline__ void gw_stage(uint4* smem, const uint4* __restrict__ zw,
                                         const float* __restrict__ ll, int f0, int st, int stages) {
    uint4* dst = smem + (st % GBUF) * GSU;
    if (st < stages) {
        const int fs = f0 + st * SF;
        const uint4* src = zw + (u64)(fs / 8) * ZWU;
        for (int i = threadIdx.x; i < SF / 8 * ZWU; i += blockDim.x)
            cp16(reinterpret_cast<float*>(dst + i), reinterpret_cast<const float*>(src + i));
        for (int i = threadIdx.x; i < SF / 4; i += blockDim.x)
            cp16(reinterpret_cast<float*>(dst + SF / 8 * ZWU + i), ll + fs + 4 * i);
    }
    cp_commit();
}

// The scores of 16 frames (blocks at zb16: the descriptor of their first
// block) for the warp's W' fragments: gst16's score_step on wgmma.
__device__ __forceinline__ void gw_scores(float (&cb)[8], float (&cs)[8], const unsigned (&ah)[KS16][4],
                                          const unsigned (&al)[KS16][4], u64 zb16) {
    wg_fence();
#pragma unroll
    for (int s = 0; s < KS16; ++s) {
        const u64 hi = zb16 + s * 16, lo = zb16 + KP + s * 16;
        wg_n16(cs, al[s], hi, s > 0);
        wg_n16(cs, ah[s], lo, 1);
        wg_n16(cb, ah[s], hi, s > 0);
    }
    wg_commit();
}

// Pass 2. Grid: (ceil(tiles64 / GWG), ranges of rf frames, rf a multiple of
// SF); blockDim 128 * GWG. partial[range][mpad][KZ] as gst16's (mpad >=
// 64 * tiles64). zw and ll cover the chunk padded to a multiple of SF frames.
// Dynamic shared memory: GBUF * GSU uint4.
extern "C" __global__ void __launch_bounds__(128 * GWG, 1) gstw(const uint4* __restrict__ zw,
                                                             const float* __restrict__ ll, int T, int rf,
                                                             const uint4* __restrict__ wa,
                                                             const float* __restrict__ gconst, int tiles64,
                                                             float* __restrict__ partial, int mpad) {
    extern __shared__ __align__(128) uint4 sm4[];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int t64 = blockIdx.x * GWG + (warp >> 2);
    // Whole warpgroups only: a warpgroup past the last tile computes
    // (padding W') and writes nothing.
    const bool active = t64 < tiles64;
    const int mt = 4 * (active ? t64 : 0) + (warp & 3);
    const int f0 = blockIdx.y * rf, f1 = imin(T, f0 + rf);
    unsigned ah[KS16][4], al[KS16][4];
#pragma unroll
    for (int s = 0; s < KS16; ++s) {
        const uint4* w = wa + ((u64)mt * KS16 + s) * 64 + lane;
        const uint4 h = w[0], l = w[32];
        ah[s][0] = h.x, ah[s][1] = h.y, ah[s][2] = h.z, ah[s][3] = h.w;
        al[s][0] = l.x, al[s][1] = l.y, al[s][2] = l.z, al[s][3] = l.w;
    }
    const float gc0 = gconst[16 * mt + g], gc1 = gconst[16 * mt + g + 8];
    float S[KP / 2], occ[2] = {0.0f, 0.0f};
#pragma unroll
    for (int i = 0; i < KP / 2; ++i) S[i] = 0.0f;
    const int stages = (f1 - f0 + SF - 1) / SF;
    gw_stage(sm4, zw, ll, f0, 0, stages);
    gw_stage(sm4, zw, ll, f0, 1, stages);
    for (int st = 0; st < stages; ++st) {
        cp_wait<1>();
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
        __syncthreads();
        gw_stage(sm4, zw, ll, f0, st + 2, stages);
        const uint4* buf = sm4 + (st % GBUF) * GSU;
        const float* lls = reinterpret_cast<const float*>(buf + SF / 8 * ZWU);
        const u64 zk = wg_desc2(buf, 128, ZWB);  // scores: K-major
        const u64 zm = wg_desc2(buf, ZWB, 128);  // statistics: MN-major
        float acc[KP / 2];
#pragma unroll
        for (int step = 0; step < SF / 16; ++step) {
            float cb[8], cs[8];
            gw_scores(cb, cs, ah, al, zk + 2 * step * ZWU);
            wg_wait<0>();
            wg_hold(cb);
            wg_hold(cs);
            // γ in the C layout: (j, i) = Gaussian g (+8 for i >= 2), frame
            // 8j + 2t + (i & 1) of this step. Frames past T have L = +inf.
            float gm[2][4];
#pragma unroll
            for (int j = 0; j < 2; ++j) {
                const float2 l2 = *reinterpret_cast<const float2*>(lls + 16 * step + 8 * j + 2 * t);
#pragma unroll
                for (int i = 0; i < 4; ++i) {
                    const float c = (cb[4 * j + i] + cs[4 * j + i]) + ((i < 2) ? gc0 : gc1);
                    gm[j][i] = __expf(c - ((i & 1) ? l2.y : l2.x));
                    occ[i >> 1] += gm[j][i];
                }
            }
            unsigned gh[4], gl[4];
            h2split(GSC * gm[0][0], GSC * gm[0][1], gh[0], gl[0]);
            h2split(GSC * gm[0][2], GSC * gm[0][3], gh[1], gl[1]);
            h2split(GSC * gm[1][0], GSC * gm[1][1], gh[2], gl[2]);
            h2split(GSC * gm[1][2], GSC * gm[1][3], gh[3], gl[3]);
            const u64 zs = zm + 2 * step * ZWU;
            wg_fence();
            wg_stats(acc, gl, zs, step > 0);
            wg_stats(acc, gh, zs + KP, 1);
            wg_stats(acc, gh, zs, 1);
            wg_commit();
        }
        wg_wait<0>();
        wg_hold(acc);
#pragma unroll
        for (int i = 0; i < KP / 2; ++i) S[i] += acc[i];
        __syncthreads();
    }
#pragma unroll
    for (int off = 1; off <= 2; off <<= 1) {
        occ[0] += __shfl_xor_sync(0xffffffffu, occ[0], off);
        occ[1] += __shfl_xor_sync(0xffffffffu, occ[1], off);
    }
    if (!active) return;
    // S[4j + i] is gst16's S[j][i] (KP / 8 = NJ blocks of n8).
    put_partial(partial, mpad, mt, g, t, reinterpret_cast<const float(&)[NJ][4]>(S), occ);
}

// gll16's work (see there: ll[t] = L_t, +inf for the padding frames up to the
// CTAs' end, ll holding gridDim.x*WLL floats; wll[cta] = Σ L_t in f64, frame
// order). Grid: ceil(T / WLL); WGN warpgroups of 64 frames, each walking all
// Gaussian tiles of GT (a tile's log-sum-exp runs while the other warpgroups'
// products do: two tiles in flight in one warpgroup, at 3 warpgroups of 168
// registers, were no faster). Dynamic shared memory: WBUF * WSU uint4.
extern "C" __global__ void __launch_bounds__(128 * WGN, 1) gllw(const uint4* __restrict__ zw, int T,
                                                             const uint4* __restrict__ wb,
                                                             const float* __restrict__ gconst, int tiles,
                                                             float* __restrict__ ll, double* __restrict__ wll) {
    extern __shared__ __align__(128) uint4 sm4[];
    __shared__ float lls[WLL];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int f0 = blockIdx.x * WLL + 16 * warp;
    const int blocks = (T + 15) / 16 * 2; // 8-frame blocks of zw read (zeros past T)
    // A fragments of frames f0 + g (j = 0) and f0 + 8 + g (j = 1), k pairs
    // 16s + 2t (k block 2s) and 16s + 8 + 2t (k block 2s + 1): in zw, pair t
    // of row g of those k blocks, hi then (KP uint4 on) lo.
    unsigned ah[KS16][4], al[KS16][4];
#pragma unroll
    for (int s = 0; s < KS16; ++s)
#pragma unroll
        for (int j = 0; j < 2; ++j) {
            const int blk = f0 / 8 + j;
            const unsigned* z = reinterpret_cast<const unsigned*>(zw + (u64)blk * ZWU + 2 * s * 8 + g) + t;
            const bool in = blk < blocks;
            ah[s][j] = in ? z[0] : 0u;
            ah[s][j + 2] = in ? z[32] : 0u;
            al[s][j] = in ? z[4 * KP] : 0u;
            al[s][j + 2] = in ? z[4 * KP + 32] : 0u;
        }
    float m[2] = {NEG_BIG, NEG_BIG}, sm[2] = {0.0f, 0.0f};
    const int stages = (tiles + MSW - 1) / MSW;
    wg_stage(sm4, wb, gconst, tiles, 0);
    wg_stage(sm4, wb, gconst, tiles, 1);
    WAcc x;
    for (int st = 0; st < stages; ++st) {
        cp_wait<1>();
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
        __syncthreads();
        // Buffer (st + 2) % WBUF last held stage st − 1, which every
        // warpgroup has finished (its wgmmas waited for) before the barrier.
        wg_stage(sm4, wb, gconst, tiles, st + 2);
        const uint4* buf = sm4 + (st % WBUF) * WSU;
        const u64 dsc = wg_desc(buf);
        const float* gcs = reinterpret_cast<const float*>(buf + MSW * WTU);
#pragma unroll
        for (int q = 0; q < MSW; ++q) {
            wg_tile(x, ah, al, dsc + q * WTU);
            wg_wait<0>();
            wg_lse(x, gcs + q * GT, t, m, sm);
        }
    }
    // The 4 lanes of a row (lane bits 0..1); symmetric, so every lane ends
    // with the same bits.
#pragma unroll
    for (int r = 0; r < 2; ++r)
#pragma unroll
        for (int off = 1; off <= 2; off <<= 1) {
            const float mo = __shfl_xor_sync(0xffffffffu, m[r], off);
            const float so = __shfl_xor_sync(0xffffffffu, sm[r], off);
            lse_merge(m[r], sm[r], mo, so);
        }
    if (t == 0) {
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            const int fl = 16 * warp + g + 8 * r, fr = blockIdx.x * WLL + fl;
            const float l = m[r] + logf(sm[r]);
            lls[fl] = l;
            ll[fr] = fr < T ? l : __int_as_float(0x7f800000);
        }
    }
    __syncthreads();
    // Σ L_t of the CTA's frames in f64 by warp 0: WLL/32 consecutive frames
    // a lane, then a butterfly (fixed order; every lane gets the same bits).
    if (warp == 0) {
        const int n = imin(WLL, T - blockIdx.x * WLL);
        double sum = 0.0;
#pragma unroll
        for (int q = 0; q < WLL / 32; ++q)
            if (lane * (WLL / 32) + q < n) sum += (double)lls[lane * (WLL / 32) + q];
#pragma unroll
        for (int off = 16; off >= 1; off >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);
        if (lane == 0) wll[blockIdx.x] = sum;
    }
}

// W' of `tiles` tiles of GT Gaussians in the layout above: w32[Mpad][KP]
// (row-major, f32; Mpad >= GT*tiles) scaled by wmul[k], split into hi and lo.
// One thread per (tile, n8 block, k8 block, row): 8 values of one Gaussian.
extern "C" __global__ void wfragw(const float* __restrict__ w32, int tiles, const Scales wm,
                                  uint4* __restrict__ wb) {
    const int id = blockIdx.x * blockDim.x + threadIdx.x;
    const int per_tile = (GT / 8) * (KP / 8) * 8;
    if (id >= tiles * per_tile) return;
    const int tile = id / per_tile, rest = id % per_tile;
    const int i = rest / ((KP / 8) * 8), c = (rest / 8) % (KP / 8), r = rest % 8;
    const int gss = GT * tile + 8 * i + r, k = 8 * c;
    const float* w = w32 + (u64)gss * KP + k;
    unsigned hi[4], lo[4];
#pragma unroll
    for (int e = 0; e < 4; ++e)
        h2split(w[2 * e] * wm.v[k + 2 * e], w[2 * e + 1] * wm.v[k + 2 * e + 1], hi[e], lo[e]);
    uint4* o = wb + (u64)tile * WTU + (i * (KP / 8) + c) * 8 + r;
    o[0] = make_uint4(hi[0], hi[1], hi[2], hi[3]);
    o[WTU / 2] = make_uint4(lo[0], lo[1], lo[2], lo[3]);
}
#endif
