/* The products on cuBLASLt (matmul.cu hands them bf16 operands): fp32
 * accumulation, an fp32 output, or a bf16 one for a tensor stored as a bf16
 * operand; column-major.  A plan per shape holds its layouts and the
 * heuristic's first choice.  cuBLASLt's results are deterministic for a
 * fixed algorithm on one GPU, and every call of a shape runs the same
 * algorithm, so two runs of one seed agree bitwise.
 *
 * Tuning (SG_MATMUL_TUNE=1, off by default).  The heuristic's first choice
 * is a guess; PyTorch's TunableOp times the candidates instead.  Here the
 * first call of a shape (a Plan) asks for up to TUNE_CANDIDATES
 * algorithms, runs each on the call's own operands into scratch outputs,
 * and keeps the fastest (median of TUNE_REPS, cudaEvent timing).  But an
 * algorithm may sum in another order (split-K, another reduction tree), and
 * then every result would change with the timing: two runs of one seed
 * would differ, and so would tuned and untuned runs.  So a candidate is
 * eligible only if its output is bitwise the first choice's, and for an
 * accumulating product (beta = 1) also with another C, made of the first
 * choice's output: a dW's first call accumulates into zeros (the model
 * zeroes its gradients), which would hide an algorithm that adds C in
 * another order.  Equal bits in every output of a real product come, in
 * practice, only from the same summation order, so the choice changes no
 * later result; test_gpu_ops checks tuned products against untuned ones on
 * the device.  The caller's output is written once, by the chosen
 * algorithm, after tuning (an accumulating dW is read as C, never written,
 * while the candidates run).  Costs: a few dozen products per shape, once;
 * scratch outputs of the largest tuned product's size, two of them (at
 * 124M, 8192 x 3072 floats, 100 MB each), kept.  A product with a bf16
 * output (a bf16 operand) keeps the first choice: two sums in different
 * orders usually round to the same bf16, so equal bits there would not
 * show the same order.  SG_MATMUL_STATS=1 (read by matmul.cu) prints each
 * tuned shape's candidates, rejections and times at exit. */
#include <stdint.h>
#include <string.h>

#include "cuda_common.h"

enum { THREADS = 256, CACHE = 64 };
static const size_t WORKSPACE = 32u << 20;

typedef struct {
    int m, n, k, ta, tb, lda, ldb, ldc, accumulate;
    int out_bf16; /* C and D bf16 (a bf16 operand, never accumulated into), else fp32 */
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t a, b, c;
    cublasLtMatmulAlgo_t first; /* the heuristic's first choice: what every untuned call runs */
    cublasLtMatmulAlgo_t algo;  /* the tuned choice, once tuned */
    int used, tuned;
    int n_cand, n_rejected;     /* tuning's record, for SG_MATMUL_STATS */
    float first_us, chosen_us;
} Plan;

static Plan g_plans[CACHE];

/* The workspace limit and the alignments the operands keep. */
static cublasLtMatmulPreference_t preference(void) {
    cublasLtMatmulPreference_t pref;
    CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    size_t ws = WORKSPACE;
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
    /* The heuristic otherwise assumes 256-byte-aligned pointers.  A and B are
     * bf16 scratch copies (256-byte aligned); C and D are the caller's fp32
     * tensors, which the model aligns to 64 bytes only (src/model.c). */
    uint32_t align_ab = 256, align_cd = 64;
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align_ab, sizeof align_ab));
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align_ab, sizeof align_ab));
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_cd, sizeof align_cd));
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_cd, sizeof align_cd));
    return pref;
}

