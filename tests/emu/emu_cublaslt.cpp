/* The emulated cuBLASLt (cublasLt.h): descriptors, the heuristic and
 * cublasLtMatmul over the loop of emu_gemm.h.  Every refusal says why on
 * stderr, then returns the status cuBLASLt gives for it, so that the op's
 * CUBLAS_CHECK fails as it would on the device. */
#include <vector>

#include "cublasLt.h"
#include "cuda_bf16.h"
#include "emu_gemm.h"

struct emu_lt_desc {
    cublasComputeType_t compute;
    cudaDataType scale;
    int32_t transa, transb;
};
struct emu_lt_layout {
    cudaDataType type;
    uint64_t rows, cols;
    int64_t ld;
};
/* cuBLASLt's defaults: no workspace, 256-byte alignment of every matrix */
struct emu_lt_pref {
    uint64_t max_workspace = 0;
    uint32_t align[4] = {256, 256, 256, 256}; /* A, B, C, D */
};

static cublasStatus_t refuse(cublasStatus_t s, const char *why) {
    fprintf(stderr, "emu cuBLASLt: %s\n", why);
    return s;
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *desc, cublasComputeType_t computeType,
                                        cudaDataType_t scaleType) {
    if (!desc) return CUBLAS_STATUS_INVALID_VALUE;
    if (computeType != CUBLAS_COMPUTE_32F || scaleType != CUDA_R_32F)
        return refuse(CUBLAS_STATUS_NOT_SUPPORTED, "only CUBLAS_COMPUTE_32F with fp32 scaling is emulated");
    *desc = new emu_lt_desc{computeType, scaleType, CUBLAS_OP_N, CUBLAS_OP_N};
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc) {
    delete desc;
    return CUBLAS_STATUS_SUCCESS;
}
/* the attributes are int32_t (cublasOperation_t, cublasComputeType_t, ...) */
cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr,
                                              const void *buf, size_t sizeInBytes) {
    if (!desc || !buf || sizeInBytes != sizeof(int32_t))
        return refuse(CUBLAS_STATUS_INVALID_VALUE, "matmul descriptor attribute: not an int32_t");
    int32_t v;
    memcpy(&v, buf, 4);
    switch (attr) {
    case CUBLASLT_MATMUL_DESC_TRANSA:
    case CUBLASLT_MATMUL_DESC_TRANSB:
        if (v != CUBLAS_OP_N && v != CUBLAS_OP_T) return refuse(CUBLAS_STATUS_INVALID_VALUE, "transpose not N or T");
        (attr == CUBLASLT_MATMUL_DESC_TRANSA ? desc->transa : desc->transb) = v;
        return CUBLAS_STATUS_SUCCESS;
    case CUBLASLT_MATMUL_DESC_POINTER_MODE:
        if (v != 0) return refuse(CUBLAS_STATUS_NOT_SUPPORTED, "only host alpha and beta are emulated");
        return CUBLAS_STATUS_SUCCESS;
    default:
        return refuse(CUBLAS_STATUS_NOT_SUPPORTED, "matmul descriptor attribute not emulated");
    }
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *layout, cudaDataType type, uint64_t rows,
                                          uint64_t cols, int64_t ld) {
    if (!layout) return CUBLAS_STATUS_INVALID_VALUE;
    if (!emu::gemm_reads(type)) return refuse(CUBLAS_STATUS_NOT_SUPPORTED, "matrix type not emulated");
    *layout = new emu_lt_layout{type, rows, cols, ld};
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout) {
    delete layout;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *pref) {
    if (!pref) return CUBLAS_STATUS_INVALID_VALUE;
    *pref = new emu_lt_pref();
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) {
    delete pref;
    return CUBLAS_STATUS_SUCCESS;
}
/* MAX_WORKSPACE_BYTES is a uint64_t, the alignments uint32_t */
cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                    cublasLtMatmulPreferenceAttributes_t attr, const void *buf,
                                                    size_t sizeInBytes) {
    if (!pref || !buf) return CUBLAS_STATUS_INVALID_VALUE;
    if (attr == CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES) {
        if (sizeInBytes != sizeof(uint64_t)) return refuse(CUBLAS_STATUS_INVALID_VALUE, "workspace size: not a uint64_t");
        memcpy(&pref->max_workspace, buf, 8);
        return CUBLAS_STATUS_SUCCESS;
    }
    if (attr >= CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES && attr <= CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES) {
        if (sizeInBytes != sizeof(uint32_t)) return refuse(CUBLAS_STATUS_INVALID_VALUE, "alignment: not a uint32_t");
        memcpy(&pref->align[attr - CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES], buf, 4);
        return CUBLAS_STATUS_SUCCESS;
    }
    return refuse(CUBLAS_STATUS_NOT_SUPPORTED, "preference attribute not emulated");
}

