/* Token + position embedding on the device; the CPU reference is
 * kernels/cpu/embed.c.  out[B, Tp, C]: without a sink token Tp = T and row
 * (b,t) = wte[tok[b,t]] + wpe[t]; with one, Tp = T + 1, row (b,0) = sink and
 * row (b,t+1) = wte[tok[b,t]] + wpe[t].  wpe NULL (rotary positions): no
 * positional term, the rows are copies of the token embeddings.
 *
 * Backward (all three accumulate):
 *   dwte[v] += sum of dout rows (b, t+off) over the positions with tok = v
 *   dwpe[t] += sum_b dout(b, t+off)    (dwpe NULL with wpe NULL: not written)
 *   dsink   += sum_b dout(b, 0)
 *
 * dwte is a scatter-add: many positions can share a token.  To make it
 * deterministic without atomics, the positions p = b*T + t are sorted by
 * token with a stable radix sort (cub), so each token's positions form one
 * segment of the sorted order, in ascending position.  The sorted order is
 * cut into tiles of EMB_TILE positions.  Within a tile every thread owns
 * columns and walks the tile's positions in order:
 *   - a segment that lies inside the tile ("whole") is added to its dwte row
 *     directly, starting from the row's value: dwte + g_1 + g_2 + ..., the
 *     CPU reference's order, so those rows match it bit for bit;
 *   - a segment that crosses a tile boundary leaves one partial sum per tile
 *     it touches (its "tail" piece in the tile where it begins, a "head"
 *     piece in each later tile), and a second kernel, one block per segment
 *     that begins in a tile and crosses out of it, adds
 *     dwte + tail + head + head + ... in tile order.
 * Which tile and which kernel sums what depends only on the token values,
 * never on timing.  A frequent token costs its tile count in the second
 * kernel, not its position count.
 *
 * dwpe and dsink: one thread per element sums over b in order starting from
 * the accumulated value, as the CPU does (bitwise the same). */
extern "C" {
#include "ops.h"
}
#include "cuda_common.h"

#include <cub/device/device_radix_sort.cuh>

#define EMB_TILE 32 /* sorted positions per tile of the dwte backward */

enum { PIECE_WHOLE = 0, PIECE_HEAD = 1, PIECE_TAIL = 2 };

/* One block per output row. */
__global__ void embed_fwd_kernel(float *__restrict__ out, const int32_t *__restrict__ tokens,
                                 const float *__restrict__ wte, const float *__restrict__ wpe,
                                 const float *__restrict__ sink, int T, int C) {
    const int off = sink ? 1 : 0, Tp = T + off;
    const long r = blockIdx.x, b = r / Tp;
    const int tp = (int)(r % Tp);
    float *y = out + r * C;
    if (sink && tp == 0) {
        for (int c = threadIdx.x; c < C; c += blockDim.x) y[c] = sink[c];
        return;
    }
    const int t = tp - off;
    const float *e = wte + (long)tokens[b * T + t] * C;
    if (!wpe) {
        for (int c = threadIdx.x; c < C; c += blockDim.x) y[c] = e[c];
        return;
    }
    const float *p = wpe + (long)t * C;
    for (int c = threadIdx.x; c < C; c += blockDim.x) y[c] = e[c] + p[c];
}

__global__ void iota_kernel(int32_t *a, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) a[i] = i;
}

/* One block per tile of the sorted positions (stok: tokens, spos: positions,
 * both in sorted order).  part[(tile*2 + 0)*C] gets the tile's head piece,
 * part[(tile*2 + 1)*C] its tail piece. */