static Plan *plan_for(int m, int n, int k, int ta, int tb, int lda, int ldb, int ldc, int accumulate,
                      int out_bf16) {
    for (int i = 0; i < CACHE; i++) {
        Plan *p = &g_plans[i];
        if (p->used && p->m == m && p->n == n && p->k == k && p->ta == ta && p->tb == tb && p->lda == lda &&
            p->ldb == ldb && p->ldc == ldc && p->accumulate == accumulate && p->out_bf16 == out_bf16)
            return p;
    }
    Plan *p = NULL;
    for (int i = 0; i < CACHE && !p; i++)
        if (!g_plans[i].used) p = &g_plans[i];
    if (!p) { /* more shapes than slots: recycle the first */
        p = &g_plans[0];
        cublasLtMatmulDescDestroy(p->op);
        cublasLtMatrixLayoutDestroy(p->a);
        cublasLtMatrixLayoutDestroy(p->b);
        cublasLtMatrixLayoutDestroy(p->c);
    }
    memset(p, 0, sizeof *p);
    p->m = m, p->n = n, p->k = k, p->ta = ta, p->tb = tb, p->lda = lda, p->ldb = ldb, p->ldc = ldc;
    p->accumulate = accumulate, p->out_bf16 = out_bf16;
    CUBLAS_CHECK(cublasLtMatmulDescCreate(&p->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasOperation_t opa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, opb = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof opa));
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof opb));
    /* stored shapes (column-major rows x cols) */
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->a, CUDA_R_16BF, ta ? k : m, ta ? m : k, lda));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->b, CUDA_R_16BF, tb ? n : k, tb ? k : n, ldb));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->c, out_bf16 ? CUDA_R_16BF : CUDA_R_32F, m, n, ldc));
    cublasLtMatmulPreference_t pref = preference();
    cublasLtMatmulHeuristicResult_t h;
    int found = 0;
    CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(sg_cublaslt(), p->op, p->a, p->b, p->c, p->c, pref, 1, &h, &found));
    cublasLtMatmulPreferenceDestroy(pref);
    if (!found) sg_cuda_fail(__FILE__, __LINE__, "cublasLtMatmulAlgoGetHeuristic", "no algorithm for this shape");
    p->first = h.algo;
    p->used = 1;
    return p;
}

/* D = op(A) op(B) + beta C with the plan's layouts (C and D alike, of the
 * plan's output type) */
static void lt_matmul(const Plan *p, const cublasLtMatmulAlgo_t *algo, float beta, const __nv_bfloat16 *a,
                      const __nv_bfloat16 *b, const void *c, void *d, void *ws) {
    const float alpha = 1.0f;
    CUBLAS_CHECK(cublasLtMatmul(sg_cublaslt(), p->op, &alpha, a, p->a, b, p->b, &beta, c, p->c, d, p->c, algo, ws,
                                WORKSPACE, sg_stream()));
}

/* ---- tuning (SG_MATMUL_TUNE=1; the comment at the top) ---- */

enum { TUNE_CANDIDATES = 8, TUNE_REPS = 5, DIFF_BLOCKS = 128 };
static int g_tune = -1; /* SG_MATMUL_TUNE, read once; sg_matmul_set_tune */

/* 1 on, 0 off, -1 a bad value */
static int tune_env(void) { return sg_env_switch("SG_MATMUL_TUNE", 0); }
#define TUNE_ERROR \
    "SG_MATMUL_TUNE must be \"0\" (or unset: the heuristic's first choice) or \"1\" (time the candidates)"

/* A bad SG_MATMUL_TUNE stops the program as it loads, with the usage
 * status, before a run directory exists (as a bad SG_ATTN does); tune_on
 * catches one set later. */
__attribute__((constructor)) static void tune_check_env(void) {
    if (tune_env() >= 0) return;
    fprintf(stderr, "%s: " TUNE_ERROR "\n", getenv("SG_MATMUL_TUNE"));
    exit(2);
}

static int tune_on(void) {
    if (g_tune < 0) {
        const int t = tune_env();
        if (t < 0) sg_cuda_fail(__FILE__, __LINE__, "SG_MATMUL_TUNE", TUNE_ERROR);
        g_tune = t;
    }
    return g_tune;
}

/* For a program that compares both ways (bench_gpu --matmul, test_gpu_ops):
 * overrides SG_MATMUL_TUNE.  Plans keep what tuning chose; a plan not yet
 * tuned is tuned at its next call while on, and every call while off runs
 * the first choice. */
extern "C" void sg_matmul_set_tune(int on) { g_tune = on != 0; }

/* Per block, how many elements (W: their words, fp32 or bf16) of x and y
 * differ in rows [0, rows) of cols columns (leading dimension ld); the host
 * adds the blocks' counts.  No atomics: the emulator has none, and this
 * runs once per shape. */
