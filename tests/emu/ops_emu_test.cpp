/* The CUDA ops other than attention (kernels/cuda/layernorm.cu,
 * elementwise.cu, bias.cu, rope.cu, embed.cu, gate.cu, classifier.cu,
 * matmul.cu), run
 * on the host emulator (tests/emu), against the CPU ops (kernels/cpu, from the
 * build's libsg.a).  Run by tests/e2e_cuda_emu.sh, which builds it; see
 * there and docs/cuda.md.
 *
 * usage: ops_emu_test SEED DIGESTS [FILTER]   (as attention_emu_test)
 *
 * The cases are tests/gpu/test_gpu_ops.c's, with its inputs' distributions
 * and tolerances, per element |emu - cpu| <= atol + rtol |cpu|:
 *   fp32 ops (LayerNorm, GELU in both forms, add, the biases, AdamW,
 *   embeddings, gates): rtol 1e-4, atol 1e-5 x max(1, the output's largest
 *   magnitude); sumsq within 1e-10 relative; the rotary embedding bitwise
 *   the CPU's, and its inverse of its forward within 1e-6 x max(1, |x|) of
 *   x;
 *   ops with bf16 matrix products (matmul, classifier, logits): rtol 2e-2,
 *   atol 2e-2 x the output's largest magnitude; the classifier's loss sum
 *   within 2e-3 relative.
 * Where test_gpu_ops's shapes would take the emulator too long they are
 * trimmed (the case says how and what it keeps), and a few cases are added
 * for paths its shapes never take (each says which).  Its bitwise checks
 * are kept: the fused residual LayerNorm against add then LayerNorm, two
 * runs of sumsq, of the matmul forward, the classifier's loss with and
 * without gradients, and the backward's dW from the forward's kept bf16
 * copy against a fresh cast; here also that op_free makes the matmul forget
 * that copy.
 * Every overwritten output starts as NaN, every accumulated one ("(acc)" in
 * ops.h) as random values the reference starts from too; every buffer has
 * NaN guard zones on both sides that must come back untouched; every input
 * must come back unchanged; what an op must leave alone (the rest of a
 * strided row, an output of the other gate slot) must stay as it was. */
#include <algorithm>

#include "battery.h"

extern "C" {
void cuda_op_matmul_fwd(real *out, const real *inp, const real *w, int M, int K, int N);
void cuda_op_matmul_bwd(real *dinp, real *dw, const real *dout, const real *inp, const real *w, int M, int K, int N);
void cuda_op_layernorm_fwd(real *out, real *mean, real *rstd, const real *inp, const real *w, const real *b, int N,
                           int C);
void cuda_op_residual_layernorm_fwd(real *res, real *out, real *mean, real *rstd, const real *a, const real *b,
                                    const real *w, const real *bias, int N, int C);
void cuda_op_layernorm_bwd(real *dinp, real *dw, real *db, const real *dout, const real *inp, const real *w,
                           const real *mean, const real *rstd, int N, int C);
void cuda_op_gelu_fwd(real *out, const real *inp, long n);
void cuda_op_gelu_bwd(real *dinp, const real *inp, const real *dout, long n);
void cuda_op_gelu_tanh_fwd(real *out, const real *inp, long n);
void cuda_op_gelu_tanh_bwd(real *dinp, const real *inp, const real *dout, long n);
void cuda_op_add(real *out, const real *a, const real *b, long n);
void cuda_op_bias_add(real *out, const real *bias, int M, int N);
void cuda_op_bias_bwd(real *db, const real *dout, int M, int N);
void cuda_op_rope(real *q, real *k, int ld, const real *cs, int B, int T, int H, int d, int rd, int inverse);
void cuda_op_embed_fwd(real *out, const int32_t *tokens, const real *wte, const real *wpe, const real *sink, int B,
                       int T, int C);
void cuda_op_embed_bwd(real *dwte, real *dwpe, real *dsink, const real *dout, const int32_t *tokens, int B, int T,
                       int C);
void cuda_op_gate_fwd(real *g, real *vg, real *logbias, const real *v, int v_stride, const GateParams *p, int B, int T,
                      int H, int d);
void cuda_op_gate_bwd(real *dv, int dv_stride, real *dtau, real *dw, real *db, const real *dvg, const real *dlogbias,
                      const real *v, int v_stride, const real *g, const GateParams *p, int B, int T, int H, int d);
double cuda_op_classifier(real *losses, real *dx, real *dwte, const real *x, const real *wte, const int32_t *targets,
                          int N, int C, int V, int Vp, real dscale);
void cuda_op_logits(real *logits, const real *x, const real *wte, int N, int C, int Vp);
int sg_classifier_chunk_rows(int N, int Vp);
void sg_classifier_set_chunk(int rows);
void cuda_op_adamw(real *p, real *m, real *v, const real *g, long n, double lr, double b1, double b2, double eps,
                   double wd, long t, double gscale);
void cuda_op_adamw_multi(real *p, real *m, real *v, const real *g, long base, const AdamwSeg *segs, int nseg,
                         double lr, double b1, double b2, double eps, double wd, long t, double gscale);
void cuda_op_bf16_operand(const real *buf, long n);
void cuda_op_attention_operand(const real *buf, long n);
void cuda_op_matmul_only_end(const void *base, size_t bytes);
long sg_matmul_bf16_outputs(void);
double cuda_op_sumsq(const real *x, long n);
void *cuda_op_alloc(size_t bytes);
void cuda_op_free(void *p);
}

/* int32 tokens or targets between guards of NaN's bits (a huge index, if read) */
struct IBuf {
    static constexpr size_t G = 16;
    std::vector<int32_t, Aligned256<int32_t>> v;
    size_t n;
    explicit IBuf(size_t n_) : v(n_ + 2 * G, (int32_t)NAN_BITS), n(n_) {}
    int32_t *p() { return v.data() + G; }
    int32_t &operator[](size_t i) { return v[G + i]; }
};

static void same(const char *what, const Buf &got, const Buf &ref, bool lowp) { same(what, flat(got), flat(ref), lowp); }
static void bitwise(const char *what, const Buf &a, const Buf &b) {
    CHECK(same_bits(a, b), "%s: %s: not bitwise equal", g_tag.c_str(), what);
}
static void digest(std::initializer_list<const Buf *> outs) {
    Digest dg;
    for (const Buf *b : outs) dg.add(*b);
    digest_out(dg);
}
static void intact(std::initializer_list<const Buf *> outs) {
    for (const Buf *b : outs) intact("outputs", *b);
}

/* ---- GELU, add, AdamW, sumsq (elementwise.cu) ------------------------------ */

/* As test_gpu_ops's test_pointwise: x ~ N(0, 3), AdamW at step 3 with a clip
 * factor, from p ~ N(0, 1), m ~ N(0, 0.1), v = N(0, 0.1)^2. */
static void test_pointwise(long n) {
    Buf x = normal(n, 3), x2 = normal(n, 1), dy = normal(n, 1);
    const Buf x0 = x, x20 = x2, dy0 = dy;
    Buf y_r(n), y(n), dx_r(n), dx(n), s_r(n), s(n);
    op_gelu_fwd(y_r.p(), x.p(), n);
    cuda_op_gelu_fwd(y.p(), x.p(), n);
    same("gelu fwd", y, y_r, false);
    op_gelu_bwd(dx_r.p(), x.p(), dy.p(), n);
    cuda_op_gelu_bwd(dx.p(), x.p(), dy.p(), n);
    same("gelu bwd", dx, dx_r, false);
    op_add(s_r.p(), x.p(), x2.p(), n);
    cuda_op_add(s.p(), x.p(), x2.p(), n);
    same("add", s, s_r, false);

    Buf p_r = normal(n, 1), m_r = normal(n, 0.1), v_r = normal(n, 0.1), g = normal(n, 1);
    for (long i = 0; i < n; i++) v_r[i] = v_r[i] * v_r[i];
    Buf p = p_r, m = m_r, v = v_r;
    const Buf g0 = g;
    op_adamw(p_r.p(), m_r.p(), v_r.p(), g.p(), n, 6e-4, 0.9, 0.95, 1e-8, 0.1, 3, 0.7);
    cuda_op_adamw(p.p(), m.p(), v.p(), g.p(), n, 6e-4, 0.9, 0.95, 1e-8, 0.1, 3, 0.7);
    same("adamw p", p, p_r, false);
    same("adamw m", m, m_r, false);
    same("adamw v", v, v_r, false);

    const double s1 = op_sumsq(g.p(), n), s2 = cuda_op_sumsq(g.p(), n), s3 = cuda_op_sumsq(g.p(), n);
    CHECK(std::fabs(s1 - s2) <= 1e-10 * s1, "%s: sumsq %.17g vs cpu %.17g", g_tag.c_str(), s2, s1);
    CHECK(s2 == s3, "%s: sumsq twice: %.17g %.17g (determinism)", g_tag.c_str(), s2, s3);
    intact({&y, &dx, &s, &p, &m, &v});
    unchanged("x", x, x0), unchanged("x2", x2, x20), unchanged("dy", dy, dy0), unchanged("g", g, g0);
    Buf sums(2, 0.f);
    memcpy(sums.p(), &s2, sizeof(float) * 2);
    digest({&y, &dx, &s, &p, &m, &v, &sums});
}

/* AdamW over segments of one buffer in one launch, as test_gpu_ops's
 * test_adamw_multi: aligned with a tail, misaligned, short, empty, gaps,
 * and the moments from base on.  Against the CPU op, and bitwise against
 * one CUDA op_adamw a segment; the gaps and the guards untouched. */
