#include "batch_split.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "dist.h"
#include "errmsg.h"
#include "ops.h"

int batch_split_check(const Config *c, int ranks, char *err, size_t errlen) {
    long n = (long)c->micro_batch * c->grad_accum;
    if (c->auto_micro_batch && n % ranks)
        return sg_fail(err, errlen,
                       "auto_micro_batch: the %ld sequences of a step (micro_batch %d x grad_accum %d) do not "
                       "split evenly over %d ranks; set micro_batch and grad_accum to a multiple of %d sequences",
                       n, c->micro_batch, c->grad_accum, ranks, ranks);
    if (!c->auto_micro_batch && c->grad_accum % ranks)
        return sg_fail(err, errlen,
                       "grad_accum %d is not a multiple of the %d ranks: each rank takes an equal share of the "
                       "micro-batches (set grad_accum, and micro_batch to keep the batch; or auto_micro_batch true)",
                       c->grad_accum, ranks);
    return 0;
}

/* The most the backend held at once, its state included, during one
 * forward and backward of b sequences of token 0 (the footprint depends on
 * the shapes only). */
static size_t probe(Model *m, int b) {
    int32_t *tok = calloc((size_t)b * m->T, sizeof *tok);
    if (!tok) {
        fprintf(stderr, "sgtrain: out of host memory\n");
        exit(1);
    }
    op_memory_peak_reset();
    model_zero_grad(m);
    model_forward(m, tok, tok, b, 1, (real)(1.0 / ((double)b * m->T)));
    model_backward(m);
    model_zero_grad(m);
    op_sync();
    free(tok);
    return op_memory_peak();
}

static size_t predict(const BatchSplit *s, long b) { return s->at1 + (size_t)(b - 1) * s->per_seq; }

long batch_split_choose(long share, long limit, size_t at1, size_t per_seq, size_t budget) {
    const BatchSplit s = {.at1 = at1, .per_seq = per_seq};
    for (long d = limit < share ? limit : share; d > 1; d--)
        if (share % d == 0 && predict(&s, d) <= budget) return d;
    return 1;
}

void batch_split_plan(Model *m, const Config *c, int ranks, BatchSplit *out) {
    BatchSplit s = {0};
    const long total = (long)c->micro_batch * c->grad_accum, share = total / ranks;
    size_t device_total = 0;
    long b = 1;
    if (op_memory_room(&s.room, &device_total) && share > 1) {
        s.measured = 1;
        s.keep_free = device_total / 16;
        const size_t budget = s.room > s.keep_free ? s.room - s.keep_free : 0;
        op_memory_peak_reset();
        const size_t held = op_memory_peak(); /* the parameters and their state */
        s.at1 = probe(m, 1);
        /* what micro-batch 1 added is at least a sequence's share (it holds
         * the fixed scratch as well): where two such would not fit on the
         * device, the probe at 2 might not either, and is not run */
        s.per_seq = s.at1 - held;
        if (predict(&s, 2) <= s.room) {
            const size_t p2 = probe(m, 2);
            s.per_seq = p2 > s.at1 ? p2 - s.at1 : 0;
            s.probed2 = 1;
        }
        /* The line is close, not exact: a scratch buffer that an op sizes
         * with a cap, or that several ops share, grows unevenly with b.  So
         * a choice above 2 is run once and measured, and one measured over
         * the budget gives way to the next smaller size the line allows.
         * 1 and 2 were measured already (2 is chosen only if probed). */
        for (b = batch_split_choose(share, share, s.at1, s.per_seq, budget); b > 2;
             b = batch_split_choose(share, b - 1, s.at1, s.per_seq, budget))
            if ((s.checked = probe(m, b)) <= budget) break;
        if (b <= 2) s.checked = predict(&s, b);
    } else if (!s.room) /* no device: the largest divisor not above micro_batch */
        b = batch_split_choose(share, c->micro_batch, 0, 0, 0);
    if (ranks > 1) {
        const long mine = b;
        b = -dist_max_long(-b); /* a divisor of the share on every rank */
        if (b != mine) s.checked = 0; /* measured at another size */
    }
    s.micro_batch = (int)b;
    s.grad_accum = (int)(total / b);
    if (s.measured) {
        s.predicted = predict(&s, b);
        for (long d = b + 1; d <= share; d++)
            if (share % d == 0) {
                s.next_predicted = predict(&s, d);
                break;
            }
    }
    m->cfg.micro_batch = s.micro_batch;
    m->cfg.grad_accum = s.grad_accum;
    *out = s;
}
