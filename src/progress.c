#include "progress.h"

#include <stdarg.h>
#include <unistd.h>

void progress_init(Progress *p, FILE *f, long total_steps) {
    p->f = f; /* NULL: print nothing (ranks other than 0) */
    p->tty = f && isatty(fileno(f));
    p->total = total_steps;
    p->dirty = 0;
}

static void fmt_eta(char *buf, size_t n, double s) {
    if (s < 0 || s > 1e8) {
        snprintf(buf, n, "?");
        return;
    }
    long t = (long)(s + 0.5);
    if (t >= 3600) snprintf(buf, n, "%ldh%02ldm", t / 3600, t / 60 % 60);
    else snprintf(buf, n, "%ldm%02lds", t / 60, t % 60);
}

void progress_step(Progress *p, long step, double loss, double lr, double gnorm, double tok_s, double mfu,
                   double elapsed, long log_every) {
    if (!p->f) return;
    if (p->tty) {
        enum { W = 24 };
        int fill = p->total > 0 ? (int)(W * step / p->total) : W;
        char bar[W + 1];
        for (int i = 0; i < W; i++) bar[i] = i < fill ? '#' : '.';
        bar[W] = 0;
        char eta[32];
        double per = step > 0 ? elapsed / step : 0;
        fmt_eta(eta, sizeof eta, per * (p->total - step));
        char mfu_s[32] = "";
        if (mfu >= 0) snprintf(mfu_s, sizeof mfu_s, " mfu %.0f%%", 100 * mfu);
        fprintf(p->f, "\r[%s] %ld/%ld loss %.4f lr %.2e %.0f tok/s%s eta %s\033[K", bar, step,
                p->total, loss, lr, tok_s, mfu_s, eta);
        fflush(p->f);
        p->dirty = 1;
    } else if (step % log_every == 0 || step == p->total) {
        char mfu_s[32] = "";
        if (mfu >= 0) snprintf(mfu_s, sizeof mfu_s, " mfu %.1f%%", 100 * mfu);
        fprintf(p->f, "step %ld/%ld loss %.4f lr %.3e grad_norm %.3f tok/s %.0f%s elapsed %.1fs\n",
                step, p->total, loss, lr, gnorm, tok_s, mfu_s, elapsed);
        fflush(p->f);
    }
}

void progress_note(Progress *p, const char *fmt, ...) {
    if (!p->f) return;
    if (p->dirty) {
        fputs("\r\033[K", p->f);
        p->dirty = 0;
    }
    va_list ap;
    va_start(ap, fmt);
    vfprintf(p->f, fmt, ap);
    va_end(ap);
    fputc('\n', p->f);
    fflush(p->f);
}

void progress_done(Progress *p) {
    if (!p->f) return;
    if (p->dirty) fputc('\n', p->f);
    p->dirty = 0;
    fflush(p->f);
}