/* m, n and k of D = op(A) op(B) + C from the layouts, as cuBLASLt derives
 * them, or the reason they do not fit together */
struct Problem {
    int m, n, k;
    bool ta, tb;
    bool d_bf16; /* C and D bf16: D is the fp32 result rounded to nearest even; only written (beta 0) */
    const char *bad;
};
static Problem problem(const emu_lt_desc *op, const emu_lt_layout *a, const emu_lt_layout *b,
                       const emu_lt_layout *c, const emu_lt_layout *d) {
    Problem p = {};
    if (!op || !a || !b || !c || !d) return p.bad = "a descriptor is NULL", p;
    p.ta = op->transa == CUBLAS_OP_T, p.tb = op->transb == CUBLAS_OP_T;
    const uint64_t m = p.ta ? a->cols : a->rows, k = p.ta ? a->rows : a->cols;
    const uint64_t kb = p.tb ? b->cols : b->rows, n = p.tb ? b->rows : b->cols;
    if (k != kb) return p.bad = "op(A) and op(B) differ in k", p;
    if (c->rows != m || c->cols != n || d->rows != m || d->cols != n) return p.bad = "C or D is not m x n", p;
    for (const emu_lt_layout *l : {a, b, c, d})
        if (l->ld < (int64_t)(l->rows > 1 ? l->rows : 1)) return p.bad = "a leading dimension below the rows", p;
    if (m > 0x7fffffff || n > 0x7fffffff || k > 0x7fffffff) return p.bad = "a dimension over 2^31", p;
    if (a->type != b->type || c->type != d->type ||
        (c->type != CUDA_R_32F && !(c->type == CUDA_R_16BF && a->type == CUDA_R_16BF)))
        return p.bad = "types: A and B must match, C and D be fp32, or bf16 with bf16 A and B (the emulated "
                       "combinations)", p;
    p.d_bf16 = d->type == CUDA_R_16BF;
    p.m = (int)m, p.n = (int)n, p.k = (int)k;
    return p;
}

static const uint64_t ALGO_MAGIC = 0x656d756c74616c67; /* an algorithm that came from the heuristic */
static const uint64_t ALGO_WORKSPACE = 1u << 20;

/* The algorithms the heuristic offers, first choice first; a request for n
 * gets the first n (for 1, the loop alone, as before).  They differ as
 * cuBLASLt's may, so that a tuner that must keep the first choice's bits
 * (kernels/cuda/gemm.cu, SG_MATMUL_TUNE) has something to reject:
 *   0  emu_gemm.h's loop: each output the exact sum plus beta C, rounded once;
 *   1  the same, in two halves of the columns (another tiling): the same bits;
 *   2  k in two halves, the second half's sum added to the first's fp32
 *      result (split-K): other bits;
 *   3  the product rounded to fp32, then beta C added in fp32 (another
 *      epilogue): the same bits where beta C is 0, other bits elsewhere.
 * Each call is charged a made-up time on the emulated clock
 * (emu::device_extra_ms, cuda_runtime.h's events): 2 looks fastest, then 3,
 * then 1.  A tuner without the bitwise test picks 2, and for a product
 * that accumulates into zeros while it is timed, 3. */
