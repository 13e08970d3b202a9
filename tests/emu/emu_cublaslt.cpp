/* The emulated cuBLASLt (cublasLt.h): descriptors, the heuristic and
 * cublasLtMatmul over the loop of emu_gemm.h.  Every refusal says why on
 * stderr, then returns the status cuBLASLt gives for it, so that the op's
 * CUBLAS_CHECK fails as it would on the device. */
#include "cublasLt.h"
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
    if (a->type != b->type || c->type != CUDA_R_32F || d->type != CUDA_R_32F)
        return p.bad = "types: A and B must match, C and D be fp32 (the emulated combinations)", p;
    p.m = (int)m, p.n = (int)n, p.k = (int)k;
    return p;
}

static const uint64_t ALGO_MAGIC = 0x656d756c74616c67; /* an algorithm that came from the heuristic */
static const uint64_t ALGO_WORKSPACE = 1u << 20;

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
    /* one algorithm: it needs the alignments the caller promised and up to
     * 1 MiB of workspace (within the caller's limit) */
    cublasLtMatmulHeuristicResult_t &r = heuristicResultsArray[0];
    memset(&r, 0, sizeof r);
    r.algo.data[0] = ALGO_MAGIC;
    for (int i = 0; i < 4; i++) r.algo.data[1 + i] = preference->align[i];
    r.workspaceSize = preference->max_workspace < ALGO_WORKSPACE ? preference->max_workspace : ALGO_WORKSPACE;
    r.algo.data[5] = r.workspaceSize;
    r.state = CUBLAS_STATUS_SUCCESS;
    r.wavesCount = 1;
    *returnAlgoCount = 1;
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
    if (!algo || algo->data[0] != ALGO_MAGIC)
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
    emu::gemm(p.ta, p.tb, p.m, p.n, p.k, *(const float *)alpha, {A, Adesc->type, (long)Adesc->ld},
              {B, Bdesc->type, (long)Bdesc->ld}, *(const float *)beta, (const float *)C, (long)Cdesc->ld, (float *)D,
              (long)Ddesc->ld);
    return CUBLAS_STATUS_SUCCESS;
}
