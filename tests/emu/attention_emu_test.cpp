/* The CUDA attention ops (kernels/cuda/attention_{fwd,bwd,decode,probs}.cu),
 * run on the host emulator (tests/emu), against the CPU ops
 * (kernels/cpu/attention_*.c, from the build's libsg.a).  Run by
 * tests/e2e_cuda_emu.sh, which builds it; see there and docs/cuda.md.
 *
 * usage: attention_emu_test [--fp32] [--as-set] SEED DIGESTS [FILTER]
 *   --fp32   the kernels were built with EMU_BF16_EXACT (no bf16 rounding):
 *            the streaming attention at fp32 tolerances
 *   --as-set the streaming attention under the tile kernels SG_ATTN selects,
 *            not under both
 *   SEED     the scheduler's seed (block order, thread interleaving)
 *   DIGESTS  file to write one line per case: its tag and a hash of the bits
 *            of every output; the script runs two seeds and compares them
 *   FILTER   only the cases whose tag contains it
 *
 * The CUDA ops are compiled with their op_ names renamed to cuda_op_ (the
 * CPU ops keep theirs).  Inputs are N(0,1) (q, k, v, dO, sink logits) and
 * -|N(0, 0.5)| (log-biases), as in tests/gpu/test_gpu_ops.c, and the
 * tolerances are that file's, per element |emu - cpu| <= atol + rtol |cpu|:
 *   streaming attention (bf16 tensor-core operands, here rounded the same
 *   way): rtol 2e-2, atol 2e-2 x the output's largest magnitude;
 *   decode and explicit attention (fp32): rtol 1e-4, atol 1e-5 x max(1, it).
 * Two outputs get a scale of their own, both explained where they are
 * compared: dsink, a sum that may cancel (its scale is the magnitude of its
 * terms), and at T = 1 without a phantom dq, dk and dlogbias, which are
 * exactly 0 (both sides hold rounding noise; they must be within a bound on
 * it).  test_gpu_ops compares dq, dk and dv as one tensor, and skips
 * dlogbias there; here each is compared on its own.  With a log-bias the
 * backward also runs without dlogbias (NULL, as ops.h allows): dq, dk, dv
 * and dsink bitwise as with it.
 * Every output buffer starts as NaN (or, where the op accumulates or must
 * leave padding alone, as values the reference starts from too), so an
 * element the kernel fails to write shows; every buffer has NaN guard zones
 * on both sides that must come back untouched, and every input must come
 * back unchanged. */
#include <algorithm>

#include "battery.h"
#include "kernel_trace.h"

extern "C" {
void cuda_op_attention_fwd(real *out, real *lse, const real *q, const real *k, const real *v, const AttnArgs *a);
void cuda_op_attention_bwd(real *dq, real *dk, real *dv, real *dsink, real *dlogbias, const real *dout, const real *q,
                           const real *k, const real *v, const real *out, const real *lse, const AttnArgs *a);
void cuda_op_attention_decode_fwd(real *out, real *lse, const real *q, const real *k, const real *v,
                                  const AttnArgs *a);
void cuda_op_attention_decode_bwd(real *dq, real *dk, real *dv, real *dsink, real *dlogbias, const real *dout,
                                  const real *q, const real *k, const real *v, const real *out, const real *lse,
                                  const AttnArgs *a);
void cuda_op_attention_probs(real *p, const real *q, const real *k, const AttnArgs *a);
void cuda_op_attention_apply(real *out, const real *p, const real *v, const AttnArgs *a);
void cuda_op_matmul_fwd(real *out, const real *inp, const real *w, int M, int K, int N);
void cuda_op_matmul_bwd(real *dinp, real *dw, const real *dout, const real *inp, const real *w, int M, int K, int N);
long sg_matmul_casts_skipped(void); /* kernels/cuda/matmul.cu */
long sg_matmul_stores_skipped(void);
void sg_matmul_forget(void);
long sg_attn_packs_reused(void); /* kernels/cuda/attention_pack.cu */
long sg_attn_dq_stored(void);    /* kernels/cuda/attention_bwd_mma.cu */
long sg_attn_bwd_piped(void);    /* kernels/cuda/attention_bwd_mma.cu */
long sg_attn_gate_fused(void);   /* kernels/cuda/attention_bwd.cu */
long sg_attn_wgmma_calls(void);  /* kernels/cuda/attention_fwd.cu */
void cuda_op_attention_gate_bwd(real *dq, real *dk, real *dsink, const real *dout, const real *q, const real *k,
                                const real *vg, const real *out, const real *lse, const AttnArgs *a,
                                const AttnGateBwd *gb);
void cuda_op_gate_bwd(real *dv, int dv_stride, real *dtau, real *dw, real *db, const real *dvg, const real *dlogbias,
                      const real *v, int v_stride, const real *g, const GateParams *p, int B, int T, int H, int d);
void sg_count_free(void);         /* what op_free does to that table */
void cuda_op_matmul_only(const real *buf, long n);
long cuda_op_promised_len(int kind, long n);
void cuda_op_matmul_only_end(const void *base, size_t bytes);
void cuda_op_attention_operand(const real *buf, long n);
long sg_attn_inplace_reads(void);
long sg_attn_cudnn_calls(int bwd);
void sg_attn_trace_enable(int on); /* kernels/cuda/attention_trace.cu */
long sg_attn_trace_records(int k, const KtraceRec **recs, const char **name);
}

/* the streaming attention's tolerance: bf16 (true), or fp32 for the build
 * whose bf16 keeps fp32 values (EMU_BF16_EXACT, --fp32) */
static bool g_bf16 = true;
/* --as-set: SG_ATTN as the environment has it (a bad value must stop the op) */
static bool g_as_set = false;

/* ---- streaming attention: forward and backward ------------------------- */

struct AttnCase {
    int B, T, H, d;
    int phantom; /* 0 none, 1 logit 0, 2 learned logits */
    int logbias;
    int vsep; /* v in its own buffer of stride C (the value gate's output) instead of the qkv row */
    int pad;  /* rows pad elements longer (NaN, never to be read or written): the kernels' scalar path */
    int ramp; /* log-bias -0.1 (T - 1 - j): the row max rises 6.4 a 64-key tile, past the mma forward's
               * lazy threshold (2^8) at every tile, so O and l are rescaled mid-row */
};

/* elements [from, to) of every row written (no longer the NaN they started as) */
static long written(const Buf &b, long rows, int stride, int from, int to) {
    long n = 0;
    for (long r = 0; r < rows; r++)
        for (int e = from; e < to; e++) n += memcmp(&b.p()[r * stride + e], &NAN_BITS, 4) != 0;
    return n;
}
static void nan_pad(Buf &b, long rows, int stride, int from) {
    for (long r = 0; r < rows; r++)
        for (int e = from; e < stride; e++) b[r * stride + e] = nan_fill();
}

/* f() with SG_ATTN_WARP_ROWS at the choice it does not hold now (the mma
 * forward's and dQ kernel's rows a warp, attention_fwd_mma.cu); gives the
 * rows f ran with, the other's being 48 minus them */
template <class F>
static int with_other_rows(F &&f) {
    const char *was = getenv("SG_ATTN_WARP_ROWS");
    const std::string keep = was ? was : "";
    const int other = keep == "16" ? 32 : 16;
    setenv("SG_ATTN_WARP_ROWS", other == 16 ? "16" : "32", 1);
    f();
    if (was) setenv("SG_ATTN_WARP_ROWS", keep.c_str(), 1);
    else unsetenv("SG_ATTN_WARP_ROWS");
    return other;
}

/* f() with the two-valued setting var at the value it does not hold now
 * (unset counts as off), then var as it was; true when that value was on */
template <class F>
static bool with_flipped(const char *var, const char *on, const char *off, F &&f) {
    const char *was = getenv(var);
    const std::string keep = was ? was : "";
    const bool set_on = keep != on;
    setenv(var, set_on ? on : off, 1);
    f();
    if (was) setenv(var, keep.c_str(), 1);
    else unsetenv(var);
    return set_on;
}

/* SG_ATTN_DQ (how the mma backward gets dQ) and SG_ATTN_BWD_PIPE (its
 * strips pipelined; attention_bwd_mma.cu), each at the choice it does not
 * hold now: true when that was "stored", or on */
template <class F>
static bool with_other_dq(F &&f) {
    return with_flipped("SG_ATTN_DQ", "stored", "recompute", f);
}
template <class F>
static bool with_other_pipe(F &&f) {
    return with_flipped("SG_ATTN_BWD_PIPE", "1", "0", f);
}