__global__ void __launch_bounds__(256)
embed_dwte_tile_kernel(float *__restrict__ dwte, float *__restrict__ part,
                       const float *__restrict__ dout, const int32_t *__restrict__ stok,
                       const int32_t *__restrict__ spos, int N, int T, int Tp, int off, int C) {
    __shared__ int32_t tok[EMB_TILE];
    __shared__ long row[EMB_TILE];
    __shared__ unsigned char first[EMB_TILE], last[EMB_TILE], kind[EMB_TILE];
    const int tile = blockIdx.x, i0 = tile * EMB_TILE;
    const int n = N - i0 < EMB_TILE ? N - i0 : EMB_TILE;
    const int j = threadIdx.x;
    if (j < n) {
        const int32_t pos = spos[i0 + j];
        tok[j] = stok[i0 + j];
        row[j] = (long)(pos / T) * Tp + pos % T + off; /* dout row of position (b,t) */
    }
    __syncthreads();
    if (j < n) {
        first[j] = j == 0 || tok[j] != tok[j - 1];
        last[j] = j == n - 1 || tok[j + 1] != tok[j];
        /* sorted: the tile's first run has tok[0], its last run tok[n-1] */
        const bool head = tok[j] == tok[0] && i0 > 0 && stok[i0 - 1] == tok[0];
        const bool tail = tok[j] == tok[n - 1] && i0 + n < N && stok[i0 + n] == tok[n - 1];
        kind[j] = head ? PIECE_HEAD : tail ? PIECE_TAIL : PIECE_WHOLE;
    }
    __syncthreads();
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        /* all loads first (independent, so they overlap), then the sums */
        float x[EMB_TILE], base[EMB_TILE];
#pragma unroll
        for (int k = 0; k < EMB_TILE; k++) {
            if (k < n) {
                x[k] = dout[row[k] * C + c];
                base[k] = first[k] && kind[k] == PIECE_WHOLE ? dwte[(long)tok[k] * C + c] : 0.f;
            }
        }
        float acc = 0.f;
#pragma unroll
        for (int k = 0; k < EMB_TILE; k++) {
            if (k < n) {
                if (first[k]) acc = base[k];
                acc += x[k];
                if (last[k]) {
                    if (kind[k] == PIECE_WHOLE)
                        dwte[(long)tok[k] * C + c] = acc;
                    else
                        part[((long)tile * 2 + (kind[k] == PIECE_TAIL)) * C + c] = acc;
                }
            }
        }
    }
}

/* One block per tile; it acts only if a segment begins in the tile and
 * continues past it (the tile's tail piece), and then adds that segment's
 * pieces in tile order. */
__global__ void __launch_bounds__(256)
embed_dwte_span_kernel(float *__restrict__ dwte, const float *__restrict__ part,
                       const int32_t *__restrict__ stok, int N, int C) {
    const int tile = blockIdx.x, i0 = tile * EMB_TILE;
    const int iend = N - i0 < EMB_TILE ? N : i0 + EMB_TILE; /* one past the tile */
    const int32_t v = stok[iend - 1];
    if (iend >= N || stok[iend] != v) return;               /* no segment leaves the tile */
    if (i0 > 0 && stok[i0] == v && stok[i0 - 1] == v) return; /* it began in an earlier tile */
    /* the segment's last tile: the first one whose successor does not start with v */
    int tend = tile + 1;
    while ((long)(tend + 1) * EMB_TILE < N && stok[(tend + 1) * EMB_TILE] == v) tend++;
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        float acc = dwte[(long)v * C + c];
        acc += part[((long)tile * 2 + 1) * C + c];
        for (int t = tile + 1; t <= tend; t++) acc += part[((long)t * 2) * C + c];
        dwte[(long)v * C + c] = acc;
    }
}

/* i < T*C: dwpe[i] (t = i / C); T*C <= i < (T+1)*C: dsink[i - T*C].
 * Without dwpe, T*C is taken as 0: i < C is dsink[i]. */