static void test_adamw_multi(long base) {
    static const AdamwSeg segs[] = {{0, 1000, 1}, {1000, 3, 0}, {1003, 4097, 1}, {5100, 0, 1},
                                    {5104, 777, 0}, {6000, 3077, 1}, {9100, 1, 0}};
    const int shift = base ? 1 : 0, ns = (int)(sizeof segs / sizeof *segs) - shift;
    const AdamwSeg *sg = segs + shift;
    const long n = 9104, nm = n - base;
    Buf p_r = normal(n, 1), m_r = normal(nm, 0.1), v_r = normal(nm, 0.1), g = normal(n, 1);
    for (long i = 0; i < nm; i++) v_r[i] = v_r[i] * v_r[i];
    Buf p = p_r, m = m_r, v = v_r, pe = p_r, me = m_r, ve = v_r;
    const Buf g0 = g, p0 = p_r;
    op_adamw_multi(p_r.p(), m_r.p(), v_r.p(), g.p(), base, sg, ns, 6e-4, 0.9, 0.95, 1e-8, 0.1, 3, 0.7);
    cuda_op_adamw_multi(p.p(), m.p(), v.p(), g.p(), base, sg, ns, 6e-4, 0.9, 0.95, 1e-8, 0.1, 3, 0.7);
    for (int i = 0; i < ns; i++)
        cuda_op_adamw(pe.p() + sg[i].off, me.p() + (sg[i].off - base), ve.p() + (sg[i].off - base), g.p() + sg[i].off,
                      sg[i].n, 6e-4, 0.9, 0.95, 1e-8, sg[i].decay ? 0.1 : 0.0, 3, 0.7);
    same("adamw multi p", p, p_r, false);
    same("adamw multi m", m, m_r, false);
    same("adamw multi v", v, v_r, false);
    bitwise("adamw multi p against one op_adamw a segment", p, pe);
    bitwise("adamw multi m against one op_adamw a segment", m, me);
    bitwise("adamw multi v against one op_adamw a segment", v, ve);
    long touched = 0;
    for (long i = 0; i < n; i++) {
        bool in = false;
        for (int k = 0; k < ns; k++) in = in || (i >= sg[k].off && i < sg[k].off + sg[k].n);
        if (!in) touched += memcmp(p.p() + i, p0.p() + i, sizeof(float)) != 0;
    }
    CHECK(touched == 0, "%s: %ld elements outside the segments written", g_tag.c_str(), touched);
    intact({&p, &m, &v});
    unchanged("g", g, g0);
    digest({&p, &m, &v});
}

/* bf16 operands (ops.h, op_bf16_operand), as test_gpu_ops's bf16-operands
 * cases: an MLP's fc product into a promised h, GELU forward on it, fc_proj's
 * dinp into a promised dg, GELU backward on both, fc's dinp into a promised
 * dln and LayerNorm's backward on it.  The stored bf16 is the unpromised
 * product rounded to nearest even, each reader gives the bits of the same
 * op on an fp32 tensor of the stored values, and nothing is written past a
 * tensor (the guards; the promised tensors' second halves stay as they
 * were).  C = K takes LayerNorm's register path when a multiple of 4. */