/* The traced launches' records (bench_gpu --attn-trace, attention_trace.h)
 * of kernel k (0 forward, 1 dK/dV, 2 dQ): blocks x warps of them, every
 * one written, by lane 0 of warp w of block x + X (y + Y z) at that index,
 * its phases adding up to its cycles, its SM the emulator's (the block
 * index modulo 132), and the loop tiles it worked on those that the grid
 * gives it: tiles(blk, w), worked out in test_attention from the geometry
 * rather than read off the kernels. */
template <class F>
static void check_trace(int k, long blocks, int warps, F &&tiles) {
    const KtraceRec *r = nullptr;
    const char *name = nullptr;
    const long n = sg_attn_trace_records(k, &r, &name);
    CHECK(n == blocks * warps, "%s: trace %d: %ld records, want %ld blocks x %d warps", g_tag.c_str(), k, n, blocks,
          warps);
    if (n != blocks * warps) return;
    long bad = 0, first = -1;
    for (long i = 0; i < n; i++) {
        const KtraceRec &x = r[i];
        uint32_t sum = 0;
        for (int p = 0; p < KTRACE_PHASES; p++) sum += x.phase[p];
        const long blk = i / warps;
        const int w = (int)(i % warps);
        const bool ok = x.sm == (uint32_t)(blk % 132) && x.warp == (uint32_t)w && sum == (uint32_t)x.cycles &&
                        x.cycles > 0 && x.end_ns >= x.start_ns && x.tiles == (uint32_t)tiles(blk, w) &&
                        (x.tiles == 0 || (x.phase[1] > 0 && x.phase[3] > 0));
        if (!ok && first < 0) first = i;
        bad += !ok;
    }
    CHECK(bad == 0, "%s: trace %d (%s): %ld of %ld records wrong, the first %ld (sm %u warp %u tiles %u, want %ld)",
          g_tag.c_str(), k, name, bad, n, first, first >= 0 ? r[first].sm : 0, first >= 0 ? r[first].warp : 0,
          first >= 0 ? r[first].tiles : 0, first >= 0 ? (long)tiles(first / warps, (int)(first % warps)) : 0L);
    KtraceSummary s;
    CHECK(ktrace_summarize(r, n, &s) == 0 && s.missing == 0 && s.bad == 0, "%s: trace %d: summary %ld missing %ld bad",
          g_tag.c_str(), k, s.missing, s.bad);
}

