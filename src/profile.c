#include "profile.h"

#include <string.h>

int prof_on = 0;
double prof_secs[PROF_N];
double prof_flops[PROF_N];

const char *prof_name(ProfCat c) {
    static const char *names[PROF_N] = {"matmul", "attention", "gate", "classifier",
                                        "layernorm", "pointwise", "embed", "optimizer"};
    return c < PROF_N ? names[c] : "?";
}

ProfSite *prof_sites;
static ProfSite **prof_tail = &prof_sites;

void prof_reset(void) {
    memset(prof_secs, 0, sizeof prof_secs);
    memset(prof_flops, 0, sizeof prof_flops);
    for (ProfSite *s = prof_sites; s; s = s->next) s->secs = s->flops = 0, s->calls = 0;
}

void prof_site_add(ProfSite *s, double secs, double flops) {
    if (!s->listed) {
        s->listed = 1;
        *prof_tail = s;
        prof_tail = &s->next;
    }
    s->secs += secs;
    s->flops += flops;
    s->calls++;
    prof_secs[s->cat] += secs;
    prof_flops[s->cat] += flops;
}

int prof_top_sites(ProfSite **top, int n) {
    int k = 0;
    for (ProfSite *s = prof_sites; s; s = s->next) {
        if (!s->calls) continue;
        int i = k < n ? k++ : n; /* insertion into the sorted top n */
        while (i > 0 && top[i - 1]->secs < s->secs) {
            if (i < n) top[i] = top[i - 1];
            i--;
        }
        if (i < n) top[i] = s;
    }
    return k;
}

void prof_site_label(const ProfSite *s, char *buf, int width) {
    int n = (int)strlen(s->what);
    if (n <= width) {
        memcpy(buf, s->what, (size_t)n + 1);
        return;
    }
    memcpy(buf, s->what, (size_t)(width - 3));
    memcpy(buf + width - 3, "...", 4);
}