template <typename W>
__global__ void count_diff_k(unsigned long long *part, const W *x, const W *y, long rows, long cols, long ld) {
    __shared__ unsigned long long s[THREADS];
    unsigned long long c = 0;
    const long n = rows * cols, stride = (long)gridDim.x * blockDim.x;
    for (long i = (long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        const long at = i / rows * ld + i % rows;
        c += x[at] != y[at];
    }
    s[threadIdx.x] = c;
    __syncthreads();
    for (int w = THREADS / 2; w > 0; w >>= 1) {
        if ((int)threadIdx.x < w) s[threadIdx.x] += s[threadIdx.x + w];
        __syncthreads();
    }
    if (threadIdx.x == 0) part[blockIdx.x] = s[0];
}

/* the elements in which two of the plan's outputs differ; part: DIFF_BLOCKS counts of scratch */
static unsigned long long count_diff(const Plan *p, const void *x, const void *y, unsigned long long *part) {
    const long n = (long)p->m * p->n;
    if (n <= 0) return 0;
    const unsigned blocks = n < (long)DIFF_BLOCKS * THREADS ? sg_blocks(n, THREADS) : (unsigned)DIFF_BLOCKS;
    if (p->out_bf16)
        count_diff_k<<<blocks, THREADS, 0, sg_stream()>>>(part, (const unsigned short *)x, (const unsigned short *)y,
                                                           p->m, p->n, p->ldc);
    else
        count_diff_k<<<blocks, THREADS, 0, sg_stream()>>>(part, (const unsigned *)x, (const unsigned *)y, p->m, p->n,
                                                           p->ldc);
    CUDA_LAUNCHED();
    unsigned long long h[DIFF_BLOCKS], sum = 0;
    CUDA_CHECK(cudaMemcpyAsync(h, part, blocks * sizeof *h, cudaMemcpyDeviceToHost, sg_stream()));
    CUDA_CHECK(cudaStreamSynchronize(sg_stream()));
    for (unsigned i = 0; i < blocks; i++) sum += h[i];
    return sum;
}

/* The median time of TUNE_REPS runs of one algorithm, in µs. */
static float time_us(const Plan *p, const cublasLtMatmulAlgo_t *algo, float beta, const __nv_bfloat16 *a,
                     const __nv_bfloat16 *b, const void *c, void *d, void *ws, cudaEvent_t ev[2]) {
    float us[TUNE_REPS];
    for (int r = 0; r < TUNE_REPS; r++) {
        CUDA_CHECK(cudaEventRecord(ev[0], sg_stream()));
        lt_matmul(p, algo, beta, a, b, c, d, ws);
        CUDA_CHECK(cudaEventRecord(ev[1], sg_stream()));
        CUDA_CHECK(cudaEventSynchronize(ev[1]));
        float ms = 0;
        CUDA_CHECK(cudaEventElapsedTime(&ms, ev[0], ev[1]));
        int j = r; /* insertion into the sorted prefix */
        for (; j > 0 && us[j - 1] > 1000 * ms; j--) us[j] = us[j - 1];
        us[j] = 1000 * ms;
    }
    return us[TUNE_REPS / 2];
}

/* Chooses p->algo (the comment at the top), on the call's operands a and b
 * and, accumulating, its output d as C.  Only scratch is written.
 *
 * The twins' freshness count (sg_stream_seq) moves with every launch and
 * library call made here.  That cannot make a twin be taken wrongly or
 * missed: op_matmul_fwd and op_matmul_bwd (matmul.cu) look up every twin and kept copy
 * they use before their first cast or gemm issues anything, and an untuned
 * gemm already moves the count (cublasLtMatmul on sg_stream()), so no stamp
 * made before a gemm was ever fresh after it; tuning only moves it more
 * within the same call. */
static void tune(Plan *p, void *d, const __nv_bfloat16 *a, const __nv_bfloat16 *b, void *ws) {
    cublasLtMatmulHeuristicResult_t h[TUNE_CANDIDATES];
    int found = 0;
    cublasLtMatmulPreference_t pref = preference();
    CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(sg_cublaslt(), p->op, p->a, p->b, p->c, p->c, pref, TUNE_CANDIDATES,
                                                h, &found));
    cublasLtMatmulPreferenceDestroy(pref);
    /* the first choice is plan_for's, the untuned algorithm, whatever a
     * longer request puts first; then the others that fit */
    cublasLtMatmulAlgo_t cand[TUNE_CANDIDATES + 1];
    int nc = 0;
    cand[nc++] = p->first;
    for (int i = 0; i < found; i++)
        if (h[i].state == CUBLAS_STATUS_SUCCESS && h[i].workspaceSize <= WORKSPACE &&
            memcmp(&h[i].algo, &p->first, sizeof p->first))
            cand[nc++] = h[i].algo;

    /* ref: the first choice's output R; accumulating, also C2 (below) and
     * the first choice's output with C2 as C, a plane each.  out: a
     * candidate's output, then the blocks' counts.  Planes start 256-byte
     * aligned, as the C and D promises want. */
    const float beta = p->accumulate ? 1.0f : 0.0f;
    const size_t ld = (size_t)p->ldc, plane = (ld * p->n + 63) / 64 * 64;
    float *ref = (float *)sg_scratch(SCRATCH_TUNE_REF, (p->accumulate ? 3 : 1) * plane * sizeof(float));
    float *out =
        (float *)sg_scratch(SCRATCH_TUNE_OUT, plane * sizeof(float) + DIFF_BLOCKS * sizeof(unsigned long long));
    float *c2 = ref + plane, *ref2 = ref + 2 * plane;
    unsigned long long *part = (unsigned long long *)(out + plane);
    cudaEvent_t ev[2];
    CUDA_CHECK(cudaEventCreate(&ev[0]));
    CUDA_CHECK(cudaEventCreate(&ev[1]));

    lt_matmul(p, &cand[0], beta, a, b, d, ref, ws); /* also the first choice's warm-up */
    if (p->accumulate) {
        /* C2: R moved on by one column (one row if there is one column), so
         * that no output gets its own product as C: adding fl(x) to x
         * rounds alike in any order, which would hide an algorithm that
         * adds C apart.  Rows past m (ld > m) are moved along, unread. */
        const size_t at = p->n > 1 ? ld : 1, len = p->n > 1 ? ld * p->n : (size_t)p->m;
        CUDA_CHECK(cudaMemcpyAsync(c2, ref + at, (len - at) * sizeof *c2, cudaMemcpyDeviceToDevice, sg_stream()));
        CUDA_CHECK(cudaMemcpyAsync(c2 + len - at, ref, at * sizeof *c2, cudaMemcpyDeviceToDevice, sg_stream()));
        lt_matmul(p, &cand[0], beta, a, b, c2, ref2, ws);
    }
    const float first_us = time_us(p, &cand[0], beta, a, b, d, out, ws, ev);
    float best = first_us;
    int chosen = 0, rejected = 0;
    for (int i = 1; i < nc; i++) {
        lt_matmul(p, &cand[i], beta, a, b, d, out, ws); /* also its warm-up */
        unsigned long long diff = count_diff(p, out, ref, part);
        if (!diff && p->accumulate) {
            lt_matmul(p, &cand[i], beta, a, b, c2, out, ws);
            diff = count_diff(p, out, ref2, part);
        }
        if (diff) {
            rejected++;
            continue;
        }
        const float us = time_us(p, &cand[i], beta, a, b, d, out, ws, ev);
        if (us < best) best = us, chosen = i;
    }
    CUDA_CHECK(cudaEventDestroy(ev[0]));
    CUDA_CHECK(cudaEventDestroy(ev[1]));
    p->algo = cand[chosen];
    p->tuned = 1;
    p->n_cand = nc, p->n_rejected = rejected;
    p->first_us = first_us, p->chosen_us = best;
}