static void test_attention(const AttnCase &c) {
    const int B = c.B, T = c.T, H = c.H, d = c.d, C = H * d, qs = 3 * C + c.pad, vs = c.vsep ? C + c.pad : qs,
              os = C + c.pad;
    const long rows = (long)B * T, nqkv = rows * qs, nv = rows * vs, no = rows * os, nl = (long)B * H * T;
    Buf qkv = normal(nqkv, 1), vbuf = normal(c.vsep ? nv : 0, 1), sink = normal(H, 1), lb = neg_abs_normal(nl, 0.5);
    Buf dout = normal(no, 1), dsink0 = normal(H, 1);
    nan_pad(qkv, rows, qs, 3 * C), nan_pad(dout, rows, os, C);
    if (c.vsep) nan_pad(vbuf, rows, vs, C);
    if (c.ramp)
        for (long bh = 0; bh < (long)B * H; bh++)
            for (int j = 0; j < T; j++) lb[bh * T + j] = -0.1f * (float)(T - 1 - j);
    const Buf qkv0 = qkv, vbuf0 = vbuf, sink0 = sink, lb0 = lb, dout0 = dout;
    float *v = c.vsep ? vbuf.p() : qkv.p() + 2 * C;
    const AttnArgs a = {B, T, H, d, qs, qs, vs, os, c.phantom > 0, c.phantom == 2 ? sink.p() : nullptr,
                        c.logbias ? lb.p() : nullptr};

    Buf o_r(no, 0.f), lse_r(nl, 0.f), o(no), lse(nl);
    op_attention_fwd(o_r.p(), lse_r.p(), qkv.p(), qkv.p() + C, v, &a);
    const long wg0 = sg_attn_wgmma_calls();
    cuda_op_attention_fwd(o.p(), lse.p(), qkv.p(), qkv.p() + C, v, &a);
    same("o", strided(o.p(), rows, C, os, 0), strided(o_r.p(), rows, C, os, 0), g_bf16);
    same("lse", flat(lse.p(), nl), flat(lse_r.p(), nl), g_bf16);
    /* SG_ATTN_WGMMA=1 or 2 under the mma tiles: the warpgroup forward (2:
     * the pipelined one) runs at padded head dims 64 and 128 (the emulated
     * device is an sm_90), the mma forward below them */
    {
        const char *t = getenv("SG_ATTN"), *w = getenv("SG_ATTN_WGMMA");
        const bool want = t && !strcmp(t, "mma") && w && (!strcmp(w, "1") || !strcmp(w, "2")) && d > 32;
        CHECK(sg_attn_wgmma_calls() - wg0 == (want ? 1 : 0), "%s: %ld forwards on the warpgroup products, want %d",
              g_tag.c_str(), sg_attn_wgmma_calls() - wg0, want ? 1 : 0);
    }
    if (os == C) {
        /* Whole rows: the forward also wrote o's bf16 twin, which the next
         * matmul (the attention projection) reads instead of casting o.  It
         * must be taken, and give the bits of the cast: the same matmul on
         * a copy of o at another address, which has no twin. */
        const int N = 24;
        const uint64_t ctr = g_ctr; /* the next cases' inputs stay what they were */
        Buf w = normal((long)N * C, 0.3), y(rows * N), y_ref(rows * N), o_copy = o;
        g_ctr = ctr;
        const long skipped = sg_matmul_casts_skipped();
        cuda_op_matmul_fwd(y.p(), o.p(), w.p(), (int)rows, C, N);
        CHECK(sg_matmul_casts_skipped() - skipped == 1, "%s: the projection did not take o's twin (%ld casts skipped)",
              g_tag.c_str(), sg_matmul_casts_skipped() - skipped);
        cuda_op_matmul_fwd(y_ref.p(), o_copy.p(), w.p(), (int)rows, C, N);
        CHECK(!memcmp(y.p(), y_ref.p(), sizeof(float) * rows * N),
              "%s: the projection through o's twin differs from the cast's bits", g_tag.c_str());
    }

    /* SG_ATTN=cudnn runs on the mma path's operands (its packs, in-place
     * reads and twins), and the mma tiles wherever cuDNN does not take a
     * call (attention_cudnn.cu) */
    const char *tiles_env = getenv("SG_ATTN") ? getenv("SG_ATTN") : "";
    const bool mma_tiles = !strcmp(tiles_env, "mma") || !strcmp(tiles_env, "cudnn");
    if (mma_tiles && d <= 64) {
        /* The mma forward and dQ kernels give a warp one or two 16-row
         * m-tiles: every row sees the same instructions either way, so the
         * bits must be the same.  (The dQ kernel is compared below, with
         * the backward.) */
        Buf o2(no), lse2(nl);
        const int rows_ran =
            with_other_rows([&] { cuda_op_attention_fwd(o2.p(), lse2.p(), qkv.p(), qkv.p() + C, v, &a); });
        CHECK(!memcmp(o2.p(), o.p(), sizeof(float) * no) && !memcmp(lse2.p(), lse.p(), sizeof(float) * nl),
              "%s: the mma forward with %d rows a warp differs from %d rows a warp", g_tag.c_str(), rows_ran,
              48 - rows_ran);
        intact("outputs", o2), intact("outputs", lse2);
    }

    /* each backward from its own forward, as test_gpu_ops */
    Buf dqkv_r(nqkv, 0.f), dv_r(c.vsep ? nv : 0, 0.f), ds_r = dsink0, dlb_r(nl, 0.f);
    Buf dqkv(nqkv), dvb(c.vsep ? nv : 0), ds = dsink0, dlb(nl);
    float *dv_rp = c.vsep ? dv_r.p() : dqkv_r.p() + 2 * C, *dvp = c.vsep ? dvb.p() : dqkv.p() + 2 * C;
    const bool want_ds = c.phantom == 2;
    op_attention_bwd(dqkv_r.p(), dqkv_r.p() + C, dv_rp, want_ds ? ds_r.p() : nullptr,
                     c.logbias ? dlb_r.p() : nullptr, dout.p(), qkv.p(), qkv.p() + C, v, o_r.p(), lse_r.p(), &a);
    /* The host buffers here come and go without op_free, so an address may
     * still name an earlier case's kept copy: forgotten, as op_free would */
    sg_matmul_forget();
    const long reused = sg_attn_packs_reused(), cudnn0 = sg_attn_cudnn_calls(1), wgb0 = sg_attn_wgmma_calls();
    cuda_op_attention_bwd(dqkv.p(), dqkv.p() + C, dvp, want_ds ? ds.p() : nullptr, c.logbias ? dlb.p() : nullptr,
                          dout.p(), qkv.p(), qkv.p() + C, v, o.p(), lse.p(), &a);
    {
        /* the warpgroup dK/dV kernel at padded head dim 64 alone */
        const char *t = getenv("SG_ATTN"), *w = getenv("SG_ATTN_WGMMA");
        const bool want = t && !strcmp(t, "mma") && w && (!strcmp(w, "1") || !strcmp(w, "2")) && d > 32 && d <= 64;
        CHECK(sg_attn_wgmma_calls() - wgb0 == (want ? 1 : 0), "%s: %ld backwards on the warpgroup products, want %d",
              g_tag.c_str(), sg_attn_wgmma_calls() - wgb0, want ? 1 : 0);
    }
    /* the mma backward takes its forward's packed Q, K, V (attention_pack.cu) */
    /* cuDNN takes every call but the log-bias's and those of head dims
     * that are not multiples of 8 */
    const int want_cudnn = !strcmp(tiles_env, "cudnn") && !c.logbias && d % 8 == 0 ? 1 : 0;
    CHECK(sg_attn_cudnn_calls(1) - cudnn0 == want_cudnn, "%s: %ld backwards ran on cuDNN, want %d", g_tag.c_str(),
          sg_attn_cudnn_calls(1) - cudnn0, want_cudnn);
    CHECK(sg_attn_packs_reused() - reused == (mma_tiles ? 1 : 0),
          "%s: the backward took %ld kept packs, want %d", g_tag.c_str(), sg_attn_packs_reused() - reused,
          mma_tiles ? 1 : 0);
    if (!c.vsep && !c.pad) {
        /* dq, dk, dv fill one [rows, 3C] gradient, the qkv matmul's dout:
         * the mma kernels also wrote its bf16 twin, which the matmul
         * backward must take (one cast skipped) with the cast's bits (the
         * same backward on a copy of dqkv); the wmma kernels write none. */
        const int K = 16;
        const bool mma = mma_tiles;
        const uint64_t ctr = g_ctr;
        Buf x = normal(rows * K, 1), w = normal((long)3 * C * K, 0.3), dx(rows * K), dx_ref(rows * K),
            dw((long)3 * C * K, 0.f), dw_ref((long)3 * C * K, 0.f), dqkv_copy = dqkv;
        g_ctr = ctr;
        const long skipped = sg_matmul_casts_skipped();
        cuda_op_matmul_bwd(dx.p(), dw.p(), dqkv.p(), x.p(), w.p(), (int)rows, K, 3 * C);
        CHECK(sg_matmul_casts_skipped() - skipped == (mma ? 1 : 0),
              "%s: the qkv matmul backward skipped %ld casts, want %d (dqkv's twin)", g_tag.c_str(),
              sg_matmul_casts_skipped() - skipped, mma ? 1 : 0);
        cuda_op_matmul_bwd(dx_ref.p(), dw_ref.p(), dqkv_copy.p(), x.p(), w.p(), (int)rows, K, 3 * C);
        CHECK(!memcmp(dx.p(), dx_ref.p(), sizeof(float) * rows * K) &&
                  !memcmp(dw.p(), dw_ref.p(), sizeof(float) * 3 * C * K),
              "%s: the qkv matmul backward through dqkv's twin differs from the cast's bits", g_tag.c_str());
        if (mma) {
            /* dqkv promised to matmuls alone (ops.h, op_matmul_only): the
             * mma backward stores its twin only, and the matmul backward
             * through it still gives the cast's bits */
            const float sentinel = 12345.5f;
            Buf dq2(nqkv, sentinel), ds2 = dsink0, dlb2(nl), dx2(rows * K), dw2((long)3 * C * K, 0.f);
            cuda_op_matmul_only(dq2.p(), nqkv);
            const long unstored = sg_matmul_stores_skipped();
            cuda_op_attention_bwd(dq2.p(), dq2.p() + C, dq2.p() + 2 * C, want_ds ? ds2.p() : nullptr,
                                  c.logbias ? dlb2.p() : nullptr, dout.p(), qkv.p(), qkv.p() + C, v, o.p(), lse.p(),
                                  &a);
            /* its twin is in its own first 2n bytes when a compact layout
             * would give it half its reals (ops.h, op_promised_len): the
             * reals past those stay untouched */
            const long len = cuda_op_promised_len(OP_PROMISE_MATMULS, nqkv);
            long kept = 0;
            for (long i = len < nqkv ? len : 0; i < nqkv; i++) kept += dq2[i] == sentinel;
            CHECK(sg_matmul_stores_skipped() - unstored == 1 && kept == nqkv - (len < nqkv ? len : 0),
                  "%s: promised dqkv: %ld outputs not stored (want 1), %ld of %ld fp32 elements untouched (laid out "
                  "in %ld)",
                  g_tag.c_str(), sg_matmul_stores_skipped() - unstored, kept, nqkv, len);
            cuda_op_matmul_bwd(dx2.p(), dw2.p(), dq2.p(), x.p(), w.p(), (int)rows, K, 3 * C);
            CHECK(!memcmp(dx2.p(), dx_ref.p(), sizeof(float) * rows * K) &&
                      !memcmp(dw2.p(), dw_ref.p(), sizeof(float) * 3 * C * K),
                  "%s: the qkv matmul backward through a promised dqkv differs from the cast's bits",
                  g_tag.c_str());
            CHECK(!memcmp(ds2.p(), ds.p(), sizeof(float) * H) && (!c.logbias || !memcmp(dlb2.p(), dlb.p(),
                                                                                      sizeof(float) * nl)),
                  "%s: dsink or dlogbias differ when dqkv is promised", g_tag.c_str());
            cuda_op_matmul_only_end(dq2.p(), sizeof(float) * nqkv);
        }
    }
    /* the backward again into fresh outputs, bitwise the first's; with_dlb
     * false: a log-bias without its gradient (dlogbias NULL, as ops.h
     * allows) */
    auto bwd_again = [&](const char *how, bool with_dlb = true) {
        Buf dq2(nqkv), dv2(c.vsep ? nv : 0), ds2 = dsink0, dlb2(nl);
        sg_matmul_forget();
        cuda_op_attention_bwd(dq2.p(), dq2.p() + C, c.vsep ? dv2.p() : dq2.p() + 2 * C, want_ds ? ds2.p() : nullptr,
                              c.logbias && with_dlb ? dlb2.p() : nullptr, dout.p(), qkv.p(), qkv.p() + C, v, o.p(),
                              lse.p(), &a);
        CHECK(!memcmp(dq2.p(), dqkv.p(), sizeof(float) * nqkv) &&
                  (!c.vsep || !memcmp(dv2.p(), dvb.p(), sizeof(float) * nv)) &&
                  !memcmp(ds2.p(), ds.p(), sizeof(float) * H) &&
                  (!c.logbias || !with_dlb || !memcmp(dlb2.p(), dlb.p(), sizeof(float) * nl)),
              "%s: the backward %s differs from the first", g_tag.c_str(), how);
        for (const Buf *bb : {&dq2, &dv2, &ds2, &dlb2}) intact("outputs", *bb);
    };
    if (c.logbias) bwd_again("without dlogbias", false);
    const char *wgenv = getenv("SG_ATTN_WGMMA"), *dqenv = getenv("SG_ATTN_DQ"), *wrows = getenv("SG_ATTN_WARP_ROWS");
    const int DP = d <= 16 ? 16 : d <= 32 ? 32 : d <= 64 ? 64 : 128;
    const int wgm = wgenv ? atoi(wgenv) : 0; /* SG_ATTN_WGMMA: the warpgroup forward (1, 2: pipelined) */
    if (!strcmp(tiles_env, "mma") && (!dqenv || strcmp(dqenv, "stored")) && DP >= 64) {
        /* The traced kernels (attention_trace.h): the plain kernels' bits,
         * and the records of every warp of the three launches (under
         * SG_ATTN_WGMMA, of the warpgroup forward and, at d 128, where the
         * dK/dV kernel stays on mma.sync, of all three) */
        Buf o3(no), lse3(nl), dq3(nqkv), dv3(c.vsep ? nv : 0), ds3 = dsink0, dlb3(nl);
        sg_attn_trace_enable(1);
        cuda_op_attention_fwd(o3.p(), lse3.p(), qkv.p(), qkv.p() + C, v, &a);
        cuda_op_attention_bwd(dq3.p(), dq3.p() + C, c.vsep ? dv3.p() : dq3.p() + 2 * C, want_ds ? ds3.p() : nullptr,
                              c.logbias ? dlb3.p() : nullptr, dout.p(), qkv.p(), qkv.p() + C, v, o.p(), lse.p(), &a);
        CHECK(!memcmp(o3.p(), o.p(), sizeof(float) * no) && !memcmp(lse3.p(), lse.p(), sizeof(float) * nl),
              "%s: the traced forward differs from the plain one", g_tag.c_str());
        CHECK(!memcmp(dq3.p(), dqkv.p(), sizeof(float) * nqkv) &&
                  (!c.vsep || !memcmp(dv3.p(), dvb.p(), sizeof(float) * nv)) &&
                  !memcmp(ds3.p(), ds.p(), sizeof(float) * H) &&
                  (!c.logbias || !memcmp(dlb3.p(), dlb.p(), sizeof(float) * nl)),
              "%s: the traced backward differs from the plain one", g_tag.c_str());
        for (const Buf *bb : {&o3, &lse3, &dq3, &dv3, &ds3, &dlb3}) intact("outputs", *bb);
        /* the forward: blocks of 128 queries (the last first: block z has
         * query tile nq - 1 - z), warps of 16 MT rows, a warp's tiles the
         * 64-key tiles up to its last row or T; the dK/dV kernel: blocks of
         * 64 keys (tile z), warps of 16 keys, every query tile from the
         * block's own on; the dQ kernel: blocks of 64 queries (again the
         * last first), warps of 16 MT rows, every key tile to its own */
        const int MT = DP <= 64 && !(wrows && !strcmp(wrows, "16")) ? 2 : 1;
        const int nqf = (T + 127) / 128, nt = (T + 63) / 64, BH = B * H;
        auto last_kt = [&](long blk) {
            const int q0 = (nqf - 1 - (int)(blk / BH)) * 128;
            return ((q0 + 128 < T ? q0 + 128 : T) - 1) / 64;
        };
        if (wgm == 2) /* 8 warps, every one in every pass */
            check_trace(0, (long)BH * nqf, 8, [&](long blk, int) { return last_kt(blk) + 1; });
        else if (wgm == 1) /* 8 warps; a warpgroup's 64 rows skip the tiles past them */
            check_trace(0, (long)BH * nqf, 8, [&](long blk, int w) {
                const int gq0 = (nqf - 1 - (int)(blk / BH)) * 128 + 64 * (w >> 2), glast = gq0 + 63;
                return gq0 < T ? (glast / 64 < last_kt(blk) ? glast / 64 : last_kt(blk)) + 1 : 0;
            });
        else
            check_trace(0, (long)BH * nqf, 8 / MT, [&](long blk, int w) {
                const int q0 = (nqf - 1 - (int)(blk / BH)) * 128, wq0 = q0 + w * 16 * MT, wlast = wq0 + 16 * MT - 1;
                return wq0 < T ? (wlast / 64 < last_kt(blk) ? wlast / 64 : last_kt(blk)) + 1 : 0;
            });
        const KtraceRec *untraced = nullptr;
        if (wgm && DP == 64) /* the warpgroup dK/dV kernel: not traced */
            CHECK(sg_attn_trace_records(1, &untraced, nullptr) == 0, "%s: records of an untraced dK/dV kernel",
                  g_tag.c_str());
        else
            check_trace(1, (long)BH * nt, 4, [&](long blk, int w) {
                const int kt = (int)(blk / BH);
                return kt * 64 + w * 16 < T ? nt - kt : 0;
            });
        check_trace(2, (long)BH * nt, 4 / MT, [&](long blk, int w) {
            const int qt = nt - 1 - (int)(blk / BH);
            return qt * 64 + w * 16 * MT < T ? qt + 1 : 0;
        });
        sg_attn_trace_enable(0);
        const KtraceRec *none = nullptr;
        CHECK(sg_attn_trace_records(0, &none, nullptr) == 0 && !none, "%s: records left after tracing ended",
              g_tag.c_str());
    }
    if (mma_tiles) {
        /* After an op_free (an address may come back for another buffer)
         * the kept pack is not taken: the backward packs Q, K and V again,
         * and gives the same bits. */
        const long r0 = sg_attn_packs_reused();
        sg_count_free();
        bwd_again("with Q, K, V packed again after an op_free");
        CHECK(sg_attn_packs_reused() == r0, "%s: a kept pack was taken after an op_free", g_tag.c_str());
    }
    if (mma_tiles && d <= 64) with_other_rows([&] { bwd_again("with the other SG_ATTN_WARP_ROWS"); });
    if (mma_tiles) {
        /* dQ from the dS tiles the dK/dV kernel stored, or recomputed in
         * the dq kernel: the same dS and the same order of products, so
         * the same bits (with either rows a warp) */
        const long st0 = sg_attn_dq_stored(), cu0 = sg_attn_cudnn_calls(1);
        const bool stored = with_other_dq([&] { bwd_again("with the other SG_ATTN_DQ"); });
        const int want = stored && sg_attn_cudnn_calls(1) == cu0 ? 1 : 0; /* cuDNN has no dS to store */
        CHECK(sg_attn_dq_stored() - st0 == want, "%s: %ld backwards formed dQ from the stored dS, want %d",
              g_tag.c_str(), sg_attn_dq_stored() - st0, want);
        if (d <= 64)
            with_other_dq([&] { with_other_rows([&] { bwd_again("with the other SG_ATTN_DQ and SG_ATTN_WARP_ROWS"); }); });
    }
    if (mma_tiles && DP == 64) {
        /* the strips pipelined or not: the same operations on every sum in
         * the same order, so the same bits; with either rows a warp and dQ
         * stored or recomputed.  Pipelined, each backward on the mma tiles
         * runs the dK/dV kernel (unless on the warpgroup products) and the
         * dq kernel (unless dQ is stored) so. */
        const long p0 = sg_attn_bwd_piped(), cu0 = sg_attn_cudnn_calls(1), wg0 = sg_attn_wgmma_calls();
        const bool piped = with_other_pipe([&] { bwd_again("with the other SG_ATTN_BWD_PIPE"); });
        const bool stored = dqenv && !strcmp(dqenv, "stored");
        const long want = !piped || sg_attn_cudnn_calls(1) != cu0 ? 0 : (sg_attn_wgmma_calls() == wg0) + !stored;
        CHECK(sg_attn_bwd_piped() - p0 == want, "%s: %ld kernels ran with the strips pipelined, want %ld",
              g_tag.c_str(), sg_attn_bwd_piped() - p0, want);
        with_other_pipe([&] { with_other_rows([&] { bwd_again("with the other SG_ATTN_BWD_PIPE and SG_ATTN_WARP_ROWS"); }); });
        with_other_pipe([&] { with_other_dq([&] { bwd_again("with the other SG_ATTN_BWD_PIPE and SG_ATTN_DQ"); }); });
    }
    if (mma_tiles && g_bf16) { /* (the --fp32 build's bf16 is not 16 bits) */
        /* qkv and dO stored in bf16 (ops.h, op_attention_operand): the
         * kernels read q, k, v and dO in place (d a padded head size, rows
         * 16-byte aligned), or the packing copies their bf16 (a padded row:
         * the packing's scalar loads), and either way the bits are those of
         * the same ops on fp32 tensors of the same values */
        auto as_bf16 = [](const Buf &x, Buf &r, Buf &b) { /* r: x rounded, fp32; b: its bf16, promised */
            uint16_t *hb = reinterpret_cast<uint16_t *>(b.p());
            for (size_t i = 0; i < x.n; i++) {
                uint32_t u;
                memcpy(&u, x.p() + i, 4);
                if ((u & 0x7f800000u) != 0x7f800000u) u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
                memcpy(&r[i], &u, 4);
                hb[i] = (uint16_t)(u >> 16);
            }
            cuda_op_attention_operand(b.p(), (long)b.n);
        };
        /* v apart (the value gate's vg) stored in fp32, then in bf16 too (promised as an attention operand) */
        for (int vprom = 0; vprom <= (c.vsep ? 1 : 0); vprom++) {
            Buf qr(nqkv), qb(nqkv), gr(no), gb(no), vvr(vprom ? nv : 0), vvb(vprom ? nv : 0); /* qkv, dO, v */
            as_bf16(qkv, qr, qb), as_bf16(dout, gr, gb);
            if (vprom) as_bf16(vbuf, vvr, vvb);
            float *vr = vprom ? vvr.p() : c.vsep ? v : qr.p() + 2 * C, *vb = vprom ? vvb.p() : c.vsep ? v : qb.p() + 2 * C;
            Buf o1(no), l1(nl), o2(no), l2(nl), g1(nqkv), g2(nqkv), dv1(c.vsep ? nv : 0), dv2(c.vsep ? nv : 0);
            Buf s1 = dsink0, s2 = dsink0, b1(nl), b2(nl);
            sg_matmul_forget();
            const long ip0 = sg_attn_inplace_reads();
            cuda_op_attention_fwd(o1.p(), l1.p(), qb.p(), qb.p() + C, vb, &a);
            cuda_op_attention_bwd(g1.p(), g1.p() + C, c.vsep ? dv1.p() : g1.p() + 2 * C, want_ds ? s1.p() : nullptr,
                                  c.logbias ? b1.p() : nullptr, gb.p(), qb.p(), qb.p() + C, vb, o1.p(), l1.p(), &a);
            const long ip = sg_attn_inplace_reads() - ip0;
            cuda_op_attention_fwd(o2.p(), l2.p(), qr.p(), qr.p() + C, vr, &a);
            cuda_op_attention_bwd(g2.p(), g2.p() + C, c.vsep ? dv2.p() : g2.p() + 2 * C, want_ds ? s2.p() : nullptr,
                                  c.logbias ? b2.p() : nullptr, gr.p(), qr.p(), qr.p() + C, vr, o2.p(), l2.p(), &a);
            cuda_op_matmul_only_end(qb.p(), sizeof(float) * nqkv);
            cuda_op_matmul_only_end(gb.p(), sizeof(float) * no);
            if (vprom) cuda_op_matmul_only_end(vvb.p(), sizeof(float) * nv);
            const bool dp = d == 16 || d == 32 || d == 64 || d == 128;
            const long want = dp ? (qs % 8 == 0 ? (c.vsep ? 4 : 6) : 0) + (vprom && vs % 8 == 0 ? 2 : 0) + (os % 8 == 0)
                                 : 0;
            CHECK(ip == want, "%s: %ld operands read in place from the bf16 qkv%s, want %ld", g_tag.c_str(), ip,
                  vprom ? " and v" : "", want);
            CHECK(!memcmp(o1.p(), o2.p(), sizeof(float) * no) && !memcmp(l1.p(), l2.p(), sizeof(float) * nl) &&
                      !memcmp(g1.p(), g2.p(), sizeof(float) * nqkv) &&
                      !memcmp(dv1.p(), dv2.p(), sizeof(float) * dv1.n) && !memcmp(s1.p(), s2.p(), sizeof(float) * H) &&
                      !memcmp(b1.p(), b2.p(), sizeof(float) * nl),
                  "%s: attention on the qkv%s and dO stored in bf16 differs from fp32 tensors of their values",
                  g_tag.c_str(), vprom ? ", v" : "");
            for (const Buf *bb : {&o1, &l1, &g1, &dv1, &s1, &b1, &qb, &gb, &vvb}) intact("outputs", *bb);
        }
    }
    const std::vector<double> dq_e = strided(dqkv.p(), rows, C, qs, 0), dq_c = strided(dqkv_r.p(), rows, C, qs, 0);
    const std::vector<double> dk_e = strided(dqkv.p(), rows, C, qs, C), dk_c = strided(dqkv_r.p(), rows, C, qs, C);
    same("dv", strided(dvp, rows, C, vs, 0), strided(dv_rp, rows, C, vs, 0), g_bf16);
    /* D_i = dO_i . o_i per (row, head), and the sum of its terms' magnitudes */
    std::vector<double> D(rows * H), Dabs(rows * H);
    for (long r = 0; r < rows; r++)
        for (int h = 0; h < H; h++)
            for (int e = 0; e < d; e++) {
                const double x = (double)dout[r * os + h * d + e] * o_r[r * os + h * d + e];
                D[r * H + h] += x, Dabs[r * H + h] += std::fabs(x);
            }
    if (T == 1 && !c.phantom) {
        /* One key and no phantom: P = 1, so dS = dP - D is exactly 0, and so
         * are dq, dk and dlogbias; each side returns the rounding difference
         * of two d-term sums of dO_e v_e (tests/gpu/test_gpu_ops.c compares
         * dq/dk/dv as one tensor, where dv sets the scale, and skips
         * dlogbias).  Bound on |dS|, both sides together, with a margin of
         * 4: eps = 8 d 2^-24 max_i sum_e |dO_ie o_ie|; dq = dS k / sqrt(d),
         * dk = dS q / sqrt(d) (twice: their operands are bf16-rounded). */
        double eps = 0, qmax = 0, kmax = 0;
        for (double x : Dabs) eps = std::fmax(eps, 8.0 * d * std::ldexp(1.0, -24) * x);
        for (long r = 0; r < rows; r++)
            for (int e = 0; e < C; e++) {
                qmax = std::fmax(qmax, std::fabs(qkv[r * qs + e]));
                kmax = std::fmax(kmax, std::fabs(qkv[r * qs + C + e]));
            }
        noise("dq", dq_e, dq_c, 2 * eps * kmax / std::sqrt(d));
        noise("dk", dk_e, dk_c, 2 * eps * qmax / std::sqrt(d));
        if (c.logbias) noise("dlogbias", flat(dlb.p(), nl), flat(dlb_r.p(), nl), eps);
    } else if (T == 1) {
        /* One key and the phantom: dS = P (dP - D) = P (1 - P) dP, which
         * cancels as P nears 1 (a sink logit far below the key's), while
         * each side's dP and D carry bf16 rounding of the order of
         * 2^-8 sum_e |dO_e v_e|.  So the scale is that sum's largest,
         * times q's (dk) or k's (dq) largest / sqrt(d), where it exceeds
         * the result's own. */
        double sv = 0, qmax = 0, kmax = 0;
        for (long r = 0; r < rows; r++)
            for (int h = 0; h < H; h++) {
                double t = 0;
                for (int e = 0; e < d; e++) t += std::fabs((double)dout[r * os + h * d + e] * v[r * vs + h * d + e]);
                sv = std::fmax(sv, t);
            }
        for (long r = 0; r < rows; r++)
            for (int e = 0; e < C; e++) {
                qmax = std::fmax(qmax, std::fabs(qkv[r * qs + e]));
                kmax = std::fmax(kmax, std::fabs(qkv[r * qs + C + e]));
            }
        auto big = [](const std::vector<double> &x) {
            double m = 0;
            for (double y : x) m = std::fmax(m, std::fabs(y));
            return m;
        };
        same("dq", dq_e, dq_c, g_bf16, std::fmax(big(dq_c), sv * kmax / std::sqrt(d)));
        same("dk", dk_e, dk_c, g_bf16, std::fmax(big(dk_c), sv * qmax / std::sqrt(d)));
        if (c.logbias) same("dlogbias", flat(dlb.p(), nl), flat(dlb_r.p(), nl), g_bf16, std::fmax(big(flat(dlb_r.p(), nl)), sv));
    } else {
        same("dq", dq_e, dq_c, g_bf16);
        same("dk", dk_e, dk_c, g_bf16);
        if (c.logbias) same("dlogbias", flat(dlb.p(), nl), flat(dlb_r.p(), nl), g_bf16);
    }
    if (want_ds) {
        /* dsink_h += -sum_{b,i} exp(c_h - LSE_i) D_i: a sum whose terms may
         * cancel, with each other and with the value it is added to, so its
         * bf16 rounding error scales with the terms, not with the result:
         * the scale is the larger of |dsink| and sum_{b,i} exp(c_h - LSE_i) |D_i|. */
        double scale = 0;
        for (int h = 0; h < H; h++) {
            double t = 0;
            for (long r = 0; r < rows; r++) {
                const long bh = (r / T) * H + h, i = r % T;
                t += std::exp((double)sink[h] - lse_r[bh * T + i]) * std::fabs(D[r * H + h]);
            }
            scale = std::fmax(scale, std::fmax(t, std::fabs(ds_r[h])));
        }
        same("dsink (accumulated)", flat(ds.p(), H), flat(ds_r.p(), H), g_bf16, scale);
    } else {
        CHECK(!memcmp(ds.p(), dsink0.p(), sizeof(float) * H), "%s: dsink written without a learned sink",
              g_tag.c_str());
    }
    /* what no op may write: the rows' padding; the qkv row's v part when dv has its own buffer */
    const long wr = written(o, rows, os, C, os) + written(dqkv, rows, qs, 3 * C, qs) +
                    (c.vsep ? written(dqkv, rows, qs, 2 * C, 3 * C) + written(dvb, rows, vs, C, vs) : 0);
    CHECK(!wr, "%s: %ld elements written outside the op's rows", g_tag.c_str(), wr);
    for (const Buf *b : {&o, &lse, &dqkv, &dvb, &ds, &dlb}) intact("outputs", *b);
    unchanged("qkv", qkv, qkv0), unchanged("v", vbuf, vbuf0), unchanged("sink", sink, sink0);
    unchanged("logbias", lb, lb0), unchanged("dout", dout, dout0);
    Digest dg;
    for (const Buf *b : {&o, &lse, &dqkv, &dvb, &ds, &dlb}) dg.add(*b);
    digest_out(dg);
}