enum { N_ALGOS = 4 };
/* the margins (30 ms and more) dwarf the host's timing noise on a shape of
 * the tests, tens of ms under load, so the tuner's choice is decided by the
 * made-up times alone */
static const double ALGO_MS[N_ALGOS] = {90, 30, 0, 15};

/* x moved on by `by` along one of its dimensions: the stored rows (along_rows)
 * or the stored columns */
static emu::GemmOperand advance(emu::GemmOperand x, bool along_rows, long by) {
    x.p = static_cast<const char *>(x.p) + (along_rows ? by : by * x.ld) * (x.type == CUDA_R_16BF ? 2 : 4);
    return x;
}

static void run_algo(int algo, const Problem &p, float alpha, emu::GemmOperand A, emu::GemmOperand B, float beta,
                     const float *C, long ldc, float *D, long ldd) {
    const int m = p.m, n = p.n, k = p.k;
    switch (algo) {
    case 1: { /* op(B)'s columns: B's rows when transposed */
        const int n0 = n / 2;
        emu::gemm(p.ta, p.tb, m, n0, k, alpha, A, B, beta, C, ldc, D, ldd);
        emu::gemm(p.ta, p.tb, m, n - n0, k, alpha, A, advance(B, p.tb, n0), beta, C ? C + (long)n0 * ldc : C, ldc,
                  D + (long)n0 * ldd, ldd);
        return;
    }
    case 2: { /* op(A)'s k runs along A's rows when transposed, op(B)'s along B's rows when not */
        const int k0 = k / 2;
        emu::gemm(p.ta, p.tb, m, n, k0, alpha, A, B, beta, C, ldc, D, ldd);
        emu::gemm(p.ta, p.tb, m, n, k - k0, alpha, advance(A, p.ta, k0), advance(B, !p.tb, k0), 1.0f, D, ldd, D,
                  ldd);
        return;
    }
    case 3: {
        std::vector<float> t((size_t)m * n);
        emu::gemm(p.ta, p.tb, m, n, k, alpha, A, B, 0.0f, nullptr, m, t.data(), m);
        for (int j = 0; j < n; j++)
            for (int i = 0; i < m; i++)
                D[(long)j * ldd + i] = t[(size_t)j * m + i] + (beta == 0.f ? 0.f : beta * C[(long)j * ldc + i]);
        return;
    }
    default:
        emu::gemm(p.ta, p.tb, m, n, k, alpha, A, B, beta, C, ldc, D, ldd);
    }
}

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t handle, cublasLtMatmulDesc_t operationDesc,
                                              cublasLtMatrixLayout_t Adesc, cublasLtMatrixLayout_t Bdesc,
                                              cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc,
                                              cublasLtMatmulPreference_t preference, int requestedAlgoCount,
                                              cublasLtMatmulHeuristicResult_t heuristicResultsArray[],
                                              int *returnAlgoCount) {
    if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (!preference || requestedAlgoCount < 1 || !heuristicResultsArray || !returnAlgoCount)
        return CUBLAS_STATUS_INVALID_VALUE;
    *returnAlgoCount = 0;
    const Problem p = problem(operationDesc, Adesc, Bdesc, Cdesc, Ddesc);
    if (p.bad) return refuse(CUBLAS_STATUS_INVALID_VALUE, p.bad);
    /* each needs the alignments the caller promised and up to 1 MiB of
     * workspace (within the caller's limit) */
    const int count = requestedAlgoCount < N_ALGOS ? requestedAlgoCount : N_ALGOS;
    for (int a = 0; a < count; a++) {
        cublasLtMatmulHeuristicResult_t &r = heuristicResultsArray[a];
        memset(&r, 0, sizeof r);
        r.algo.data[0] = ALGO_MAGIC;
        for (int i = 0; i < 4; i++) r.algo.data[1 + i] = preference->align[i];
        r.workspaceSize = preference->max_workspace < ALGO_WORKSPACE ? preference->max_workspace : ALGO_WORKSPACE;
        r.algo.data[5] = r.workspaceSize;
        r.algo.data[6] = (uint64_t)a;
        r.state = CUBLAS_STATUS_SUCCESS;
        r.wavesCount = 1;
    }
    *returnAlgoCount = count;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t handle, cublasLtMatmulDesc_t computeDesc, const void *alpha,
                              const void *A, cublasLtMatrixLayout_t Adesc, const void *B,
                              cublasLtMatrixLayout_t Bdesc, const void *beta, const void *C,
                              cublasLtMatrixLayout_t Cdesc, void *D, cublasLtMatrixLayout_t Ddesc,
                              const cublasLtMatmulAlgo_t *algo, void *workspace, size_t workspaceSizeInBytes,
                              cudaStream_t) {
    if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
    const Problem p = problem(computeDesc, Adesc, Bdesc, Cdesc, Ddesc);
    if (p.bad) return refuse(CUBLAS_STATUS_INVALID_VALUE, p.bad);
    if (!alpha || !beta) return refuse(CUBLAS_STATUS_INVALID_VALUE, "alpha or beta is NULL");
    if (!algo || algo->data[0] != ALGO_MAGIC || algo->data[6] >= N_ALGOS)
        return refuse(CUBLAS_STATUS_INVALID_VALUE, "the algorithm is not one the heuristic returned");
    if (workspaceSizeInBytes < algo->data[5] || (algo->data[5] && !workspace))
        return refuse(CUBLAS_STATUS_INVALID_VALUE, "workspace smaller than the algorithm's");
    const void *ptr[4] = {A, B, C, D};
    for (int i = 0; i < 4; i++)
        if ((uintptr_t)ptr[i] % algo->data[1 + i])
            return refuse(CUBLAS_STATUS_NOT_SUPPORTED, "a matrix less aligned than the preference promised");
    if (C == D && (Cdesc->ld != Ddesc->ld || Cdesc->type != Ddesc->type))
        return refuse(CUBLAS_STATUS_NOT_SUPPORTED, "in place (C == D) with different C and D layouts");
    if (algo->data[5]) memset(workspace, 0xff, algo->data[5]); /* the algorithm's scratch */
    if (p.d_bf16) {
        /* cuBLASLt's epilogue rounds the fp32 result, each algorithm's own, to bf16 */
        if (*(const float *)beta != 0.f) return refuse(CUBLAS_STATUS_NOT_SUPPORTED, "a bf16 C is only written (beta 0)");
        std::vector<float> t((size_t)p.m * p.n);
        run_algo((int)algo->data[6], p, *(const float *)alpha, {A, Adesc->type, (long)Adesc->ld},
                 {B, Bdesc->type, (long)Bdesc->ld}, 0.f, nullptr, p.m, t.data(), p.m);
        __nv_bfloat16 *d = static_cast<__nv_bfloat16 *>(D);
        for (int j = 0; j < p.n; j++)
            for (int i = 0; i < p.m; i++) d[(long)j * Ddesc->ld + i] = __float2bfloat16_rn(t[(size_t)j * p.m + i]);
    } else
        run_algo((int)algo->data[6], p, *(const float *)alpha, {A, Adesc->type, (long)Adesc->ld},
                 {B, Bdesc->type, (long)Bdesc->ld}, *(const float *)beta, (const float *)C, (long)Cdesc->ld,
                 (float *)D, (long)Ddesc->ld);
    emu::device_extra_ms += ALGO_MS[algo->data[6]];
    return CUBLAS_STATUS_SUCCESS;
}
