/* SG_ATTN=cudnn: the streaming attention ops (op_attention_fwd and
 * op_attention_bwd) on cuDNN's fused attention (cudnn_sdpa.h), fed the
 * operands the mma path prepares.
 *
 * What goes in.  q, k, v and dO are the mma path's bf16 operands
 * (AttnOp): read in place from a qkv stored in bf16, from the forward's
 * kept packs, or packed, with their strides.  cuDNN takes [B, H, T, d]
 * tensors of any strides, so each AttnOp is handed over as it is.  The
 * phantom is cuDNN's sink token: the learned logits, or zeros for the
 * off-by-one arm.  The backward's O is the forward's output rounded to
 * bf16: the forward widened cuDNN's bf16 O into it, so that rounding gives
 * back the very bits cuDNN wrote.
 *
 * What comes out.  cuDNN writes bf16 O, dq, dk and dv, as PyTorch's
 * attention does under autocast.  O goes straight into the attention
 * output's matmul twin when it has one (the projection reads it there),
 * and is widened into the fp32 output the backward and the analyses read.
 * dq and dk (and dv, when it is the last third of the same row) go into
 * dqkv's twin, and are widened into the fp32 tensor only where the model
 * reads it in fp32 (sg_twin_fp32); the value gates' dv, apart, is widened
 * for the gate's backward.  Anything without a twin goes through bf16
 * scratch of [B T, H d] and is widened into place.
 *
 * What it does not take: the routing-slot control's per-key log-bias
 * (cuDNN's bias gradient is for full [T, T] biases, ours is a column sum of
 * dS), head dims that are not multiples of 8 up to 256, and whatever cuDNN
 * itself refuses (an old cuDNN, a GPU it has no engine for).  Those run on
 * the mma tiles, with the same operands, and the first refusal of each
 * kind is said once on stderr. */
#include <set>
#include <string>

#include "attention_cuda.h"
#include "cudnn_sdpa.h"

static long g_cudnn_calls[2]; /* forwards, backwards */
extern "C" long sg_attn_cudnn_calls(int bwd) { return g_cudnn_calls[bwd != 0]; }

/* Says why cuDNN did not take a call, once for each reason. */
static void attn_cudnn_refused(const char *what, const char *why) {
    static std::set<std::string> said;
    std::string key = std::string(what) + ": " + why;
    if (!said.insert(key).second) return;
    fprintf(stderr, "sg attention: SG_ATTN=cudnn: cuDNN does not take the %s (%s); the mma tiles run it\n", what,
            why);
}

/* cuDNN can be asked: no log-bias, a head dim it has engines for */
static bool attn_cudnn_takes(const AttnArgs *a, const char *what) {
    if (a->logbias) {
        attn_cudnn_refused(what, "the routing-slot control's per-key log-bias, whose gradient is a column sum of dS");
        return false;
    }
    if (a->d % 8 != 0 || a->d > 256) {
        attn_cudnn_refused(what, "head dims must be multiples of 8 up to 256");
        return false;
    }
    return true;
}

/* The phantom logits as cuDNN's sink token: the learned ones, or H zeros
 * (the off-by-one arm), or none. */
static const float *attn_cudnn_sink(const AttnArgs *a) {
    if (!a->phantom) return nullptr;
    if (a->sink) return a->sink;
    static float *zeros;
    static int have;
    if (a->H > have) {
        if (zeros) CUDA_CHECK(sg_free(zeros));
        zeros = nullptr;
        if (sg_malloc((void **)&zeros, sizeof(float) * (size_t)a->H) != cudaSuccess)
            sg_out_of_memory(sizeof(float) * (size_t)a->H, "the off-by-one arm's zero sink logits");
        CUDA_CHECK(cudaMemsetAsync(zeros, 0, sizeof(float) * (size_t)a->H, sg_stream()));
        have = a->H;
    }
    return zeros;
}

static SgSdpaTensor attn_sdpa_tensor(const AttnOp &op) { return {(void *)op.p, op.bs, op.hs, (long)op.rs}; }
/* [B T, H d] rows `stride` elements apart */
static SgSdpaTensor attn_sdpa_rows(sg_bf16 *p, const AttnArgs *a, long stride) {
    return {(void *)p, (long)a->T * stride, (long)a->d, stride};
}

static SgSdpa attn_sdpa_base(const AttnArgs *a, const AttnGeom &g, const AttnOp *op, float *lse) {
    SgSdpa s;
    memset(&s, 0, sizeof s);
    s.B = a->B, s.H = a->H, s.T = a->T, s.d = a->d;
    s.scale = g.scale;
    s.sink = attn_cudnn_sink(a);
    s.q = attn_sdpa_tensor(op[0]), s.k = attn_sdpa_tensor(op[1]), s.v = attn_sdpa_tensor(op[2]);
    s.lse = lse;
    s.stream = sg_stream();
    return s;
}

/* dst[r ds + c] = src[r ss + c] for r < rows, c < cols, converted (bf16 to
 * fp32 exactly, fp32 to bf16 by sg_cast_bf16); 4 elements a thread where
 * cols and both strides are multiples of 4 */
