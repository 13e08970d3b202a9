/* UTF-8 decoding, strict (RFC 3629): no overlong forms, no surrogates,
 * nothing above U+10FFFF.  Shared by the writers that must know whether a
 * string is text: YAML configs, JSON analysis files. */
#ifndef SG_UTF8_H
#define SG_UTF8_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Length (1-4) of the well-formed character at p[0 .. n), with its code
 * point in *cp; 0 when p does not start one (n == 0 included). */
static inline int utf8_char(const unsigned char *p, size_t n, uint32_t *cp) {
    if (n == 0) return 0;
    int len = p[0] < 0x80 ? 1 : (p[0] >> 5) == 6 ? 2 : (p[0] >> 4) == 14 ? 3 : (p[0] >> 3) == 30 ? 4 : 0;
    if (len == 0 || (size_t)len > n) return 0;
    uint32_t c = len == 1 ? p[0] : p[0] & (0x7fu >> len);
    for (int j = 1; j < len; j++) {
        if ((p[j] & 0xc0) != 0x80) return 0;
        c = c << 6 | (p[j] & 0x3f);
    }
    if (len > 1 && (c < (len == 2 ? 0x80u : len == 3 ? 0x800u : 0x10000u) || c > 0x10ffff ||
                    (c >= 0xd800 && c <= 0xdfff)))
        return 0;
    *cp = c;
    return len;
}

/* 1 when s[0 .. n) is well-formed UTF-8 throughout. */
static inline int utf8_valid(const char *s, size_t n) {
    const unsigned char *p = (const unsigned char *)s;
    uint32_t cp;
    for (size_t i = 0; i < n;) {
        int len = utf8_char(p + i, n - i, &cp);
        if (!len) return 0;
        i += (size_t)len;
    }
    return 1;
}

/* s[0 .. n) as valid UTF-8 in out (room for 4n + 1 bytes, NUL-terminated):
 * well-formed characters pass as they are, any other byte is spelled \xNN.
 * Returns the length written. */
static inline size_t utf8_escape_invalid(const unsigned char *s, size_t n, char *out) {
    static const char hex[] = "0123456789abcdef";
    size_t k = 0;
    uint32_t cp;
    for (size_t i = 0; i < n;) {
        int len = utf8_char(s + i, n - i, &cp);
        if (len) {
            memcpy(out + k, s + i, (size_t)len);
            k += (size_t)len, i += (size_t)len;
        } else {
            out[k++] = '\\', out[k++] = 'x', out[k++] = hex[s[i] >> 4], out[k++] = hex[s[i] & 15];
            i++;
        }
    }
    out[k] = 0;
    return k;
}

#endif
