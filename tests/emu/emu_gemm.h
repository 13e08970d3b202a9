/* The one GEMM loop behind the emulated cuBLAS and cuBLASLt calls
 * (emu_cublas.cpp, emu_cublaslt.cpp): column-major, as both libraries,
 *   D = alpha op(A) op(B) + beta C,   op(A) m x k, op(B) k x n, C and D m x n,
 * with fp32 or bf16 operands (CUDA_R_16BF: 16-bit bfloat16, as cuda_bf16.h
 * without EMU_BF16_EXACT; no op of the EMU_BF16_EXACT build passes one) and
 * an fp32 C and D.  Products are exact and summed in double, so the result
 * is the exact sum rounded once: the device's sums (fp32, in its own order)
 * agree with it to fp32 rounding, not bitwise.  C is not read when beta is
 * 0, as in cuBLAS (it may hold NaN); C may be D. */
#ifndef SG_EMU_GEMM_H
#define SG_EMU_GEMM_H

#include "cublas_v2.h"

namespace emu {
struct GemmOperand {
    const void *p;
    cudaDataType type;
    long ld; /* elements between columns */
};
/* whether the loop reads this element type (fp32 or bf16) */
bool gemm_reads(cudaDataType t);
void gemm(bool ta, bool tb, int m, int n, int k, float alpha, GemmOperand A, GemmOperand B, float beta,
          const float *C, long ldc, float *D, long ldd);
}  // namespace emu

#endif
