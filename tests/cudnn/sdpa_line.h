/* One call of cudnn_sdpa.h as a line of text: what the emulated cuDNN
 * (tests/emu/emu_cudnn.cpp, EMU_CUDNN_LOG) records of each graph sgtrain
 * asks for, and what plan_check.cpp reads back to put the same graph to the
 * real cuDNN.  Everything a graph depends on is in it (cudnn_sdpa.cpp's
 * cache key), and the alignment of the pointers, which the graph does not
 * see but its kernels need:
 *   fwd|bwd B H T d scale sink(0|1) q=bs,hs,rs k=.. v=.. o=.. [dout=.. dq=.. dk=.. dv=..] align=A
 * scale in C's hexadecimal float (exact); A the largest power of two, at
 * most 256, that divides the address of every bf16 tensor (those cuDNN's
 * kernels read and write 16 bytes at a time). */
#ifndef SG_SDPA_LINE_H
#define SG_SDPA_LINE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cudnn_sdpa.h"

/* the tensors in a line's order: the forward's four, then the backward's */
static const struct {
    const char *name;
    size_t off;
} sdpa_line_tensors[8] = {
    {"q", offsetof(SgSdpa, q)},   {"k", offsetof(SgSdpa, k)},       {"v", offsetof(SgSdpa, v)},
    {"o", offsetof(SgSdpa, o)},   {"dout", offsetof(SgSdpa, dout)}, {"dq", offsetof(SgSdpa, dq)},
    {"dk", offsetof(SgSdpa, dk)}, {"dv", offsetof(SgSdpa, dv)},
};

static inline long sdpa_line_align_of(const void *p, long a) {
    if (!p) return a;
    const uintptr_t u = (uintptr_t)p;
    while (a > 1 && u % (uintptr_t)a) a /= 2;
    return a;
}

static inline int sdpa_line_write(char *buf, size_t n, const SgSdpa *s, int bwd) {
    long align = 256;
    size_t k = (size_t)snprintf(buf, n, "%s %d %d %d %d %a %d", bwd ? "bwd" : "fwd", s->B, s->H, s->T, s->d,
                                (double)s->scale, s->sink != NULL);
    for (int i = 0; i < (bwd ? 8 : 4) && k < n; i++) {
        const SgSdpaTensor *t = (const SgSdpaTensor *)((const char *)s + sdpa_line_tensors[i].off);
        k += (size_t)snprintf(buf + k, n - k, " %s=%ld,%ld,%ld", sdpa_line_tensors[i].name, t->bs, t->hs, t->rs);
        align = sdpa_line_align_of(t->p, align);
    }
    if (k < n) k += (size_t)snprintf(buf + k, n - k, " align=%ld", align);
    return k < n ? 0 : -1;
}

/* 0 and *s (no pointers: sink is a non-null dummy when the line has one),
 * *bwd and *align; -1 when the line is not one sdpa_line_write writes */
static inline int sdpa_line_read(const char *line, SgSdpa *s, int *bwd, long *align) {
    static const float dummy_sink = 0.f;
    char dir[4];
    double scale;
    int sink, used;
    memset(s, 0, sizeof *s);
    if (sscanf(line, "%3s %d %d %d %d %la %d%n", dir, &s->B, &s->H, &s->T, &s->d, &scale, &sink, &used) != 7)
        return -1;
    if (strcmp(dir, "fwd") && strcmp(dir, "bwd")) return -1;
    *bwd = !strcmp(dir, "bwd");
    s->scale = (float)scale;
    s->sink = sink ? &dummy_sink : NULL;
    const char *p = line + used;
    for (int i = 0; i < (*bwd ? 8 : 4); i++) {
        SgSdpaTensor *t = (SgSdpaTensor *)((char *)s + sdpa_line_tensors[i].off);
        char key[8];
        int m;
        if (sscanf(p, " %7[a-z]=%ld,%ld,%ld%n", key, &t->bs, &t->hs, &t->rs, &m) != 4 ||
            strcmp(key, sdpa_line_tensors[i].name))
            return -1;
        p += m;
    }
    int m = 0;
    if (sscanf(p, " align=%ld%n", align, &m) != 1) return -1;
    p += m;
    while (*p == ' ' || *p == '\n' || *p == '\r') p++;
    return *p ? -1 : 0;
}

#endif