/* ---- decode attention ---------------------------------------------------- */

/* ---- the value gate's backward with the attention's ---------------------
 * op_attention_gate_bwd on the value gate's attention (v apart, stride C;
 * no log-bias) from the CPU's forward: against the CPU op (the two ops in
 * turn) at the bf16 rule, the parameter gradients' increments scaled by
 * their largest; and, on the emulated device, against the unfused pair
 * cuda_op_attention_bwd then cuda_op_gate_bwd on the same inputs: dq and dk
 * and dsink bitwise (the same kernels), dv and the parameters' gradients at
 * fp32 tolerance (the fused epilogue sums each row's dot products and the
 * partials in another order).  Under SG_ATTN=mma the op must have fused
 * (sg_attn_gate_fused), under the others not. */
struct GateBwdCase {
    int B, T, H, d;
    int kind;    /* GATE_NORM or GATE_PROJ */
    int phantom; /* as AttnCase's */
};

static void test_attention_gate(const GateBwdCase &c) {
    const int B = c.B, T = c.T, H = c.H, d = c.d, C = H * d;
    const long rows = (long)B * T, nqkv = rows * 3 * C, nv = rows * C, nl = (long)B * H * T;
    Buf qkv = normal(nqkv, 1), dout = normal(nv, 1), sink = normal(H, 1), dsink0 = normal(H, 1);
    Buf tau = normal(H, 0.3), w = normal((long)H * d, 0.3), bias = normal(H, 0.5);
    for (int h = 0; h < H; h++) tau[h] += 1.f; /* near a head's typical ||v|| / sqrt(d) */
    const Buf dtau0 = normal(H, 0.1), dw0 = normal((long)H * d, 0.1), db0 = normal(H, 0.1);
    const GateParams p = {c.kind, SLOT_VALUE, 8.f, tau.p(), w.p(), bias.p()};
    Buf g(nl), vg(nv), o(nv), lse(nl);
    op_gate_fwd(g.p(), vg.p(), nullptr, qkv.p() + 2 * C, 3 * C, &p, B, T, H, d);
    const AttnArgs a = {B, T, H, d, 3 * C, 3 * C, C, C, c.phantom > 0, c.phantom == 2 ? sink.p() : nullptr, nullptr};
    op_attention_fwd(o.p(), lse.p(), qkv.p(), qkv.p() + C, vg.p(), &a);
    const Buf qkv0 = qkv, dout0 = dout, g0 = g, vg0 = vg, o0 = o, lse0 = lse;
    const bool want_ds = c.phantom == 2;

    struct Out { /* one run's outputs, accumulators from the same starts */
        Buf dqkv, dvg, ds, dtau, dw, db;
        Out(long nq, long nvg, const Buf &s0, const Buf &t0, const Buf &w0, const Buf &b0)
            : dqkv(nq), dvg(nvg), ds(s0), dtau(t0), dw(w0), db(b0) {}
        AttnGateBwd args(const GateParams *p, const float *v, const float *g, int C) {
            return {p, v, 3 * C, g, dqkv.p() + 2 * C, 3 * C, dtau.p(), dw.p(), db.p(), dvg.p()};
        }
    };
    Out r(nqkv, nv, dsink0, dtau0, dw0, db0), e(nqkv, nv, dsink0, dtau0, dw0, db0), u(nqkv, nv, dsink0, dtau0, dw0, db0);
    const AttnGateBwd gr = r.args(&p, qkv.p() + 2 * C, g.p(), C), ge = e.args(&p, qkv.p() + 2 * C, g.p(), C);
    op_attention_gate_bwd(r.dqkv.p(), r.dqkv.p() + C, want_ds ? r.ds.p() : nullptr, dout.p(), qkv.p(), qkv.p() + C,
                          vg.p(), o.p(), lse.p(), &a, &gr);
    sg_matmul_forget();
    const long f0 = sg_attn_gate_fused();
    cuda_op_attention_gate_bwd(e.dqkv.p(), e.dqkv.p() + C, want_ds ? e.ds.p() : nullptr, dout.p(), qkv.p(),
                               qkv.p() + C, vg.p(), o.p(), lse.p(), &a, &ge);
    const char *tiles = getenv("SG_ATTN") ? getenv("SG_ATTN") : "";
    const long want_fused = !strcmp(tiles, "mma") ? 1 : 0;
    CHECK(sg_attn_gate_fused() - f0 == want_fused, "%s: %ld backwards fused the gate, want %ld", g_tag.c_str(),
          sg_attn_gate_fused() - f0, want_fused);

    same("dq, dk and the gate's dv", flat(e.dqkv), flat(r.dqkv), g_bf16);
    /* The accumulated parameter gradients: their increments, sums over the
     * rows of dz_j (times v_j for dw) of either sign, where each dz_j
     * carries dvg's bf16 error.  The rule's scale is the largest sum of
     * the terms' magnitudes, from the CPU's dvg: dz_j = (dvg_j . v_j) g_j (1 - g_j). */
    double sz = 0, szv = 0; /* max over h of sum_j |dz_j|, and over (h, k) of sum_j |dz_j v_jk| */
    for (int h = 0; h < H; h++) {
        double tz = 0;
        std::vector<double> tzv(d, 0.0);
        for (long row = 0; row < rows; row++) {
            const float *vr = qkv.p() + row * 3 * C + 2 * C + (long)h * d, *dr = r.dvg.p() + row * C + (long)h * d;
            double a_ = 0;
            for (int k = 0; k < d; k++) a_ += (double)dr[k] * vr[k];
            const double gj = g[((row / T) * H + h) * T + row % T], dz = std::fabs(a_ * gj * (1 - gj));
            tz += dz;
            for (int k = 0; k < d; k++) tzv[k] += dz * std::fabs(vr[k]);
        }
        sz = std::fmax(sz, tz);
        for (int k = 0; k < d; k++) szv = std::fmax(szv, tzv[k]);
    }
    auto incr = [](const Buf &x, const Buf &x0) {
        std::vector<double> v(x.n);
        for (size_t i = 0; i < x.n; i++) v[i] = (double)x[i] - (double)x0[i];
        return v;
    };
    if (c.kind == GATE_PROJ) {
        same("dw (accumulated)", incr(e.dw, dw0), incr(r.dw, dw0), g_bf16, szv);
        same("db (accumulated)", incr(e.db, db0), incr(r.db, db0), g_bf16, sz);
    } else {
        same("dtau (accumulated)", incr(e.dtau, dtau0), incr(r.dtau, dtau0), g_bf16, p.beta * sz);
    }

    /* the strips pipelined or not (SG_ATTN_BWD_PIPE, head dim 64): every
     * output bitwise the fused op's above, the gate's epilogue included */
    if (want_fused && d > 32 && d <= 64) {
        Out x(nqkv, nv, dsink0, dtau0, dw0, db0);
        const AttnGateBwd gx = x.args(&p, qkv.p() + 2 * C, g.p(), C);
        sg_matmul_forget();
        with_other_pipe([&] {
            cuda_op_attention_gate_bwd(x.dqkv.p(), x.dqkv.p() + C, want_ds ? x.ds.p() : nullptr, dout.p(), qkv.p(),
                                       qkv.p() + C, vg.p(), o.p(), lse.p(), &a, &gx);
        });
        CHECK(!memcmp(x.dqkv.p(), e.dqkv.p(), sizeof(float) * nqkv) && !memcmp(x.ds.p(), e.ds.p(), sizeof(float) * H) &&
                  !memcmp(x.dtau.p(), e.dtau.p(), sizeof(float) * H) &&
                  !memcmp(x.dw.p(), e.dw.p(), sizeof(float) * H * d) && !memcmp(x.db.p(), e.db.p(), sizeof(float) * H),
              "%s: the fused backward with the other SG_ATTN_BWD_PIPE differs", g_tag.c_str());
    }

    /* the unfused pair on the emulated device */
    sg_matmul_forget();
    cuda_op_attention_bwd(u.dqkv.p(), u.dqkv.p() + C, u.dvg.p(), want_ds ? u.ds.p() : nullptr, nullptr, dout.p(),
                          qkv.p(), qkv.p() + C, vg.p(), o.p(), lse.p(), &a);
    cuda_op_gate_bwd(u.dqkv.p() + 2 * C, 3 * C, u.dtau.p(), u.dw.p(), u.db.p(), u.dvg.p(), nullptr, qkv.p() + 2 * C,
                     3 * C, g.p(), &p, B, T, H, d);
    CHECK(strided(e.dqkv.p(), rows, 2 * C, 3 * C, 0) == strided(u.dqkv.p(), rows, 2 * C, 3 * C, 0) &&
              !memcmp(e.ds.p(), u.ds.p(), sizeof(float) * H),
          "%s: dq, dk or dsink differ from the unfused ops'", g_tag.c_str());
    same("the gate's dv against the unfused ops", strided(e.dqkv.p(), rows, C, 3 * C, 2 * C),
         strided(u.dqkv.p(), rows, C, 3 * C, 2 * C), false);
    same("dw against the unfused ops", incr(e.dw, dw0), incr(u.dw, dw0), false);
    same("db against the unfused ops", incr(e.db, db0), incr(u.db, db0), false);
    same("dtau against the unfused ops", incr(e.dtau, dtau0), incr(u.dtau, dtau0), false);

    for (Out *x : {&r, &e, &u})
        for (const Buf *b : {&x->dqkv, &x->dvg, &x->ds, &x->dtau, &x->dw, &x->db}) intact("outputs", *b);
    unchanged("qkv", qkv, qkv0), unchanged("dout", dout, dout0), unchanged("g", g, g0), unchanged("vg", vg, vg0);
    unchanged("o", o, o0), unchanged("lse", lse, lse0);
    Digest dg;
    for (const Buf *b : {&e.dqkv, &e.ds, &e.dtau, &e.dw, &e.db}) dg.add(*b);
    digest_out(dg);
}

