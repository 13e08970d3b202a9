/* Stand-in for CUB's device radix sort in the emulated build: the one call
 * kernels/cuda/embed.cu makes, DeviceRadixSort::SortPairs, with CUB's
 * contract.
 *   - A first call with d_temp_storage NULL only sets temp_storage_bytes.
 *   - The second sorts the num_items (key, value) pairs by bits
 *     [begin_bit, end_bit) of the key, stably (an LSD radix sort keeps
 *     the input order among equal keys, which the op relies on), in CUB's
 *     order for the key type: signed integers in numeric order.  Keys are
 *     written whole, not just their sorted bits.
 *   - The outputs may not overlap the inputs, nor the temporary storage
 *     either; that must be at least what the first call asked for, and is
 *     overwritten with NaN bytes, as the device's sort leaves it used.
 * Emulated as a std::stable_sort on the host (device memory is host memory
 * here), so nothing is said about CUB's kernels or their speed. */
#ifndef SG_EMU_CUB_DEVICE_RADIX_SORT_CUH
#define SG_EMU_CUB_DEVICE_RADIX_SORT_CUH

#include <algorithm>
#include <climits>
#include <type_traits>
#include <vector>

#include "cuda_runtime.h"

namespace cub {
struct DeviceRadixSort {
    template <class KeyT, class ValueT, class NumItemsT>
    static cudaError_t SortPairs(void *d_temp_storage, size_t &temp_storage_bytes, const KeyT *d_keys_in,
                                 KeyT *d_keys_out, const ValueT *d_values_in, ValueT *d_values_out,
                                 NumItemsT num_items, int begin_bit = 0, int end_bit = sizeof(KeyT) * 8,
                                 cudaStream_t stream = 0) {
        static_assert(std::is_integral<KeyT>::value, "emulated: integer keys only");
        (void)stream;
        const size_t n = num_items > 0 ? (size_t)num_items : 0;
        /* a size of CUB's kind: double buffers of keys and values, and histograms */
        const size_t need = 2 * n * (sizeof(KeyT) + sizeof(ValueT)) + 4096;
        if (!d_temp_storage) {
            temp_storage_bytes = need;
            return cudaSuccess;
        }
        if (temp_storage_bytes < need || begin_bit < 0 || end_bit > (int)sizeof(KeyT) * 8 || begin_bit >= end_bit)
            return cudaErrorInvalidValue;
        auto overlap = [n](const void *a, size_t ea, const void *b, size_t eb) {
            const char *x = (const char *)a, *y = (const char *)b;
            return n && x < y + n * eb && y < x + n * ea;
        };
        const char *tmp = (const char *)d_temp_storage;
        auto in_tmp = [&](const void *a, size_t e) {
            const char *x = (const char *)a;
            return n && x < tmp + need && tmp < x + n * e;
        };
        if (overlap(d_keys_in, sizeof(KeyT), d_keys_out, sizeof(KeyT)) ||
            overlap(d_values_in, sizeof(ValueT), d_values_out, sizeof(ValueT)) || in_tmp(d_keys_in, sizeof(KeyT)) ||
            in_tmp(d_keys_out, sizeof(KeyT)) || in_tmp(d_values_in, sizeof(ValueT)) ||
            in_tmp(d_values_out, sizeof(ValueT)))
            return cudaErrorInvalidValue;
        /* CUB's bit order: the sign bit of a signed key flipped */
        typedef typename std::make_unsigned<KeyT>::type U;
        const U flip = std::is_signed<KeyT>::value ? (U)((U)1 << (sizeof(KeyT) * 8 - 1)) : 0;
        const int width = end_bit - begin_bit;
        const U mask = width >= (int)sizeof(U) * 8 ? (U)~(U)0 : (U)(((U)1 << width) - 1);
        auto digit = [&](KeyT k) { return (U)((U)((U)k ^ flip) >> begin_bit) & mask; };
        std::vector<size_t> idx(n);
        for (size_t i = 0; i < n; i++) idx[i] = i;
        std::stable_sort(idx.begin(), idx.end(),
                         [&](size_t a, size_t b) { return digit(d_keys_in[a]) < digit(d_keys_in[b]); });
        for (size_t i = 0; i < n; i++) {
            d_keys_out[i] = d_keys_in[idx[i]];
            d_values_out[i] = d_values_in[idx[i]];
        }
        memset(d_temp_storage, 0xff, need);
        return cudaSuccess;
    }
};
}  // namespace cub

#endif