extern "C" void sg_gemm_print_tuning(void) {
    int used = 0, tuned = 0, bf16 = 0;
    for (int i = 0; i < CACHE; i++) {
        const Plan *p = &g_plans[i];
        bf16 += p->used && p->out_bf16;
        used += p->used && !p->out_bf16;
        if (!p->used || !p->tuned) continue;
        tuned++;
        fprintf(stderr,
                "sg matmul tune: m %d n %d k %d ta %d tb %d accumulate %d: %d candidates, %d rejected (other bits), "
                "first %.1f us, chosen %.1f us\n",
                p->m, p->n, p->k, p->ta, p->tb, p->accumulate, p->n_cand, p->n_rejected, p->first_us, p->chosen_us);
    }
    if (g_tune == 1 || tuned) {
        fprintf(stderr, "sg matmul tune: %d of %d shapes tuned\n", tuned, used);
        if (bf16) fprintf(stderr, "sg matmul tune: %d shapes with bf16 outputs keep the first choice\n", bf16);
    }
}

/* D[m,n] = alpha op(A) op(B) + beta D, column-major, bf16 operands, D fp32
 * or (out_bf16, not accumulating) bf16. */
extern "C" void sg_gemm(void *d, const __nv_bfloat16 *a, const __nv_bfloat16 *b, int m, int n, int k, int ta, int tb,
                 int lda, int ldb, int ldc, int accumulate, int out_bf16) {
    Plan *p = plan_for(m, n, k, ta, tb, lda, ldb, ldc, accumulate, out_bf16);
    void *ws = sg_scratch(SCRATCH_LT_WORKSPACE, WORKSPACE);
    /* A bf16 output is not tuned: equal bf16 bits, unlike equal fp32 bits,
     * would not show that a candidate sums in the first choice's order. */
    const int tuned = tune_on() && !out_bf16;
    if (tuned && !p->tuned) tune(p, d, a, b, ws);
    lt_matmul(p, tuned ? &p->algo : &p->first, accumulate ? 1.0f : 0.0f, a, b, d, d, ws);
}