static float bf16_widen(uint16_t b) {
    const uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static Buf stored_values(const Buf &t) { /* the promised tensor's bf16, widened */
    Buf v(t.n, 0.f);
    const uint16_t *b = reinterpret_cast<const uint16_t *>(t.p());
    for (size_t i = 0; i < t.n; i++) v[i] = bf16_widen(b[i]);
    return v;
}
static float bf16_round(float x) { /* to nearest even, as __float2bfloat16 (finite x) */
    uint32_t b;
    memcpy(&b, &x, 4);
    b = (b + 0x7fffu + ((b >> 16) & 1u)) & 0xffff0000u;
    memcpy(&x, &b, 4);
    return x;
}
static void rounded(const char *what, const Buf &stored, const Buf &ref) {
    long off = 0;
    for (size_t i = 0; i < ref.n; i++) {
        const float r = bf16_round(ref[i]);
        off += memcmp(stored.p() + i, &r, 4) != 0;
    }
    CHECK(off == 0, "%s: %s: %ld of %zu stored values not the fp32 product rounded to bf16", g_tag.c_str(), what, off,
          ref.n);
}
static void test_bf16_operands(int M, int K, int F, bool tanh_form = false) {
    /* the GELU: the erf form, or (tanh_form) the tanh form, which shares its
     * kernels and their bf16 reads (elementwise.cu) */
    void (*const gelu_fwd)(real *, const real *, long) = tanh_form ? cuda_op_gelu_tanh_fwd : cuda_op_gelu_fwd;
    void (*const gelu_fwd_ref)(real *, const real *, long) = tanh_form ? op_gelu_tanh_fwd : op_gelu_fwd;
    void (*const gelu_bwd)(real *, const real *, const real *, long) = tanh_form ? cuda_op_gelu_tanh_bwd
                                                                                : cuda_op_gelu_bwd;
    const long nh = (long)M * F, nx = (long)M * K;
    Buf x = normal(nx, 1), w1 = normal((long)F * K, 0.3), w2 = normal((long)K * F, 0.1), dy = normal(nx, 1);
    Buf lw = normal(K, 1), lx = normal(nx, 2);
    Buf h(nh), hr(nh), dg(nh), dgr(nh), dln(nx), dlnr(nx);
    for (Buf *t : {&h, &dg, &dln}) cuda_op_bf16_operand(t->p(), (long)t->n);
    /* forward: h = x W1^T, y = gelu(h) */
    cuda_op_matmul_fwd(h.p(), x.p(), w1.p(), M, K, F);
    cuda_op_matmul_fwd(hr.p(), x.p(), w1.p(), M, K, F);
    const Buf hv = stored_values(h);
    rounded("fc output", hv, hr);
    Buf y(nh), yv(nh), y_r(nh);
    gelu_fwd(y.p(), h.p(), nh);
    gelu_fwd(yv.p(), hv.p(), nh);
    gelu_fwd_ref(y_r.p(), hv.p(), nh);
    bitwise("gelu forward on the stored values", y, yv);
    same("gelu forward against the CPU", y, y_r, false);
    /* backward: dg = dy W2, dh = gelu'(h) dg, dln = dh W1 */
    cuda_op_matmul_bwd(dg.p(), nullptr, dy.p(), nullptr, w2.p(), M, F, K);
    cuda_op_matmul_bwd(dgr.p(), nullptr, dy.p(), nullptr, w2.p(), M, F, K);
    const Buf dgv = stored_values(dg);
    rounded("fc_proj dinp", dgv, dgr);
    Buf dh(nh), dhv(nh);
    gelu_bwd(dh.p(), h.p(), dg.p(), nh);
    gelu_bwd(dhv.p(), hv.p(), dgv.p(), nh);
    bitwise("gelu backward on the stored values", dh, dhv);
    cuda_op_matmul_bwd(dln.p(), nullptr, dhv.p(), nullptr, w1.p(), M, K, F);
    cuda_op_matmul_bwd(dlnr.p(), nullptr, dhv.p(), nullptr, w1.p(), M, K, F);
    const Buf dlnv = stored_values(dln);
    rounded("fc dinp", dlnv, dlnr);
    Buf ly(nx), mu(M), rs(M);
    cuda_op_layernorm_fwd(ly.p(), mu.p(), rs.p(), lx.p(), lw.p(), nullptr, M, K);
    Buf dx = normal(nx, 1), dw = normal(K, 1);
    Buf dxv = dx, dwv = dw;
    cuda_op_layernorm_bwd(dx.p(), dw.p(), nullptr, dln.p(), lx.p(), lw.p(), mu.p(), rs.p(), M, K);
    cuda_op_layernorm_bwd(dxv.p(), dwv.p(), nullptr, dlnv.p(), lx.p(), lw.p(), mu.p(), rs.p(), M, K);
    bitwise("layernorm backward dx on the stored dy", dx, dxv);
    bitwise("layernorm backward dw on the stored dy", dw, dwv);
    for (Buf *t : {&h, &dg, &dln}) cuda_op_matmul_only_end(t->p(), sizeof(float) * t->n);
    intact({&h, &hr, &dg, &dgr, &dln, &dlnr, &y, &dh, &dx, &dw});
    digest({&h, &dg, &dln, &y, &dh, &dx, &dw});
}

/* sumsq alone over more than 256 chunks of 8192: the final kernel's
 * threads then add more than one partial each */
static void test_sumsq(long n) {
    Buf g = normal(n, 1);
    const double s1 = op_sumsq(g.p(), n), s2 = cuda_op_sumsq(g.p(), n), s3 = cuda_op_sumsq(g.p(), n);
    CHECK(std::fabs(s1 - s2) <= 1e-10 * s1, "%s: sumsq %.17g vs cpu %.17g", g_tag.c_str(), s2, s1);
    CHECK(s2 == s3, "%s: sumsq twice: %.17g %.17g (determinism)", g_tag.c_str(), s2, s3);
    Buf sums(2, 0.f);
    memcpy(sums.p(), &s2, sizeof(float) * 2);
    digest({&sums});
}

/* ---- LayerNorm (layernorm.cu) -------------------------------------------- */

/* As test_gpu_ops's test_layernorm: x ~ N(0, 2), w and b ~ N(0, 1); each
 * backward from its own forward's mean and rstd, into random dinp, dw, db. */
/* b's values at an address 4 bytes past a 16-byte boundary: the kernels'
 * scalar loads in place of float4 */
static Buf shifted(const Buf &b) {
    Buf m(b.n, 0.f, Buf::G + 1);
    memcpy(m.p(), b.p(), sizeof(float) * b.n);
    return m;
}

/* mis: x, dy and dx (forward: x and y) at shifted addresses */
static void test_layernorm(int N, int C, int bias, int mis) {
    const long n = (long)N * C;
    Buf x = normal(n, 2), w = normal(C, 1), b = normal(bias ? C : 0, 1), dy = normal(n, 1);
    if (mis) x = shifted(x), dy = shifted(dy);
    const Buf x0 = x, w0 = w, b0 = b, dy0 = dy;
    Buf y_r(n), mu_r(N), rs_r(N), y = mis ? shifted(Buf(n)) : Buf(n), mu(N), rs(N);
    op_layernorm_fwd(y_r.p(), mu_r.p(), rs_r.p(), x.p(), w.p(), bias ? b.p() : nullptr, N, C);
    cuda_op_layernorm_fwd(y.p(), mu.p(), rs.p(), x.p(), w.p(), bias ? b.p() : nullptr, N, C);
    same("out", y, y_r, false);
    same("mean", mu, mu_r, false);
    same("rstd", rs, rs_r, false);
    Buf dx_r = normal(n, 1), dw_r = normal(C, 1), db_r = normal(C, 1);
    Buf dx = mis ? shifted(dx_r) : dx_r, dw = dw_r, db = db_r;
    op_layernorm_bwd(dx_r.p(), dw_r.p(), bias ? db_r.p() : nullptr, dy.p(), x.p(), w.p(), mu_r.p(), rs_r.p(), N, C);
    cuda_op_layernorm_bwd(dx.p(), dw.p(), bias ? db.p() : nullptr, dy.p(), x.p(), w.p(), mu.p(), rs.p(), N, C);
    same("dinp (accumulated)", dx, dx_r, false);
    same("dw (accumulated)", dw, dw_r, false);
    if (bias) same("db (accumulated)", db, db_r, false);
    else bitwise("db untouched without a bias", db, db_r);
    intact({&y, &mu, &rs, &dx, &dw, &db});
    unchanged("x", x, x0), unchanged("w", w, w0), unchanged("b", b, b0), unchanged("dout", dy, dy0);
    digest({&y, &mu, &rs, &dx, &dw, &db});
}

/* As test_gpu_ops's test_residual_layernorm: against the CPU op, and
 * bitwise against the emulated op_add then op_layernorm_fwd.  alias: 0 res
 * separate, 1 res == a, 2 res == b. */
static void test_residual_layernorm(int N, int C, int bias, int alias, int mis) {
    const long n = (long)N * C;
    Buf a = normal(n, 2), bb = normal(n, 1), w = normal(C, 1), b = normal(bias ? C : 0, 1);
    if (mis) a = shifted(a); /* the fused op reads a with scalar loads, the composition's LayerNorm with float4 */
    const Buf a0 = a, bb0 = bb, w0 = w, b0 = b;
    const float *bp = bias ? b.p() : nullptr;
    /* the composition, from the untouched inputs */
    Buf res2(n), y2(n), mu2(N), rs2(N);
    cuda_op_add(res2.p(), a.p(), bb.p(), n);
    cuda_op_layernorm_fwd(y2.p(), mu2.p(), rs2.p(), res2.p(), w.p(), bp, N, C);

    Buf a_r = a, bb_r = bb, res_r(n), y_r(n), mu_r(N), rs_r(N), res(n), y(n), mu(N), rs(N);
    Buf &dst_r = alias == 1 ? a_r : alias == 2 ? bb_r : res_r, &dst = alias == 1 ? a : alias == 2 ? bb : res;
    op_residual_layernorm_fwd(dst_r.p(), y_r.p(), mu_r.p(), rs_r.p(), a_r.p(), bb_r.p(), w.p(), bp, N, C);
    cuda_op_residual_layernorm_fwd(dst.p(), y.p(), mu.p(), rs.p(), a.p(), bb.p(), w.p(), bp, N, C);
    same("res", dst, dst_r, false);
    same("out", y, y_r, false);
    same("mean", mu, mu_r, false);
    same("rstd", rs, rs_r, false);
    bitwise("res, against add then layernorm", dst, res2);
    bitwise("out, against add then layernorm", y, y2);
    bitwise("mean, against add then layernorm", mu, mu2);
    bitwise("rstd, against add then layernorm", rs, rs2);
    if (alias != 1) unchanged("a", a, a0);
    if (alias != 2) unchanged("b", bb, bb0);
    unchanged("w", w, w0), unchanged("bias", b, b0);
    intact({&a, &bb, &res, &y, &mu, &rs});
    digest({&dst, &y, &mu, &rs});
}

/* ---- GELU, tanh form (elementwise.cu) --------------------------------------- */

/* As test_pointwise's GELU: x ~ N(0, 3), dy ~ N(0, 1), the fp32 tolerance,
 * against the CPU op; the outputs overwritten (NaN before).  The scalar
 * kernels (x, dy and the outputs one element off 16-byte alignment) give
 * the bits of the vector path and its scalar tail.  specials: x instead a
 * fixed set from 0 and +-1e-30 to +-3e38 (|u| is past the cut at 44, where
 * e = exp(-2|u|) is taken as 0, from |x| = 9.4 on; from |x| = 1e13 on x^3
 * overflows to inf), each element compared at its own scale (atol 1e-5
 * max(1, |cpu|), rtol 1e-4), as one large value would hide the small ones. */
static void test_gelu_tanh(long n, bool specials) {
    static const float SP[] = {0.f,   -0.f,   1e-30f, -1e-30f, 1e-3f, -1e-3f, 0.5f, -0.5f, 1.f,   -1.f,
                               2.f,   -2.f,   3.f,    -3.f,    5.f,   -5.f,   9.f,  -9.f,  12.f,  -12.f,
                               30.f,  -30.f,  100.f,  -100.f,  1e3f,  -1e3f,  1e4f, -1e4f,
                               1e20f, -1e20f, 3e38f,  -3e38f};
    if (specials) n = (long)(sizeof SP / sizeof *SP);
    Buf x = normal(n, 3), dy = normal(n, 1);
    if (specials)
        for (long i = 0; i < n; i++) x[i] = SP[i];
    const Buf x0 = x, dy0 = dy;
    Buf y_r(n), y(n), dx_r(n), dx(n);
    op_gelu_tanh_fwd(y_r.p(), x.p(), n);
    cuda_op_gelu_tanh_fwd(y.p(), x.p(), n);
    op_gelu_tanh_bwd(dx_r.p(), x.p(), dy.p(), n);
    cuda_op_gelu_tanh_bwd(dx.p(), x.p(), dy.p(), n);
    if (specials) {
        for (long i = 0; i < n; i++) {
            char what[64];
            snprintf(what, sizeof what, "gelu_tanh fwd at x = %g", (double)SP[i]);
            same(what, std::vector<double>{y[i]}, std::vector<double>{y_r[i]}, false);
            snprintf(what, sizeof what, "gelu_tanh bwd at x = %g", (double)SP[i]);
            same(what, std::vector<double>{dx[i]}, std::vector<double>{dx_r[i]}, false);
        }
    } else {
        same("gelu_tanh fwd", y, y_r, false);
        same("gelu_tanh bwd", dx, dx_r, false);
    }
    /* the scalar kernels, bitwise */
    const Buf xs = shifted(x), dys = shifted(dy);
    Buf ys = shifted(Buf(n)), dxs = shifted(Buf(n));
    cuda_op_gelu_tanh_fwd(ys.p(), xs.p(), n);
    cuda_op_gelu_tanh_bwd(dxs.p(), xs.p(), dys.p(), n);
    CHECK(!memcmp(ys.p(), y.p(), sizeof(float) * n),
          "%s: gelu_tanh fwd: the scalar kernel's bits differ from the vector path's", g_tag.c_str());
    CHECK(!memcmp(dxs.p(), dx.p(), sizeof(float) * n),
          "%s: gelu_tanh bwd: the scalar kernel's bits differ from the vector path's", g_tag.c_str());
    intact({&y, &dx, &ys, &dxs});
    unchanged("x", x, x0), unchanged("dy", dy, dy0);
    digest({&y, &dx});
}

/* ---- linear-layer biases (bias.cu) ------------------------------------------ */

/* out ~ N(0, 1) plus bias ~ N(0, 1): against the CPU op with the fp32
 * tolerance, and bitwise (one float add an element, as the CPU's).  db
 * accumulates: it starts at N(0, 1), the reference at the same values, and
 * dout ~ N(0, 1) (db's sums are then about sqrt(M)): the fp32 tolerance
 * against the CPU's sums in double.  A second run from the same db gives
 * the same bits (the fixed-order reduction).  mis: out and dout one element
 * off 16-byte alignment (the add's scalar kernel although N % 4 == 0). */
static void test_bias(int M, int N, int mis) {
    const long n = (long)M * N;
    Buf out_r = normal(n, 1), bias = normal(N, 1), dout = normal(n, 1), db_r = normal(N, 1);
    if (mis) dout = shifted(dout);
    Buf out = mis ? shifted(out_r) : out_r, db = db_r, db2 = db_r;
    const Buf bias0 = bias, dout0 = dout;
    op_bias_add(out_r.p(), bias.p(), M, N);
    cuda_op_bias_add(out.p(), bias.p(), M, N);
    same("bias add", out, out_r, false);
    CHECK(!memcmp(out.p(), out_r.p(), sizeof(float) * n), "%s: bias add: not the CPU's bits", g_tag.c_str());
    op_bias_bwd(db_r.p(), dout.p(), M, N);
    cuda_op_bias_bwd(db.p(), dout.p(), M, N);
    cuda_op_bias_bwd(db2.p(), dout.p(), M, N);
    same("bias bwd db (accumulated)", db, db_r, false);
    bitwise("bias bwd db twice", db, db2);
    intact({&out, &db, &db2});
    unchanged("bias", bias, bias0), unchanged("dout", dout, dout0);
    digest({&out, &db});
}

/* ---- rotary position embedding (rope.cu) ----------------------------------- */

/* q and k as parts of one qkv buffer of rows ld = 3C (C = H d), q at 0 and
 * k at C, as the model calls it; qkv ~ N(0, 1).  cs: the model's table
 * (src/model.c, build_rope: theta = p / 10000^(2i / rd), the exponent,
 * frequency and angle in fp32, cos and sin in double), for positions
 * [0, pos0 + T), passed from row pos0 (a first position other than 0).
 * The forward and the inverse against the CPU op, bitwise: each element is
 * two products and a sum, each rounded on its own on both sides
 * (rope.cu); the fp32 tolerance on top, for the worst error's report.
 * Everything of qkv outside the first rd dims of q's and k's heads (the
 * rest of each head, v, the guards) as it was; and the inverse of the
 * forward gives x back within 1e-6 x max(1, largest |x|) (a rotation and
 * its transpose, in fp32, with cos^2 + sin^2 = 1 to fp32's rounding). */
static void test_rope(int B, int T, int H, int d, int rd, int pos0) {
    const int C = H * d, ld = 3 * C, h = rd / 2, rows_cs = pos0 + T;
    const long n = (long)B * T * ld;
    Buf x = normal(n, 1), cs((size_t)rows_cs * rd, 0.f);
    for (int i = 0; i < h; i++) {
        const float e = (float)(2 * i) / (float)rd, inv = 1.0f / powf(10000.0f, e);
        for (int p = 0; p < rows_cs; p++) {
            const float a = (float)p * inv;
            cs[(size_t)p * rd + i] = (float)cos((double)a);
            cs[(size_t)p * rd + h + i] = (float)sin((double)a);
        }
    }
    const Buf x0 = x, cs0 = cs;
    const float *c = cs.p() + (size_t)pos0 * rd;
    Buf y_r = x, y = x;
    op_rope(y_r.p(), y_r.p() + C, ld, c, B, T, H, d, rd, 0);
    cuda_op_rope(y.p(), y.p() + C, ld, c, B, T, H, d, rd, 0);
    same("fwd", y, y_r, false);
    bitwise("fwd: the CPU's bits", y, y_r);
    long moved = 0; /* elements outside the rotated dims that changed */
    for (long r = 0; r < (long)B * T; r++)
        for (int e = 0; e < ld; e++) {
            const bool rot = e < 2 * C && e % d < rd; /* q's or k's head e % C / d, dim e % d */
            if (!rot) moved += memcmp(y.p() + r * ld + e, x0.p() + r * ld + e, sizeof(float)) != 0;
        }
    CHECK(moved == 0, "%s: fwd: %ld elements outside the first rd dims of q's and k's heads written", g_tag.c_str(),
          moved);
    Buf z_r = y_r, z = y;
    op_rope(z_r.p(), z_r.p() + C, ld, c, B, T, H, d, rd, 1);
    cuda_op_rope(z.p(), z.p() + C, ld, c, B, T, H, d, rd, 1);
    same("inverse", z, z_r, false);
    bitwise("inverse: the CPU's bits", z, z_r);
    double scale = 1, worst = 0;
    for (long i = 0; i < n; i++) scale = std::fmax(scale, std::fabs(x0[i]));
    for (long i = 0; i < n; i++) worst = std::fmax(worst, std::fabs((double)z[i] - x0[i]));
    const double bound = 1e-6 * scale;
    g_worst = std::fmax(g_worst, worst / bound);
    CHECK(worst <= bound, "%s: inverse(fwd(x)) off x by up to %.3g, over %.3g", g_tag.c_str(), worst, bound);
    intact({&y, &z});
    unchanged("cs", cs, cs0);
    digest({&y, &z});
}

/* ---- embeddings (embed.cu) ------------------------------------------------- */

/* As test_gpu_ops's test_embed: a third of the tokens below 4 (repeats),
 * the rest below V; wte, wpe, sink, dout ~ N(0, 1), the gradients
 * accumulated into random values.  skew: instead, all but every seventh
 * token is 0, so one token's positions run through several tiles of the
 * sorted order (the second dwte kernel, which test_gpu_ops's shapes, at
 * most 32 positions, never reach).  nopos: wpe and dwpe NULL (rotary
 * positions), the rows the token embeddings' bits. */
static void test_embed(int B, int T, int C, int V, int sink, int skew, int nopos = 0) {
    const int Tp = T + (sink ? 1 : 0), N = B * T;
    IBuf tok(N);
    for (int i = 0; i < N; i++) {
        const uint64_t h = rng_key(g_key, 77, (uint64_t)i);
        tok[i] = (int32_t)(skew ? (i % 7 ? 0 : rng_below(h, (uint64_t)V)) : rng_below(h, (uint64_t)(i % 3 ? V : 4)));
    }
    const IBuf tok0 = tok;
    Buf wte = normal((long)V * C, 1), wpe = normal(nopos ? 0 : (long)T * C, 1), st = normal(sink ? C : 0, 1);
    real *wpe_p = nopos ? nullptr : wpe.p();
    Buf dout = normal((long)B * Tp * C, 1);
    const Buf wte0 = wte, wpe0 = wpe, st0 = st, dout0 = dout;
    Buf out_r((long)B * Tp * C), out((long)B * Tp * C);
    op_embed_fwd(out_r.p(), tok.p(), wte.p(), wpe_p, sink ? st.p() : nullptr, B, T, C);
    cuda_op_embed_fwd(out.p(), tok.p(), wte.p(), wpe_p, sink ? st.p() : nullptr, B, T, C);
    same(sink ? "fwd (sink token)" : "fwd", out, out_r, false);
    if (nopos) bitwise("fwd without wpe: the CPU's bits (copies of wte rows)", out, out_r);
    Buf dwte_r = normal((long)V * C, 1), dwpe_r = normal(nopos ? 0 : (long)T * C, 1), dst_r = normal(sink ? C : 0, 1);
    Buf dwte = dwte_r, dwpe = dwpe_r, dst = dst_r;
    op_embed_bwd(dwte_r.p(), nopos ? nullptr : dwpe_r.p(), sink ? dst_r.p() : nullptr, dout.p(), tok.p(), B, T, C);
    cuda_op_embed_bwd(dwte.p(), nopos ? nullptr : dwpe.p(), sink ? dst.p() : nullptr, dout.p(), tok.p(), B, T, C);
    same("dwte (repeated tokens, accumulated)", dwte, dwte_r, false);
    if (!nopos) same("dwpe (accumulated)", dwpe, dwpe_r, false);
    if (sink) same("dsink (accumulated)", dst, dst_r, false);
    intact({&out, &dwte, &dwpe, &dst});
    CHECK(tok.v == tok0.v, "%s: tokens written", g_tag.c_str());
    unchanged("wte", wte, wte0), unchanged("wpe", wpe, wpe0), unchanged("sink", st, st0);
    unchanged("dout", dout, dout0);
    digest({&out, &dwte, &dwpe, &dst});
}

/* ---- gates (gate.cu) ------------------------------------------------------- */

/* As test_gpu_ops's test_gate: v ~ N(0, 1) in rows of 3C (the qkv row),
 * tau ~ N(0, 0.5), w ~ N(0, 0.3), b ~ N(0, 1), beta 8; each backward from
 * its own forward's g.  The output of the other slot (logbias for the
 * value slot, vg for the routing slot) is passed and must stay as it was,
 * and so must dv outside the value slices (the rest of the 3C row), and
 * the parameter gradients of the other kind.  zero: one read's v is 0
 * (the norm gate's ||v|| = 0 branch).  For gate.cu's choice between its
 * float4 and scalar paths: vpad, added to the rows' stride of v and dv
 * (3C + vpad; not a multiple of 4: the scalar path); shift, buffers moved by
 * one float off their 16-byte alignment (1: v, 2: vg and dvg, 4: dv), which
 * takes the scalar path too.  bf16v: v as a part of a qkv stored in bf16
 * (ops.h, op_attention_operand, promised under SG_ATTN=mma): v's values
 * are rounded to bf16 first, the CUDA ops read the promised copy's bf16,
 * and every output must be the bits of the same ops on the fp32 v. */
static Buf misaligned(const Buf &b) { /* b's values, 4-byte aligned only */
    Buf m(b.n, 0.f, Buf::G + 1);
    memcpy(m.p(), b.p(), sizeof(float) * b.n);
    return m;
}

/* a's n values have b's bits (a misaligned copy has other guards) */
static void same_values(const char *what, const Buf &a, const Buf &b) {
    CHECK(a.n == b.n && !memcmp(a.p(), b.p(), sizeof(float) * a.n), "%s: %s: not bitwise equal", g_tag.c_str(), what);
}

static void test_gate(int kind, int slot, int B, int T, int H, int d, int zero, int vpad, int shift, int bf16v) {
    const int C = H * d, vs = 3 * C + vpad;
    const long nv = (long)B * T * vs, ng = (long)B * H * T, nvg = (long)B * T * C;
    Buf v = normal(nv, 1), tau = normal(H, 0.5), w = normal((long)H * d, 0.3), b = normal(H, 1);
    if (shift & 1) v = misaligned(v);
    if (zero)
        for (int e = 0; e < d; e++) v[(long)(T / 2) * vs + (H - 1) * d + e] = 0;
    Buf vb(nv, nan_fill(), v.lead); /* bf16v: v's bf16 in its first half, the rest NaN */
    if (bf16v) {
        uint16_t *h = reinterpret_cast<uint16_t *>(vb.p());
        for (long i = 0; i < nv; i++) {
            v[i] = bf16_round(v[i]);
            uint32_t u;
            memcpy(&u, &v[i], 4);
            h[i] = (uint16_t)(u >> 16);
        }
        setenv("SG_ATTN", "mma", 1);
        cuda_op_attention_operand(vb.p(), nv);
        setenv("SG_ATTN", "wmma", 1);
    }
    const float *vin = bf16v ? vb.p() : v.p(); /* what the CUDA ops read */
    const Buf v0 = v, tau0 = tau, w0 = w, b0 = b;
    const GateParams gp = {kind, slot, 8, tau.p(), w.p(), b.p()};
    const bool route = slot == SLOT_ROUTING;
    Buf g_r(ng), g(ng), vg_r = route ? normal(nvg, 1) : Buf(nvg), lb_r = route ? Buf(ng) : normal(ng, 1);
    Buf vg = shift & 2 ? misaligned(vg_r) : vg_r, lb = lb_r;
    op_gate_fwd(g_r.p(), vg_r.p(), lb_r.p(), v.p(), vs, &gp, B, T, H, d);
    cuda_op_gate_fwd(g.p(), vg.p(), lb.p(), vin, vs, &gp, B, T, H, d);
    same("fwd g", g, g_r, false);
    if (route) {
        same("fwd logbias", lb, lb_r, false);
        same_values("vg untouched (routing slot)", vg, vg_r);
    } else {
        same("fwd vg", vg, vg_r, false);
        bitwise("logbias untouched (value slot)", lb, lb_r);
    }

    Buf dv_r = normal(nv, 1), dvg = normal(nvg, 1), dlb = normal(ng, 1);
    if (shift & 2) dvg = misaligned(dvg);
    if (!route) /* overwritten in the value slices, left alone in the rest of the row */
        for (long r = 0; r < (long)B * T; r++)
            for (int e = 0; e < C; e++) dv_r[r * vs + e] = nan_fill();
    Buf dtau_r = normal(H, 1), dw_r = normal((long)H * d, 1), db_r = normal(H, 1);
    Buf dv = shift & 4 ? misaligned(dv_r) : dv_r, dtau = dtau_r, dw = dw_r, db = db_r;
    const Buf dvg0 = dvg, dlb0 = dlb, dv0 = dv, dtau0 = dtau, dw0 = dw, db0 = db;
    op_gate_bwd(dv_r.p(), vs, dtau_r.p(), dw_r.p(), db_r.p(), route ? nullptr : dvg.p(), route ? dlb.p() : nullptr,
                v.p(), vs, g_r.p(), &gp, B, T, H, d);
    cuda_op_gate_bwd(dv.p(), vs, dtau.p(), dw.p(), db.p(), route ? nullptr : dvg.p(), route ? dlb.p() : nullptr, vin,
                     vs, g.p(), &gp, B, T, H, d);
    if (kind == GATE_NONE && route) {
        same_values("dv untouched (no gate, routing slot)", dv, dv_r);
    } else {
        same("bwd dv", dv, dv_r, false);
        long bad = 0; /* the rest of the row: the very values it started with */
        for (long r = 0; r < (long)B * T; r++)
            bad += memcmp(&dv[r * vs + C], &dv_r[r * vs + C], sizeof(float) * (vs - C)) != 0;
        CHECK(!bad, "%s: dv written outside the value slices in %ld rows", g_tag.c_str(), bad);
    }
    if (kind == GATE_NORM) same("bwd dtau (accumulated)", dtau, dtau_r, false);
    else bitwise("dtau untouched", dtau, dtau_r);
    if (kind == GATE_PROJ) {
        same("bwd dw (accumulated)", dw, dw_r, false);
        same("bwd db (accumulated)", db, db_r, false);
    } else {
        bitwise("dw untouched", dw, dw_r);
        bitwise("db untouched", db, db_r);
    }
    if (bf16v) { /* the same ops on the fp32 v of the same values */
        Buf g2(ng), vg2 = shift & 2 ? misaligned(vg_r) : vg_r, lb2 = lb_r, dv2 = dv0, dtau2 = dtau0, dw2 = dw0,
                    db2 = db0;
        if (route) vg2 = vg, lb2 = Buf(ng);
        else lb2 = lb;
        cuda_op_gate_fwd(g2.p(), vg2.p(), lb2.p(), v.p(), vs, &gp, B, T, H, d);
        cuda_op_gate_bwd(dv2.p(), vs, dtau2.p(), dw2.p(), db2.p(), route ? nullptr : dvg.p(), route ? dlb.p() : nullptr,
                         v.p(), vs, g2.p(), &gp, B, T, H, d);
        same_values("fwd g on the bf16 v", g, g2);
        same_values(route ? "fwd logbias on the bf16 v" : "fwd vg on the bf16 v", route ? lb : vg, route ? lb2 : vg2);
        same_values("bwd dv on the bf16 v", dv, dv2);
        same_values("bwd dtau on the bf16 v", dtau, dtau2);
        same_values("bwd dw on the bf16 v", dw, dw2);
        same_values("bwd db on the bf16 v", db, db2);
        if (!route) /* vg promised as an attention operand too: stored in bf16 (16-, 4- and 8-byte aligned: the
                     * float4 path, the scalar one, the float4 path with 8-byte bf16 stores), the rounding of
                     * the fp32 vg that the same path stores */
            for (size_t lead : {Buf::G, Buf::G + 1, Buf::G + 2}) {
                Buf vgb(nvg, nan_fill(), lead), g3(ng), lb3 = lb, gf(ng), vgf(nvg, nan_fill(), lead == Buf::G + 1 ? lead : Buf::G);
                cuda_op_gate_fwd(gf.p(), vgf.p(), lb3.p(), vin, vs, &gp, B, T, H, d);
                setenv("SG_ATTN", "mma", 1);
                cuda_op_attention_operand(vgb.p(), nvg);
                setenv("SG_ATTN", "wmma", 1);
                const long n0 = sg_matmul_bf16_outputs();
                cuda_op_gate_fwd(g3.p(), vgb.p(), lb3.p(), vin, vs, &gp, B, T, H, d);
                CHECK(sg_matmul_bf16_outputs() - n0 == 1, "%s: vg promised (lead %zu): %ld outputs stored in bf16",
                      g_tag.c_str(), lead, sg_matmul_bf16_outputs() - n0);
                same_values("fwd g with vg stored in bf16", g3, gf);
                same_values("logbias untouched, vg stored in bf16", lb3, lb);
                const uint16_t *hb = reinterpret_cast<const uint16_t *>(vgb.p());
                long bad = 0, rest = 0;
                for (long i = 0; i < nvg; i++) {
                    const float r = bf16_round(vgf[i]);
                    uint32_t u;
                    memcpy(&u, &r, 4);
                    bad += hb[i] != (uint16_t)(u >> 16);
                }
                for (long i = (nvg + 1) / 2; i < nvg; i++) rest += memcmp(&vgb[i], &NAN_BITS, 4) != 0;
                CHECK(!bad && !rest, "%s: vg stored in bf16 (lead %zu): %ld values not the fp32 vg rounded, %ld words "
                      "past them written", g_tag.c_str(), lead, bad, rest);
                cuda_op_matmul_only_end(vgb.p(), sizeof(float) * nvg);
                intact({&vgb, &g3, &gf, &vgf});
            }
        cuda_op_matmul_only_end(vb.p(), sizeof(float) * nv);
        intact({&vb});
    }
    intact({&g, &vg, &lb, &dv, &dtau, &dw, &db});
    unchanged("v", v, v0), unchanged("tau", tau, tau0), unchanged("w", w, w0), unchanged("b", b, b0);
    unchanged("dvg", dvg, dvg0), unchanged("dlogbias", dlb, dlb0);
    digest({&g, &vg, &lb, &dv, &dtau, &dw, &db});
}

/* ---- classifier and logits (classifier.cu) -------------------------------- */

/* As test_gpu_ops's test_classifier: x ~ N(0, 1), wte ~ N(0, 0.3) over all
 * Vp rows (random values in the padded rows, which must not count),
 * targets below V, dscale 1/N, dwte accumulated into N(0, 0.1); then the
 * same loss bitwise without gradients.  grads: which of losses, dx and
 * dwte are asked for (1, 2, 4); the other ones are passed as NULL. */
/* negative: every real logit between -2C/8 and -C (x = 1, wte's first V
 * rows -1/4 to -1 in quarters: logits exact in bf16, so the bf16 logits
 * cost no precision), where the padded classes' logits are exactly 0 (the
 * bf16 copy of wte has zero rows past V): a padded class let into the
 * max or the sum would weigh as much as e^5 real ones */
static void test_classifier(int N, int C, int V, int Vp, int grads, bool negative = false) {
    const bool want_l = grads & 1, want_dx = grads & 2, want_dw = grads & 4;
    Buf x = normal((long)N * C, 1), wte = normal((long)Vp * C, 0.3);
    if (negative) {
        for (long i = 0; i < (long)N * C; i++) x[i] = 1.f;
        for (long i = 0; i < (long)V * C; i++) wte[i] = -0.25f * (float)(1 + (((uint32_t)i * 2654435761u) >> 30));
    }
    IBuf tg(N);
    for (int i = 0; i < N; i++) tg[i] = (int32_t)rng_below(rng_key(g_key, 91, (uint64_t)i), (uint64_t)V);
    const Buf x0 = x, wte0 = wte;
    const IBuf tg0 = tg;
    Buf loss_r(N), loss(N), dx_r((long)N * C), dx((long)N * C), dwte_r = normal((long)Vp * C, 0.1);
    Buf dwte = dwte_r;
    const Buf dwte_in = dwte;
    const real dscale = (real)(1.0 / N);
    const double l1 = op_classifier(want_l ? loss_r.p() : nullptr, want_dx ? dx_r.p() : nullptr,
                                    want_dw ? dwte_r.p() : nullptr, x.p(), wte.p(), tg.p(), N, C, V, Vp, dscale);
    const double l2 = cuda_op_classifier(want_l ? loss.p() : nullptr, want_dx ? dx.p() : nullptr,
                                         want_dw ? dwte.p() : nullptr, x.p(), wte.p(), tg.p(), N, C, V, Vp, dscale);
    g_worst = std::fmax(g_worst, std::fabs(l1 - l2) / (2e-3 * std::fabs(l1)));
    CHECK(std::fabs(l1 - l2) <= 2e-3 * std::fabs(l1), "%s: loss sum %.6f vs cpu %.6f", g_tag.c_str(), l2, l1);
    if (want_l) same("row losses", loss, loss_r, true);
    else bitwise("losses untouched (NULL)", loss, loss_r);
    if (want_dx) same("dx", dx, dx_r, true);
    else bitwise("dx untouched (NULL)", dx, dx_r);
    same("dwte (accumulated)", dwte, dwte_r, true);
    /* the padded classes' rows receive +0: their dlogits are 0, whatever
     * the 16-byte softmax read in the last group */
    for (long e = (long)V * C; e < (long)Vp * C; e++) {
        const float now = dwte[e], was = dwte_in[e];
        if (memcmp(&now, &was, sizeof now)) {
            CHECK(0, "%s: dwte padded row %ld changed: %g, was %g", g_tag.c_str(), e / C, now, was);
            break;
        }
    }
    const double l3 = cuda_op_classifier(nullptr, nullptr, nullptr, x.p(), wte.p(), tg.p(), N, C, V, Vp, 1);
    CHECK(l3 == l2, "%s: evaluation gives the training loss bitwise (%.17g, %.17g)", g_tag.c_str(), l3, l2);
    intact({&loss, &dx, &dwte});
    unchanged("x", x, x0), unchanged("wte", wte, wte0);
    CHECK(tg.v == tg0.v, "%s: targets written", g_tag.c_str());
    Buf sums(2, 0.f);
    memcpy(sums.p(), &l2, sizeof(float) * 2);
    digest({&loss, &dx, &dwte, &sums});
}

/* Plain logits over all Vp rows, in the classifier's precision (bf16
 * operands); test_gpu_ops has no case of its own for op_logits. */
static void test_logits(int N, int C, int Vp) {
    Buf x = normal((long)N * C, 1), wte = normal((long)Vp * C, 0.3);
    const Buf x0 = x, wte0 = wte;
    Buf z_r((long)N * Vp), z((long)N * Vp);
    op_logits(z_r.p(), x.p(), wte.p(), N, C, Vp);
    cuda_op_logits(z.p(), x.p(), wte.p(), N, C, Vp);
    same("logits", z, z_r, true);
    intact({&z});
    unchanged("x", x, x0), unchanged("wte", wte, wte0);
    digest({&z});
}

/* ---- dense layers (matmul.cu, gemm.cu: cuBLASLt) ----------------------------- */

/* As test_gpu_ops's test_matmul: x ~ N(0, 1), w ~ N(0, 0.1), dout ~ N(0, 1),
 * dW accumulated into N(0, 0.01); the forward twice, bitwise; the
 * backward's dW from the forward's kept bf16 copy of x against one from a
 * copy of x that no forward read (a fresh cast), bitwise.  Then what
 * op_free is for: x is changed in place (the reuse of ops.h's contract
 * broken on purpose), so a backward that still reads the kept copy gives
 * the old x's dW bitwise; after op_free of any buffer the copy is
 * forgotten, and the backward gives the new x's dW, bitwise that of a
 * fresh cast; and a forward of the same x with other values must read the
 * new values.  The outputs are 64-byte aligned only, like the model's
 * tensors, less than the 256 bytes the heuristic assumes unless told: the
 * emulated cublasLtMatmul refuses a pointer less aligned than promised. */
static void test_matmul(int M, int K, int N) {
    const size_t L = Buf::G + 16; /* 64-byte aligned, not 128 */
    const long nx = (long)M * K, nw = (long)N * K, ny = (long)M * N;
    Buf x = normal(nx, 1), w = normal(nw, 0.1), dy = normal(ny, 1), dw0 = normal(nw, 0.01);
    const Buf x0 = x, w0 = w, dy0 = dy;
    Buf y_r(ny, nan_fill(), L), y(ny, nan_fill(), L), y2(ny, nan_fill(), L);
    op_matmul_fwd(y_r.p(), x.p(), w.p(), M, K, N);
    cuda_op_matmul_fwd(y.p(), x.p(), w.p(), M, K, N);
    same("fwd", y, y_r, true);
    Buf dx_r(nx, nan_fill(), L), dx(nx, nan_fill(), L), dw_r(nw, 0.f, L);
    for (long i = 0; i < nw; i++) dw_r[i] = dw0[i]; /* g++ 12 misread a memcpy here (-Wstringop-overflow) */
    Buf dw = dw_r;
    op_matmul_bwd(dx_r.p(), dw_r.p(), dy.p(), x.p(), w.p(), M, K, N);
    cuda_op_matmul_bwd(dx.p(), dw.p(), dy.p(), x.p(), w.p(), M, K, N);
    same("dinp", dx, dx_r, true);
    same("dw (accumulated)", dw, dw_r, true);
    cuda_op_matmul_fwd(y2.p(), x.p(), w.p(), M, K, N);
    bitwise("fwd twice", y, y2);

    Buf x2 = x, dw2(nw, 0.f, L), dw3(nw, 0.f, L);
    memcpy(dw2.p(), dw0.p(), sizeof(float) * nw), memcpy(dw3.p(), dw0.p(), sizeof(float) * nw);
    Buf dw4 = dw2, dw5 = dw2, dw6 = dw2;
    cuda_op_matmul_bwd(nullptr, dw2.p(), dy.p(), x.p(), w.p(), M, K, N);
    cuda_op_matmul_bwd(nullptr, dw3.p(), dy.p(), x2.p(), w.p(), M, K, N);
    bitwise("dw from the forward's copy vs a fresh cast", dw2, dw3);

    for (long i = 0; i < nx; i++) x[i] = -x[i] + 0.5f; /* no longer what the forward read */
    x2 = x;
    cuda_op_matmul_bwd(nullptr, dw4.p(), dy.p(), x.p(), w.p(), M, K, N);
    bitwise("dw from the kept copy (the old x) while nothing was freed", dw4, dw2);
    void *other = cuda_op_alloc(64);
    cuda_op_free(other);
    cuda_op_matmul_bwd(nullptr, dw5.p(), dy.p(), x.p(), w.p(), M, K, N);
    cuda_op_matmul_bwd(nullptr, dw6.p(), dy.p(), x2.p(), w.p(), M, K, N);
    bitwise("dw after op_free: the new x, as a fresh cast", dw5, dw6);
    CHECK(!same_bits(dw5, dw4), "%s: dw after op_free is still the old x's", g_tag.c_str());
    /* a forward whose x is kept refreshes the copy: x back as it was */
    Buf y3(ny, nan_fill(), L);
    cuda_op_matmul_fwd(y3.p(), x.p(), w.p(), M, K, N);
    for (long i = 0; i < nx; i++) x[i] = x0[i];
    cuda_op_matmul_fwd(y3.p(), x.p(), w.p(), M, K, N);
    bitwise("fwd of x again, after a forward of the changed x", y3, y);
    /* w's copy serves the backward's dinp the same way: changed in place
     * after the forward (which no caller may do), the backward still
     * multiplies by the w the forward read; a forward re-casts it */
    Buf dx2(nx, nan_fill(), L), dx3(nx, nan_fill(), L), w2 = w;
    for (long i = 0; i < nw; i++) w[i] = -w[i];
    cuda_op_matmul_bwd(dx2.p(), nullptr, dy.p(), x.p(), w.p(), M, K, N);
    bitwise("dinp from the forward's copy of w (the old w)", dx2, dx);
    cuda_op_matmul_fwd(y3.p(), x.p(), w.p(), M, K, N);
    cuda_op_matmul_bwd(dx3.p(), nullptr, dy.p(), x.p(), w.p(), M, K, N);
    cuda_op_matmul_bwd(dx2.p(), nullptr, dy.p(), x.p(), w2.p(), M, K, N); /* w2: no copy, cast afresh */
    for (long i = 0; i < nx; i++) dx2[i] = -dx2[i];
    bitwise("dinp after a forward of the changed w: the new w's", dx3, dx2);
    w = w0;
    cuda_op_free(cuda_op_alloc(64)); /* the next case starts with nothing kept */

    intact({&y, &y2, &y3, &dx, &dw, &dw2, &dw3, &dw4, &dw5, &dw6, &dx2, &dx3});
    unchanged("x", x, x0), unchanged("w", w, w0), unchanged("dout", dy, dy0);
    digest({&y, &dx, &dw, &dw5});
}

/* ---- the battery --------------------------------------------------------- */

static const char *const KIND[] = {"none", "norm", "proj"};

int main(int argc, char **argv) {
    /* The batteries name their tile kernels: unset, SG_ATTN means wmma here,
     * as it did when wmma was the default (the default itself, mma, is
     * checked against SG_ATTN=mma at the sgtrain level) */
    if (!getenv("SG_ATTN")) setenv("SG_ATTN", "wmma", 1);
    unsetenv("SG_MATMUL_KEEP"); /* the matmuls keep their bf16 copies: test_matmul checks the reuse */
    for (; argc > 1 && !strcmp(argv[1], "--shard"); argc--, argv++)
        if (battery_shard_option(argc, argv)) argc--, argv++;
    const char *filter = battery_args("ops_emu_test", "[--shard I/N] SEED DIGESTS [FILTER]", argc, argv);
    if (!filter) return 2;
    Cases cases(filter, 12);
    char tag[128];
    auto run = [&](const char *t, auto f) {
        if (!cases.begin(t)) return;
        f();
        cases.end();
    };

    /* test_gpu_ops's n (a partial last block, 13 sumsq chunks), one short
     * of a block, and sumsq over 257 chunks */
    for (long n : {100003L, 255L}) {
        snprintf(tag, sizeof tag, "gelu+add+adamw+sumsq n%ld", n);
        run(tag, [&] { test_pointwise(n); });
    }
    run("sumsq n2105351 (257 chunks)", [&] { test_sumsq(257L * 8192 - 1001); });
    run("adamw multi, moments of the whole buffer", [&] { test_adamw_multi(0); });
    run("adamw multi, moments from element 1000 (a shard's)", [&] { test_adamw_multi(1000); });
    /* K = 64: LayerNorm's register path; K = 30: its scalar kernels, and
     * GELU's scalar tail (M F odd) */
    run("bf16 operands M130 K64 F256", [&] { test_bf16_operands(130, 64, 256); });
    run("bf16 operands M37 K30 F91", [&] { test_bf16_operands(37, 30, 91); });

    /* test_gpu_ops's shapes; 2100 rows: more than 32 blocks of 64 rows, so
     * the dw/db reduction's lanes add several partials each */
    /* Then the register path's widths and edges: C = 1024 (8 float4 a
     * lane), 132 (idle lanes in the second float4), 768 with shifted
     * tensors (scalar loads), 130 rows (a last block of 2 rows); and the
     * scalar kernels: C = 30 (not a multiple of 4) and C = 1100 (over
     * 1024). */
    const int lnshape[][4] = {{50, 64, 1, 0},  {300, 768, 0, 0}, {2100, 40, 1, 0}, {70, 1024, 1, 0},
                              {33, 132, 0, 0}, {130, 768, 1, 1}, {37, 30, 1, 0},   {40, 1100, 1, 0}};
    for (auto &s : lnshape) {
        snprintf(tag, sizeof tag, "layernorm N%d C%d bias=%d%s", s[0], s[1], s[2], s[3] ? " shifted" : "");
        run(tag, [&] { test_layernorm(s[0], s[1], s[2], s[3]); });
    }
    const int rlshape[][3] = {{50, 64, 1}, {301, 768, 0}};
    for (auto &s : rlshape)
        for (int alias = 0; alias <= 2; alias++) {
            snprintf(tag, sizeof tag, "residual_layernorm N%d C%d bias=%d res=%s", s[0], s[1], s[2],
                     alias == 1 ? "a" : alias == 2 ? "b" : "own");
            run(tag, [&] { test_residual_layernorm(s[0], s[1], s[2], alias, 0); });
        }
    run("residual_layernorm N7 C100 bias=1 res=own", [&] { test_residual_layernorm(7, 100, 1, 0, 0); });
    run("residual_layernorm N50 C64 bias=1 res=own a shifted", [&] { test_residual_layernorm(50, 64, 1, 0, 1); });
    run("residual_layernorm N9 C30 bias=1 res=own", [&] { test_residual_layernorm(9, 30, 1, 0, 0); });
    run("residual_layernorm N5 C1100 bias=0 res=b", [&] { test_residual_layernorm(5, 1100, 0, 2, 0); });

    /* test_gpu_ops's two (one tile of the sorted order each), then several
     * tiles: test_gpu_ops's draw over 200 positions, the skewed draw (one
     * token through five tiles; with 161 positions the last tile holds one,
     * the end of the token of the tile before), and C = 300 (two passes
     * over the row) */
    const int emshape[][6] = {{2, 16, 32, 100, 0, 0}, {3, 9, 32, 50, 1, 0}, {4, 50, 32, 40, 1, 0},
                              {3, 60, 16, 9, 0, 1},   {2, 80, 24, 5, 1, 1}, {1, 161, 16, 6, 1, 1},
                              {2, 40, 300, 7, 1, 0}};
    for (auto &s : emshape) {
        snprintf(tag, sizeof tag, "embed B%d T%d C%d V%d sink=%d tokens=%s", s[0], s[1], s[2], s[3], s[4],
                 s[5] ? "skewed" : "test_gpu_ops");
        run(tag, [&] { test_embed(s[0], s[1], s[2], s[3], s[4], s[5]); });
    }

    /* test_gpu_ops's: both kinds and slots at (2, 17, 2, 16), the
     * projection's value slot at (2, 64, 6, 64); then no gate (g = 1) in
     * both slots, and d = 40 (10 float4 a read: 6 of gate.cu's 16 lanes a
     * read idle) with a zero v for the norm gate */
    struct GateCase {
        int kind, slot, B, T, H, d, zero, vpad = 0, shift = 0, bf16v = 0; /* vpad, shift, bf16v: as test_gate's */
    };
    std::vector<GateCase> gates;
    for (int kind = GATE_NORM; kind <= GATE_PROJ; kind++)
        for (int slot = 0; slot < 2; slot++) gates.push_back({kind, slot, 2, 17, 2, 16, 0});
    gates.push_back({GATE_PROJ, SLOT_VALUE, 2, 64, 6, 64, 0});
    for (int slot = 0; slot < 2; slot++) gates.push_back({GATE_NONE, slot, 2, 17, 2, 16, 0});
    for (int slot = 0; slot < 2; slot++) gates.push_back({GATE_NORM, slot, 1, 40, 3, 40, 1});
    gates.push_back({GATE_PROJ, SLOT_ROUTING, 1, 40, 3, 40, 0});
    /* gate.cu's float4 path, L lanes a read, NV float4 a lane: d = 64 (L 16,
     * two reads a warp) over 225 reads and 75 rows, neither a multiple of a
     * block's reads (64) nor of a tile's rows (64); d = 128 (L 32), 96 (L 32, 8
     * lanes idle), 192 and 256 (NV 2, half the lanes with one float4 at
     * 192), 384 and 512 (NV 4); d = 4, 8 and 12 (L 1, 2 and 4: 32, 16 and 8
     * reads a warp, the last with a lane idle) */
    for (int slot = 0; slot < 2; slot++) gates.push_back({GATE_NORM, slot, 1, 75, 3, 64, 1});
    gates.push_back({GATE_PROJ, SLOT_ROUTING, 1, 75, 3, 64, 0});
    for (int slot = 0; slot < 2; slot++) gates.push_back({GATE_PROJ, slot, 1, 37, 2, 128, 0});
    gates.push_back({GATE_NORM, SLOT_VALUE, 1, 37, 2, 128, 1});
    gates.push_back({GATE_PROJ, SLOT_VALUE, 1, 33, 2, 96, 0});
    gates.push_back({GATE_PROJ, SLOT_ROUTING, 1, 21, 2, 192, 0});
    gates.push_back({GATE_PROJ, SLOT_VALUE, 1, 19, 2, 256, 0});
    gates.push_back({GATE_NORM, SLOT_ROUTING, 1, 19, 2, 256, 1});
    gates.push_back({GATE_NORM, SLOT_ROUTING, 1, 9, 2, 384, 1});
    gates.push_back({GATE_PROJ, SLOT_VALUE, 1, 9, 1, 512, 0});
    gates.push_back({GATE_PROJ, SLOT_VALUE, 2, 45, 3, 4, 0});
    gates.push_back({GATE_NORM, SLOT_ROUTING, 1, 70, 2, 4, 1});
    gates.push_back({GATE_PROJ, SLOT_ROUTING, 1, 50, 3, 8, 0});
    gates.push_back({GATE_NORM, SLOT_VALUE, 1, 33, 2, 12, 1});
    gates.push_back({GATE_NONE, SLOT_VALUE, 1, 33, 2, 64, 0, 4});
    /* the scalar path: d = 30; row strides of 3C + 1 and 3C + 2; v, vg and
     * dvg, or dv off their 16-byte alignment.  And the float4 path with the
     * stride padded to 3C + 4. */
    for (int slot = 0; slot < 2; slot++) gates.push_back({GATE_NORM, slot, 1, 33, 3, 30, 1});
    gates.push_back({GATE_PROJ, SLOT_ROUTING, 1, 33, 3, 30, 0});
    gates.push_back({GATE_NONE, SLOT_VALUE, 1, 33, 3, 30, 0});
    gates.push_back({GATE_PROJ, SLOT_VALUE, 1, 40, 2, 64, 0, 1});
    gates.push_back({GATE_NORM, SLOT_ROUTING, 1, 40, 2, 64, 1, 1});
    gates.push_back({GATE_PROJ, SLOT_ROUTING, 1, 40, 2, 64, 0, 2});
    gates.push_back({GATE_PROJ, SLOT_VALUE, 1, 40, 2, 64, 0, 4});
    gates.push_back({GATE_PROJ, SLOT_VALUE, 1, 40, 2, 64, 0, 0, 1});
    gates.push_back({GATE_PROJ, SLOT_VALUE, 1, 40, 2, 64, 0, 0, 2});
    gates.push_back({GATE_NORM, SLOT_VALUE, 1, 40, 2, 64, 1, 0, 2});
    gates.push_back({GATE_PROJ, SLOT_ROUTING, 1, 40, 2, 64, 0, 0, 4});
    /* 2,100 rows and more: the parameter gradients' reduction adds 33 (d =
     * 64), 69 (d = 128 and the scalar path's d = 30: 32-row tiles) or 9 (d =
     * 16: 256-row tiles) partials per (h, k), several per warp */
    gates.push_back({GATE_PROJ, SLOT_VALUE, 3, 700, 2, 64, 0});
    gates.push_back({GATE_PROJ, SLOT_ROUTING, 2, 1100, 1, 128, 0});
    gates.push_back({GATE_NORM, SLOT_VALUE, 2, 1100, 2, 128, 1});
    gates.push_back({GATE_PROJ, SLOT_ROUTING, 3, 701, 1, 16, 0});
    gates.push_back({GATE_PROJ, SLOT_VALUE, 2, 1100, 1, 30, 0});
    /* v read from a qkv stored in bf16: both kinds and slots on the float4
     * path (d 64), the scalar path (d 30, a stride of 3C + 1) and v off its
     * 8-byte alignment (the scalar path too) */
    for (int kind = GATE_NORM; kind <= GATE_PROJ; kind++)
        for (int slot = 0; slot < 2; slot++) gates.push_back({kind, slot, 1, 75, 3, 64, kind == GATE_NORM, 0, 0, 1});
    gates.push_back({GATE_PROJ, SLOT_VALUE, 1, 33, 3, 30, 0, 0, 0, 1});
    gates.push_back({GATE_NORM, SLOT_ROUTING, 1, 40, 2, 64, 1, 1, 0, 1});
    gates.push_back({GATE_PROJ, SLOT_VALUE, 1, 40, 2, 64, 0, 0, 1, 1});
    for (const GateCase &c : gates) {
        char extra[64] = "";
        if (c.vpad) snprintf(extra, sizeof extra, " stride=3C+%d", c.vpad);
        if (c.shift)
            snprintf(extra + strlen(extra), sizeof extra - strlen(extra), " misaligned=%s",
                     c.shift == 1 ? "v" : c.shift == 2 ? "vg,dvg" : "dv");
        if (c.bf16v) snprintf(extra + strlen(extra), sizeof extra - strlen(extra), " v-bf16");
        snprintf(tag, sizeof tag, "gate %s %s B%d T%d H%d d%d%s%s", KIND[c.kind], c.slot ? "routing" : "value", c.B,
                 c.T, c.H, c.d, c.zero ? " zero-v" : "", extra);
        run(tag, [&] { test_gate(c.kind, c.slot, c.B, c.T, c.H, c.d, c.zero, c.vpad, c.shift, c.bf16v); });
    }

    /* test_gpu_ops's (37, 32, 100, 128) with every output, then with some
     * of them NULL; its (256, 384, 50257, 50304) is trimmed to an odd V
     * above the softmax's 512 threads with Vp padded to 64; 2100 rows in
     * chunks of 1000 (sg_classifier_set_chunk; a vocabulary this small
     * would otherwise be one chunk): three chunks, the last short, dwte
     * accumulating over them.  Widths: V 100 and 1031 end inside a group
     * of 8 columns, 9001 and GPT-2's 50257 of 50304 are the tiers' sizes
     * (a few rows each), and Vp 100 and 1030 (V 97 and 1030) are not
     * multiples of 8 (classifier.cu's softmax once took a 16-byte path
     * where they were). */
    const int clshape[][6] = {{37, 32, 100, 128, 7, 0}, {37, 32, 100, 128, 2, 0}, {37, 32, 100, 128, 5, 0},
                              {40, 64, 1031, 1088, 7, 0}, {2100, 8, 40, 48, 7, 1000}, {3, 16, 9001, 9024, 7, 0},
                              {2, 8, 50257, 50304, 7, 0}, {37, 32, 97, 100, 7, 0}, {5, 16, 1030, 1030, 3, 0}};
    for (auto &s : clshape) {
        snprintf(tag, sizeof tag, "classifier N%d C%d V%d Vp%d%s%s%s%s", s[0], s[1], s[2], s[3],
                 s[4] & 1 ? " losses" : "", s[4] & 2 ? " dx" : "", s[4] & 4 ? " dwte" : "",
                 s[5] ? " chunks of 1000" : "");
        sg_classifier_set_chunk(s[5]);
        run(tag, [&] { test_classifier(s[0], s[1], s[2], s[3], s[4]); });
        sg_classifier_set_chunk(0);
    }
    /* the chunk rule (classifier.cu): 1 GiB of bf16 logits, at Vp 50304
     * 10,672 rows; the tiers' micro-batches of 8 x 1024 rows are one
     * chunk, the 10M tier's 64 x 512 four equal ones */
    run("classifier chunk rule", [&] {
        const int want[][3] = {{37, 128, 37}, {8192, 50304, 8192}, {32768, 50304, 8192}, {10672, 50304, 10672},
                               {10673, 50304, 5376}, {100000, 50304, 10048}, {70000, 8000000, 67}};
        for (auto &w : want)
            CHECK(sg_classifier_chunk_rows(w[0], w[1]) == w[2], "classifier chunk of N %d, Vp %d: %d rows, want %d",
                  w[0], w[1], sg_classifier_chunk_rows(w[0], w[1]), w[2]);
    });
    run("logits N37 C32 Vp128", [&] { test_logits(37, 32, 128); });
    run("logits N5 C48 Vp1088", [&] { test_logits(5, 48, 1088); });

    /* test_gpu_ops's shapes */
    const int mmshape[][3] = {{64, 32, 96}, {130, 64, 192}, {512, 384, 1152}};
    for (auto &s : mmshape) {
        snprintf(tag, sizeof tag, "matmul M%d K%d N%d", s[0], s[1], s[2]);
        run(tag, [&] { test_matmul(s[0], s[1], s[2]); });
    }

    /* Appended after the rest, so that the cases before keep their inputs
     * (each case's stream follows its place in the battery).  The bf16
     * operand cases above with GELU's tanh form */
    run("bf16 operands M130 K64 F256 gelu_tanh", [&] { test_bf16_operands(130, 64, 256, true); });
    run("bf16 operands M37 K30 F91 gelu_tanh", [&] { test_bf16_operands(37, 30, 91, true); });

    /* GELU's tanh form: test_pointwise's n (the vector path and a scalar
     * tail of 3), one short of a block, and the special values */
    for (long n : {100003L, 255L}) {
        snprintf(tag, sizeof tag, "gelu_tanh n%ld", n);
        run(tag, [&] { test_gelu_tanh(n, false); });
    }
    run("gelu_tanh special values", [&] { test_gelu_tanh(0, true); });

    /* The biases, M rows of N: test_gpu_ops's (qkv's 3C at C = 256 over 130
     * rows: the float4 add, 3 row chunks of 64, the last of 2 rows); N = 77
     * (a multiple of neither 4 nor 64: the scalar add, a part-filled block)
     * over 2,100 rows (33 chunks: lane 0 of the column sum adds two
     * partials); N = 64 with out and dout off alignment (the scalar add);
     * N = 3072 (fc's 4C at 768: 12 column blocks); one row; and 17,000
     * rows (more than 64 x 256: 254 chunks of 67 rows) */
    const int bishape[][3] = {{130, 768, 0}, {2100, 77, 0}, {50, 64, 1}, {9, 3072, 0}, {1, 5, 0}, {17000, 3, 0}};
    for (auto &s : bishape) {
        snprintf(tag, sizeof tag, "bias M%d N%d%s", s[0], s[1], s[2] ? " shifted" : "");
        run(tag, [&] { test_bias(s[0], s[1], s[2]); });
    }

    /* The rotary embedding (rope.cu): q and k in one qkv buffer (ld 3C) at
     * B 2, T 5, H 3 with Pythia's 25% (d 64, rd 16), the whole head (d 64,
     * rd 64) and d 128, rd 32; the 25% case again from position 3 of the
     * table; 70 rows of 12 heads (d 64, rd 64: 768 pairs a row, three
     * blocks across) and of 12 heads at rd 16 (192 pairs, one part-filled
     * block); and 66,000 rows, past gridDim.y's 65,535 (the kernel's loop
     * over rows), of one head of d 4, rd 2 */
    const int roshape[][6] = {{2, 5, 3, 64, 16, 0},  {2, 5, 3, 64, 64, 0}, {2, 5, 3, 128, 32, 0},
                              {2, 5, 3, 64, 16, 3},  {1, 70, 12, 64, 64, 0}, {2, 35, 12, 64, 16, 0},
                              {1, 66000, 1, 4, 2, 0}};
    for (auto &s : roshape) {
        snprintf(tag, sizeof tag, "rope B%d T%d H%d d%d rd%d%s", s[0], s[1], s[2], s[3], s[4],
                 s[5] ? " from position 3" : "");
        run(tag, [&] { test_rope(s[0], s[1], s[2], s[3], s[4], s[5]); });
    }
    /* the embeddings without positions (rotary: wpe and dwpe NULL), with
     * and without the sink token (dsink alone; nothing at all left to the
     * position kernel), and the skewed draw through several tiles */
    const int enshape[][6] = {{2, 16, 32, 100, 0, 0}, {3, 9, 32, 50, 1, 0}, {2, 80, 24, 5, 1, 1}};
    for (auto &s : enshape) {
        snprintf(tag, sizeof tag, "embed B%d T%d C%d V%d sink=%d tokens=%s no wpe", s[0], s[1], s[2], s[3], s[4],
                 s[5] ? "skewed" : "test_gpu_ops");
        run(tag, [&] { test_embed(s[0], s[1], s[2], s[3], s[4], s[5], 1); });
    }

    /* the 16-byte softmax (classifier.cu) on a vocabulary that ends one
     * logit into its second group, with logits of order 1: a class more
     * or less in the sum moves the loss by about a tenth; then one whose
     * real logits all lie below the padded classes' 0 */
    run("classifier N16 C8 V9 Vp16 losses dx dwte", [&] { test_classifier(16, 8, 9, 16, 7); });
    /* 514 groups of 8, the last holding one logit: thread 1 reads it as
     * the second of a pair */
    run("classifier N4 C8 V4105 Vp4112 losses dx dwte, logits -8 to -2", [&] { test_classifier(4, 8, 4105, 4112, 7, true); });

    fclose(g_digests);
    printf("largest dynamic shared memory launched: %zu bytes; %ld thread switches\n", emu::max_smem_launched,
           emu::switches);
    return check_finish();
}