struct DecodeCase {
    int B, T, H, d, phantom, logbias, qshared;
};

/* As test_gpu_ops: K and V interleaved (stride 2C), out with a padded row
 * stride whose padding must survive, every output starting as the same
 * junk on both sides; the backward from the reference's forward. */
static void test_decode(const DecodeCase &c) {
    const int B = c.B, T = c.T, H = c.H, d = c.d, C = H * d, kvs = 2 * C, os = C + 8, qs = c.qshared ? 0 : C;
    const long nq = c.qshared ? C : (long)B * C, nkv = (long)B * T * kvs, no = (long)B * os, nbh = (long)B * H,
               nl = nbh * T, ndq = (long)B * C;
    Buf q = normal(nq, 1), kv = normal(nkv, 1), sink = normal(H, 1), lb = neg_abs_normal(nl, 0.5);
    Buf o_r = normal(no, 1), lse_r = normal(nbh, 1), dout = normal(no, 1);
    Buf dq_r = normal(ndq, 1), dkv_r = normal(nkv, 1), dlb_r = normal(nl, 1), ds_r = normal(H, 1);
    Buf o = o_r, lse = lse_r, dq = dq_r, dkv = dkv_r, dlb = dlb_r, ds = ds_r;
    const Buf q0 = q, kv0 = kv, sink0 = sink, lb0 = lb, dout0 = dout;
    const AttnArgs a = {B, T, H, d, qs, kvs, kvs, os, c.phantom > 0, c.phantom == 2 ? sink.p() : nullptr,
                        c.logbias ? lb.p() : nullptr};
    op_attention_decode_fwd(o_r.p(), lse_r.p(), q.p(), kv.p(), kv.p() + C, &a);
    cuda_op_attention_decode_fwd(o.p(), lse.p(), q.p(), kv.p(), kv.p() + C, &a);
    same("out", flat(o.p(), no), flat(o_r.p(), no), false);
    same("lse", flat(lse.p(), nbh), flat(lse_r.p(), nbh), false);
    Buf o_emu = o, lse_emu = lse;
    memcpy(o.p(), o_r.p(), sizeof(float) * no), memcpy(lse.p(), lse_r.p(), sizeof(float) * nbh);
    op_attention_decode_bwd(dq_r.p(), dkv_r.p(), dkv_r.p() + C, c.phantom == 2 ? ds_r.p() : nullptr,
                            c.logbias ? dlb_r.p() : nullptr, dout.p(), q.p(), kv.p(), kv.p() + C, o_r.p(), lse_r.p(),
                            &a);
    cuda_op_attention_decode_bwd(dq.p(), dkv.p(), dkv.p() + C, c.phantom == 2 ? ds.p() : nullptr,
                                 c.logbias ? dlb.p() : nullptr, dout.p(), q.p(), kv.p(), kv.p() + C, o.p(), lse.p(), &a);
    same("dq", flat(dq.p(), ndq), flat(dq_r.p(), ndq), false);
    same("dk/dv", flat(dkv.p(), nkv), flat(dkv_r.p(), nkv), false);
    if (c.phantom == 2) same("dsink (accumulated)", flat(ds.p(), H), flat(ds_r.p(), H), false);
    if (c.logbias) same("dlogbias", flat(dlb.p(), nl), flat(dlb_r.p(), nl), false);
    for (const Buf *b : {&o_emu, &lse_emu, &dq, &dkv, &dlb, &ds}) intact("outputs", *b);
    unchanged("q", q, q0), unchanged("kv", kv, kv0), unchanged("sink", sink, sink0);
    unchanged("logbias", lb, lb0), unchanged("dout", dout, dout0);
    Digest dg;
    for (const Buf *b : {&o_emu, &lse_emu, &dq, &dkv, &dlb, &ds}) dg.add(*b);
    digest_out(dg);
}

