/* Stand-in for mma.h in the emulated build: nvcuda::wmma with 16x16x16
 * fragments (bf16 operands, fp32 accumulator), the only shape the
 * attention kernels use.
 *
 * Emulated at the level of the API, not of the hardware's register layout:
 * every lane holds the whole 16x16 matrix of a fragment (the device spreads
 * it over the lanes in an unspecified layout, so code may not depend on it
 * anyway).  Operands are whatever the bf16 tiles hold (cuda_bf16.h: rounded
 * like the device's); products are summed in fp32 over k in order, which is
 * not the tensor cores' internal order or precision: results agree with the
 * device to fp32 rounding of the sums, not bitwise.
 *
 * Checked, as the device requires: pointers 32-byte aligned, ldm a multiple
 * of 16 bytes, and (for these kernels) every tile inside the launched
 * dynamic shared memory.  A store writes only the elements idx % 32 == lane,
 * so a lane that reads another lane's part of a stored tile without a
 * __syncwarp in between reads stale data for some schedules. */
#ifndef SG_EMU_MMA_H
#define SG_EMU_MMA_H

#include "cuda_bf16.h"
#include "emu_threads.h"

namespace nvcuda {
namespace wmma {
struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };
template <class Use, int M, int N, int K, class T, class Layout = void>
struct fragment {
    static_assert(M == 16 && N == 16 && K == 16, "emulated: 16x16x16 fragments only");
    float v[16][16];
};

template <class T>
inline void emu_check_tile(const T *p, unsigned ldm) {
    if (((uintptr_t)p & 31) != 0) {
        fprintf(stderr, "emu wmma: tile pointer not 32-byte aligned\n");
        abort();
    }
    if ((ldm * sizeof(T)) % 16 != 0) {
        fprintf(stderr, "emu wmma: ldm %u is not a multiple of 16 bytes\n", ldm);
        abort();
    }
    const unsigned char *lo = (const unsigned char *)p, *hi = (const unsigned char *)(p + 15 * ldm + 16);
    if (lo < emu::smem_lo || hi > emu::smem_hi) {
        fprintf(stderr, "emu wmma: tile outside the launched dynamic shared memory\n");
        abort();
    }
}
inline float emu_value(__nv_bfloat16 x) { return __bfloat162float(x); }
inline float emu_value(float x) { return x; }

/* f.v[row][col] of the matrix as the product uses it (A: M x K, B: K x N) */
template <class Use, class T>
inline void load_matrix_sync(fragment<Use, 16, 16, 16, T, row_major> &f, const T *p, unsigned ldm) {
    emu_check_tile(p, ldm);
    for (int r = 0; r < 16; r++)
        for (int c = 0; c < 16; c++) f.v[r][c] = emu_value(p[r * ldm + c]);
}
template <class Use, class T>
inline void load_matrix_sync(fragment<Use, 16, 16, 16, T, col_major> &f, const T *p, unsigned ldm) {
    emu_check_tile(p, ldm);
    for (int r = 0; r < 16; r++)
        for (int c = 0; c < 16; c++) f.v[r][c] = emu_value(p[c * ldm + r]);
}
inline void store_matrix_sync(float *p, const fragment<accumulator, 16, 16, 16, float> &f, unsigned ldm,
                              layout_t layout) {
    emu_check_tile(p, ldm);
    if (layout != mem_row_major) {
        fprintf(stderr, "emu wmma: only row-major stores are emulated\n");
        abort();
    }
    for (int idx = emu::cur->lane; idx < 256; idx += 32) p[(idx / 16) * ldm + idx % 16] = f.v[idx / 16][idx % 16];
}
template <class Use, class T, class L>
inline void fill_fragment(fragment<Use, 16, 16, 16, T, L> &f, float x) {
    for (int r = 0; r < 16; r++)
        for (int c = 0; c < 16; c++) f.v[r][c] = x;
}
/* d = a b + c; d may alias c */
template <class T, class LA, class LB>
inline void mma_sync(fragment<accumulator, 16, 16, 16, float> &d, const fragment<matrix_a, 16, 16, 16, T, LA> &a,
                     const fragment<matrix_b, 16, 16, 16, T, LB> &b,
                     const fragment<accumulator, 16, 16, 16, float> &c) {
    float r[16][16];
    memcpy(r, c.v, sizeof r);
    for (int k = 0; k < 16; k++)
        for (int i = 0; i < 16; i++)
            for (int j = 0; j < 16; j++) r[i][j] += a.v[i][k] * b.v[k][j];
    memcpy(d.v, r, sizeof r);
}
}  // namespace wmma
}  // namespace nvcuda

#endif
