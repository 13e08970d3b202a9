#!/usr/bin/env bash
# A synthetic sweep of N finished runs for timing sgreport: 4 tiers x 9 arms
# x N/36 seeds, each a directory with result.json, and config.yaml (every
# setting, which sgreport compares within a tier) and metrics.jsonl of 20
# lines, as a real run has them -- what a large study's output directory
# holds.  usage: report_sweep.sh DIR [N=10000]
set -eu
dir=$1; n=${2:-10000}
seeds=$(( (n + 35) / 36 ))
mkdir -p "$dir"
awk -v dir="$dir" -v seeds="$seeds" -v n="$n" 'BEGIN {
    split("10M 50M 124M 350M", tiers, " ")
    split("baseline offbyone sinklogit sinktoken normgate renorm projgate combo combo2", arms, " ")
    k = 0
    for (t = 1; t <= 4; t++) for (a = 1; a <= 9; a++) for (s = 0; s < seeds && k < n; s++) {
        d = sprintf("%s/%s/%s/s%d", dir, tiers[t], arms[a], s)
        print d
        k++
    }
}' | xargs mkdir -p
awk -v dir="$dir" -v seeds="$seeds" -v n="$n" 'BEGIN {
    split("10M 50M 124M 350M", tiers, " ")
    split("baseline offbyone sinklogit sinktoken normgate renorm projgate combo combo2", arms, " ")
    k = 0; srand(1)
    for (t = 1; t <= 4; t++) for (a = 1; a <= 9; a++) for (s = 0; s < seeds && k < n; s++) {
        d = sprintf("%s/%s/%s/s%d", dir, tiers[t], arms[a], s)
        loss = 4.2 - 0.4 * t - 0.002 * a + 0.005 * (rand() - 0.5)
        f = d "/result.json"
        printf "{\n  \"tier\": \"%s\",\n  \"arm\": \"%s\",\n  \"seed\": %d,\n  \"steps\": 20,\n  \"tokens\": 81920,\n  \"final_val_loss\": %.17g,\n  \"val_batches\": 64,\n  \"config\": {\"data\": \"data/fineweb\", \"tier\": \"%s\", \"arm\": \"%s\", \"seed\": %d}\n}\n", tiers[t], arms[a], s, loss, tiers[t], arms[a], s > f
        close(f)
        f = d "/config.yaml"
        printf "# sinkgate resolved config\ntier: \"%s\"\narm: \"%s\"\nn_layer: 6\nn_head: 6\nn_embd: 384\nblock_size: 256\nvocab_size: 50257\nln_bias: false\nlinear_bias: false\ngelu_tanh: false\nrotary_base: 10000\nrotary_dims: 0\nparallel_residual: false\ntie_embeddings: true\nvocab_sha256: \"\"\ngate_beta: 8\ninit_std: 0.02\nseed: %d\nmicro_batch: 32\ngrad_accum: 1\niters: 20\nwarmup: 2\nlr: 0.0006\nlr_min: 6e-05\nbeta1: 0.9\nbeta2: 0.95\nadam_eps: 1e-08\nweight_decay: 0.1\ngrad_clip: 1\nval_every: 0\nval_batches: 16\nval_batches_final: 64\nval_seed: 1337\ndata: \"data/fineweb\"\nout: \"%s\"\nckpt_every: 0\nlog_every: 10\nstop_at: 0\nthreads: 0\nzero: 0\nbucket_mb: 25\nauto_micro_batch: false\npeak_tflops: 0\nprofile_every: 0\n", tiers[t], arms[a], s, d > f
        close(f)
        f = d "/metrics.jsonl"
        for (i = 1; i <= 20; i++) printf "{\"step\":%d,\"loss\":%.6f,\"lr\":0.0006,\"grad_norm\":1.0,\"tokens_per_s\":1000,\"elapsed_s\":%d}\n", i, loss + 1.0 / i, i > f
        close(f)
        k++
    }
}'