/* ---- explicit attention (probabilities, apply) ---------------------------- */

struct ProbsCase {
    int B, T, H, d, phantom, logbias;
};

/* As test_gpu_ops: p must be written everywhere (it starts as NaN here),
 * rows sum to one, zeros above the diagonal (and in the phantom column
 * without a phantom); apply on the reference's p and on a dense random p,
 * into out with a padded row stride whose padding must survive. */
static void test_probs(const ProbsCase &c) {
    const int B = c.B, T = c.T, H = c.H, d = c.d, C = H * d, qs = 3 * C, os = C + 8;
    const long nq = (long)B * T * qs, no = (long)B * T * os, np = (long)B * H * T * (T + 1);
    Buf qkv = normal(nq, 1), sink = normal(H, 1), lb = neg_abs_normal((long)B * H * T, 0.5);
    Buf dense = normal(np, 0.1), o0 = normal(no, 1);
    const Buf qkv0 = qkv, sink0 = sink, lb0 = lb;
    const AttnArgs a = {B, T, H, d, qs, qs, qs, os, c.phantom > 0, c.phantom == 2 ? sink.p() : nullptr,
                        c.logbias ? lb.p() : nullptr};
    Buf p_r(np, 0.f), p(np);
    op_attention_probs(p_r.p(), qkv.p(), qkv.p() + C, &a);
    cuda_op_attention_probs(p.p(), qkv.p(), qkv.p() + C, &a);
    same("p", flat(p.p(), np), flat(p_r.p(), np), false);
    long badsum = -1, badzero = -1;
    double worst = 0;
    for (long r = 0; r < (long)B * H * T; r++) {
        const float *row = p.p() + r * (T + 1);
        const int i = (int)(r % T);
        double s = 0;
        for (int j = 0; j <= T; j++) s += row[j];
        worst = std::isnan(s) ? INFINITY : std::fmax(worst, std::fabs(s - 1));
        if (!(std::fabs(s - 1) <= 1e-5) && badsum < 0) badsum = r;
        for (int j = i + 1; j < T; j++)
            if (row[j] != 0 && badzero < 0) badzero = r;
        if (!c.phantom && row[T] != 0 && badzero < 0) badzero = r;
    }
    CHECK(badsum < 0, "%s: p row %ld does not sum to 1 within 1e-5 (worst %.3g)", g_tag.c_str(), badsum, worst);
    CHECK(badzero < 0, "%s: p row %ld has a nonzero entry above the diagonal or in an absent phantom's column",
          g_tag.c_str(), badzero);
    Buf o_r = o0, o = o0, od_r = o0, od = o0;
    op_attention_apply(o_r.p(), p_r.p(), qkv.p() + 2 * C, &a);
    cuda_op_attention_apply(o.p(), p_r.p(), qkv.p() + 2 * C, &a);
    same("apply", flat(o.p(), no), flat(o_r.p(), no), false);
    op_attention_apply(od_r.p(), dense.p(), qkv.p() + 2 * C, &a);
    cuda_op_attention_apply(od.p(), dense.p(), qkv.p() + 2 * C, &a);
    same("apply (dense p)", flat(od.p(), no), flat(od_r.p(), no), false);
    for (const Buf *b : {&p, &o, &od}) intact("outputs", *b);
    unchanged("qkv", qkv, qkv0), unchanged("sink", sink, sink0), unchanged("logbias", lb, lb0);
    /* The digest holds the device's work alone: o applies the CPU's p_r,
     * whose bits depend on the BLAS the build chose (BLIS, OpenBLAS or MKL,
     * by measurement), so it takes the device's p applied instead */
    Buf od_p = o0;
    cuda_op_attention_apply(od_p.p(), p.p(), qkv.p() + 2 * C, &a);
    Digest dg;
    for (const Buf *b : {&p, &od_p, &od}) dg.add(*b);
    digest_out(dg);
}