__global__ void embed_dwpe_kernel(float *__restrict__ dwpe, float *__restrict__ dsink,
                                  const float *__restrict__ dout, int B, int T, int Tp, int off,
                                  int C) {
    const long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    const long TC = dwpe ? (long)T * C : 0;
    const float *src;
    float *dst;
    if (i < TC) {
        const long t = i / C, c = i % C;
        src = dout + (t + off) * C + c;
        dst = dwpe + i;
    } else if (dsink && i < TC + C) {
        src = dout + (i - TC);
        dst = dsink + (i - TC);
    } else {
        return;
    }
    const long bstride = (long)Tp * C;
    float acc = *dst;
#pragma unroll 8
    for (int b = 0; b < B; b++) acc += src[b * bstride];
    *dst = acc;
}

/* threads per block for a C-wide row loop: the passes over C balanced */
static int row_threads(int C, int maxthreads) {
    const int passes = (C + maxthreads - 1) / maxthreads;
    const int per = (C + passes - 1) / passes;
    const int t = (per + 31) / 32 * 32;
    return t < 32 ? 32 : t;
}

static size_t align256(size_t n) { return (n + 255) / 256 * 256; }

extern "C" void op_embed_fwd(real *out, const int32_t *tokens, const real *wte, const real *wpe,
                             const real *sink, int B, int T, int C) {
    const long rows = (long)B * (sink ? T + 1 : T);
    if (rows == 0 || C <= 0) return;
    embed_fwd_kernel<<<(unsigned)rows, row_threads(C, 256), 0, sg_stream()>>>(out, tokens, wte,
                                                                              wpe, sink, T, C);
    CUDA_LAUNCHED();
}

extern "C" void op_embed_bwd(real *dwte, real *dwpe, real *dsink, const real *dout,
                             const int32_t *tokens, int B, int T, int C) {
    const int off = dsink ? 1 : 0, Tp = T + off, N = B * T;
    if (N == 0 || C <= 0) return;
    cudaStream_t st = sg_stream();

    /* scratch: sorted tokens, positions in and out, cub's temporary storage,
     * two partial rows per tile */
    const int ntiles = (N + EMB_TILE - 1) / EMB_TILE;
    size_t sort_bytes = 0;
    CUDA_CHECK(cub::DeviceRadixSort::SortPairs(NULL, sort_bytes, (const int32_t *)NULL,
                                               (int32_t *)NULL, (const int32_t *)NULL,
                                               (int32_t *)NULL, N, 0, 32, st));
    const size_t ib = align256(sizeof(int32_t) * (size_t)N);
    const size_t pb = align256(sizeof(float) * (size_t)ntiles * 2 * C);
    char *s = (char *)sg_scratch(SCRATCH_MISC, 3 * ib + align256(sort_bytes) + pb);
    int32_t *stok = (int32_t *)s, *pos = (int32_t *)(s + ib), *spos = (int32_t *)(s + 2 * ib);
    void *sort_tmp = s + 3 * ib;
    float *part = (float *)(s + 3 * ib + align256(sort_bytes));

    iota_kernel<<<sg_blocks(N, 256), 256, 0, st>>>(pos, N);
    CUDA_LAUNCHED();
    /* LSD radix sort: stable, so equal tokens keep ascending positions */
    CUDA_CHECK(cub::DeviceRadixSort::SortPairs(sort_tmp, sort_bytes, tokens, stok, pos, spos, N, 0,
                                               32, st));
    const int th = row_threads(C, 256);
    embed_dwte_tile_kernel<<<ntiles, th, 0, st>>>(dwte, part, dout, stok, spos, N, T, Tp, off, C);
    CUDA_LAUNCHED();
    embed_dwte_span_kernel<<<ntiles, th, 0, st>>>(dwte, part, stok, N, C);
    CUDA_LAUNCHED();

    const long nel = (long)((dwpe ? T : 0) + off) * C; /* dwpe's rows and dsink's */
    if (nel > 0) {
        embed_dwpe_kernel<<<sg_blocks(nel, 256), 256, 0, st>>>(dwpe, dsink, dout, B, T, Tp, off, C);
        CUDA_LAUNCHED();
    }
}