static __device__ __forceinline__ float attn_cvt(sg_bf16 x, float *) { return __bfloat162float(x); }
static __device__ __forceinline__ sg_bf16 attn_cvt(float x, sg_bf16 *) { return sg_cast_bf16(x); }
template <typename TD, typename TS>
static __global__ void attn_rows_copy_kernel(TD *__restrict__ dst, long ds, const TS *__restrict__ src, long ss,
                                             long rows, int cols, int per) {
    const long n = rows * (cols / per);
    for (long i = (long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x) {
        const long r = i / (cols / per);
        const int c = (int)(i % (cols / per)) * per;
        for (int e = 0; e < per; e++) dst[r * ds + c + e] = attn_cvt(src[r * ss + c + e], dst);
    }
}
template <typename TD, typename TS>
static void attn_rows_copy(TD *dst, long ds, const TS *src, long ss, long rows, int cols) {
    const int per = cols % 4 == 0 && ds % 4 == 0 && ss % 4 == 0 ? 4 : 1;
    const long n = rows * (cols / per);
    const unsigned blocks = (unsigned)(n < 65536L * 256 ? sg_blocks(n, 256) : 65536);
    attn_rows_copy_kernel<<<blocks, 256, 0, sg_stream()>>>(dst, ds, src, ss, rows, cols, per);
    CUDA_LAUNCHED();
}

/* true: ran; false after a refusal (said); stops on a failure to run */
static bool attn_cudnn_ran(int r, const char *what, const char *why) {
    if (r == 2) sg_cuda_fail(__FILE__, __LINE__, what[0] == 'b' ? "cuDNN attention backward" : "cuDNN attention forward", why);
    if (r == 1) {
        attn_cudnn_refused(what, why);
        return false;
    }
    g_cudnn_calls[what[0] == 'b']++;
    return true;
}

bool attn_cudnn_fwd(real *out, real *lse, const AttnArgs *a, const AttnGeom &g, const AttnOp op[3], sg_bf16 *twin) {
    if (!attn_cudnn_takes(a, "forward")) return false;
    const long C = (long)a->H * a->d, rows = (long)a->B * a->T;
    /* the twin exists only for whole rows (o_stride == C) */
    sg_bf16 *o = twin ? twin : (sg_bf16 *)sg_scratch(SCRATCH_ATTN_BF16, sizeof(sg_bf16) * (size_t)(rows * C));
    SgSdpa s = attn_sdpa_base(a, g, op, lse);
    s.o = attn_sdpa_rows(o, a, C);
    char why[1024];
    if (!attn_cudnn_ran(sg_cudnn_sdpa_fwd(&s, why, sizeof why), "forward", why)) return false;
    attn_rows_copy(out, a->o_stride, o, C, rows, (int)C);
    return true;
}

bool attn_cudnn_bwd(real *dq, real *dk, real *dv, const real *out, const real *lse, const AttnArgs *a,
                    const AttnGeom &g, const AttnOp op[4], sg_bf16 *twin) {
    if (!attn_cudnn_takes(a, "backward")) return false;
    const long C = (long)a->H * a->d, rows = (long)a->B * a->T, n = rows * C;
    /* with a twin, dq and dk are the first two thirds of one [B T, 3C] row
     * (op_attention_bwd), and dv the last one when it is not apart */
    const bool whole = twin && dv == dq + 2 * C && a->v_stride == 3 * C;
    const int mirrors = twin ? (whole ? 0 : 1) : 3;
    sg_bf16 *buf = (sg_bf16 *)sg_scratch(SCRATCH_ATTN_BF16, sizeof(sg_bf16) * (size_t)(n * (1 + mirrors)));
    sg_bf16 *ob = buf, *m = buf + n;
    attn_rows_copy(ob, C, out, a->o_stride, rows, (int)C);

    SgSdpa s = attn_sdpa_base(a, g, op, (float *)lse);
    s.o = attn_sdpa_rows(ob, a, C);
    s.dout = attn_sdpa_tensor(op[3]);
    if (twin) {
        s.dq = attn_sdpa_rows(twin, a, 3 * C);
        s.dk = attn_sdpa_rows(twin + C, a, 3 * C);
        s.dv = whole ? attn_sdpa_rows(twin + 2 * C, a, 3 * C) : attn_sdpa_rows(m, a, C);
    } else {
        s.dq = attn_sdpa_rows(m, a, C);
        s.dk = attn_sdpa_rows(m + n, a, C);
        s.dv = attn_sdpa_rows(m + 2 * n, a, C);
    }
    char why[1024];
    if (!attn_cudnn_ran(sg_cudnn_sdpa_bwd(&s, why, sizeof why), "backward", why)) return false;
    if (twin) {
        if (g.f32) {
            attn_rows_copy(dq, a->q_stride, twin, 3 * C, rows, (int)C);
            attn_rows_copy(dk, a->k_stride, twin + C, 3 * C, rows, (int)C);
            if (whole) attn_rows_copy(dv, a->v_stride, twin + 2 * C, 3 * C, rows, (int)C);
        }
        if (!whole) attn_rows_copy(dv, a->v_stride, m, C, rows, (int)C);
    } else {
        attn_rows_copy(dq, a->q_stride, m, C, rows, (int)C);
        attn_rows_copy(dk, a->k_stride, m + n, C, rows, (int)C);
        attn_rows_copy(dv, a->v_stride, m + 2 * n, C, rows, (int)C);
    }
    return true;
}