/* ---- the battery --------------------------------------------------------- */

static const char *const PH[] = {"none", "zero", "learned"};

int main(int argc, char **argv) {
    /* The batteries name their tile kernels: unset, SG_ATTN means wmma here,
     * as it did when wmma was the default (the default itself, mma, is
     * checked against SG_ATTN=mma at the sgtrain level) */
    if (!getenv("SG_ATTN")) setenv("SG_ATTN", "wmma", 1);
    for (; argc > 1 && argv[1][0] == '-' && argv[1][1] == '-'; argc--, argv++)
        if (!strcmp(argv[1], "--fp32")) g_bf16 = false, emu::use_largest_smem();
        else if (!strcmp(argv[1], "--as-set")) g_as_set = true;
        else if (battery_shard_option(argc, argv)) argc--, argv++;
        else {
            fprintf(stderr, "%s: unknown option %s\n", argv[0], argv[1]);
            return 2;
        }
    const char *filter =
        battery_args("attention_emu_test", "[--fp32] [--as-set] [--shard I/N] SEED DIGESTS [FILTER]", argc, argv);
    if (!filter) return 2;
    unsetenv("SG_MATMUL_KEEP"); /* twins on: test_attention checks the output's */
    Cases cases(filter, 11);
    char tag[128];

    /* Streaming attention: every (T, d, phantom, log-bias) of the grid
     * T in {1, 7, 64, 130} (130: three query and key tiles, the last of
     * them 2 rows long, so the diagonal tile runs past T), d in {16, 64,
     * 128}, phantom none / logit 0 / learned, log-bias or not; H = 2, with
     * B (1, 2) and the place of v (the qkv row, stride 3C, or the value
     * gate's own buffer, stride C) alternating.  Then the scalar path that
     * the model's strides never take (rows not a multiple of 4 floats, d
     * not a multiple of 16). */
    std::vector<AttnCase> attn;
    int alt = 0;
    for (int T : {1, 7, 64, 130})
        for (int d : {16, 64, 128})
            for (int ph = 0; ph <= 2; ph++)
                for (int lb = 0; lb <= 1; lb++, alt++)
                    attn.push_back({1 + (alt & 1), T, 2, d, ph, lb, (alt >> 1) & 1, 0, 0});
    attn.push_back({1, 300, 2, 128, 2, 1, 1, 0, 0});
    attn.push_back({1, 70, 2, 24, 2, 1, 0, 1, 0});
    attn.push_back({2, 33, 2, 40, 1, 0, 1, 3, 0});
    attn.push_back({2, 20, 2, 30, 2, 0, 0, 0, 0}); /* d 30: no cuDNN engine, the tiles run it under cudnn */
    attn.push_back({1, 300, 2, 64, 0, 1, 0, 0, 1});
    attn.push_back({2, 260, 2, 64, 2, 1, 1, 0, 1});
    /* ... each under both tile kernels and cuDNN (SG_ATTN; attention_cuda.h;
     * cuDNN is the emulator's CPU twin, tests/emu/emu_cudnn.cpp), or with
     * --as-set only under the one the environment selects */
    const char *env_tiles = getenv("SG_ATTN") && *getenv("SG_ATTN") ? getenv("SG_ATTN") : "wmma";
    const std::vector<const char *> kerns = g_as_set ? std::vector<const char *>{env_tiles}
                                                     : std::vector<const char *>{"wmma", "mma", "cudnn"};
    /* and the mma tiles with the forward and dK/dV on the warpgroup
     * products (SG_ATTN_WGMMA=1, attention_fwd_wgmma.cu; wgmma2: =2, the
     * pipelined forward), at the head dims they take */
    std::vector<const char *> attn_kerns = kerns;
    if (!g_as_set) attn_kerns.push_back("wgmma"), attn_kerns.push_back("wgmma2");
    auto wg_mode = [](const char *kern) { return !strcmp(kern, "wgmma") ? "1" : !strcmp(kern, "wgmma2") ? "2" : nullptr; };
    for (const char *kern : attn_kerns) {
        const char *wgm = wg_mode(kern);
        const bool wg = wgm != nullptr;
        if (!g_as_set) setenv("SG_ATTN", wg ? "mma" : kern, 1);
        if (wg) setenv("SG_ATTN_WGMMA", wgm, 1);
        for (const AttnCase &c : attn) {
            if (wg && c.d <= 32) continue;
            snprintf(tag, sizeof tag, "attention B%d T%d H%d d%d phantom=%s logbias=%s v=%s%s tiles=%s", c.B, c.T,
                     c.H, c.d, PH[c.phantom], c.ramp ? "ramp" : c.logbias ? "1" : "0", c.vsep ? "own" : "qkv",
                     c.pad ? " rows+pad" : "", kern);
            if (!cases.begin(tag)) continue;
            test_attention(c);
            cases.end();
        }
        if (wg) unsetenv("SG_ATTN_WGMMA");
    }
    /* the value gates' backward fused into the attention's (mma) or the
     * two ops in turn (wmma, cudnn): both kinds, d 64 and a padded d 40,
     * T past one key tile and ending inside one */
    const GateBwdCase gcases[] = {{2, 130, 2, 64, GATE_PROJ, 2}, {1, 70, 3, 64, GATE_NORM, 0},
                                  {2, 33, 2, 40, GATE_PROJ, 1}, {1, 65, 2, 16, GATE_NORM, 2}};
    for (const char *kern : attn_kerns) {
        const char *wgm = wg_mode(kern);
        const bool wg = wgm != nullptr;
        if (!g_as_set) setenv("SG_ATTN", wg ? "mma" : kern, 1);
        if (wg) setenv("SG_ATTN_WGMMA", wgm, 1);
        for (const GateBwdCase &c : gcases) {
            if (wg && c.d <= 32) continue;
            snprintf(tag, sizeof tag, "attention gate-bwd B%d T%d H%d d%d %s phantom=%s tiles=%s", c.B, c.T, c.H, c.d,
                     c.kind == GATE_NORM ? "norm" : "proj", PH[c.phantom], kern);
            if (!cases.begin(tag)) continue;
            test_attention_gate(c);
            cases.end();
        }
        if (wg) unsetenv("SG_ATTN_WGMMA");
    }
    setenv("SG_ATTN", "wmma", 1);

    const int dshape[][4] = {{3, 7, 2, 16}, {3, 1, 2, 16}, {2, 130, 2, 64}};
    for (auto &s : dshape)
        for (int ph = 0; ph <= 2; ph++)
            for (int lb = 0; lb <= 1; lb++)
                for (int qsh = 0; qsh <= 1; qsh++) {
                    const DecodeCase c = {s[0], s[1], s[2], s[3], ph, lb, qsh};
                    snprintf(tag, sizeof tag, "decode B%d T%d H%d d%d phantom=%s logbias=%d q=%s", c.B, c.T, c.H, c.d,
                             PH[ph], lb, qsh ? "shared" : "own");
                    if (!cases.begin(tag)) continue;
                    test_decode(c);
                    cases.end();
                }

    const int pshape[][4] = {{2, 7, 3, 16}, {1, 1, 2, 16}, {1, 130, 2, 64}, {1, 260, 1, 16}};
    for (auto &s : pshape)
        for (int ph = 0; ph <= 2; ph++)
            for (int lb = 0; lb <= 1; lb++) {
                const ProbsCase c = {s[0], s[1], s[2], s[3], ph, lb};
                snprintf(tag, sizeof tag, "probs+apply B%d T%d H%d d%d phantom=%s logbias=%d", c.B, c.T, c.H, c.d,
                         PH[ph], lb);
                if (!cases.begin(tag)) continue;
                test_probs(c);
                cases.end();
            }

    fclose(g_digests);
    printf("largest dynamic shared memory launched: %zu bytes; %ld thread switches\n", emu::max_smem_launched,
           emu::switches);
    return check_finish();
}
