#!/usr/bin/env bash
# Data parallelism on the CPU with Open MPI: 1, 2 and 4 ranks train the same
# run (same losses to 1e-6 relative), with the gradient sum overlapping the
# backward or after it, rank 0 alone writes the run directory, a run resumes with another number of ranks, ZeRO-1 sharding of
# the AdamW state trains the same run, with its reduce-scatter overlapping
# the backward or after it, and resumes across rank counts and
# with sharding on or off, a signal stops
# every rank at the same step with a checkpoint, a killed rank ends the job
# within a bounded time naming the rank, and a build without MPI refuses
# to run as one of several ranks.
set -u
B=${1:-build}
export OMP_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
SG=$(cd "$B" && pwd)/sgtrain
SYN=$(cd "$B" && pwd)/sgsynth
ROOT=$(cd "$(dirname "$0")/.." && pwd)
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
E2E_NAME=e2e_mpi
source "$(dirname "$0")/lib.sh"
if ! command -v mpirun >/dev/null || ! ldd "$SG" | grep -q libmpi; then
    bad "sgtrain is not built with MPI or mpirun is missing (apt-get install openmpi-bin libopenmpi-dev; make)"; finish
fi
MPI="mpirun --oversubscribe -x OMP_NUM_THREADS"
"$SYN" --out "$W/d" --vocab 512 --val-tokens 20000 --train-tokens 100000 --shard-tokens 50000 >/dev/null
T="train --tier test --micro_batch 2 --grad_accum 4 --iters 30 --val_every 10 --ckpt_every 0 --data $W/d"
losses() { grep '"loss"' "$1/metrics.jsonl" | sed -E 's/.*"loss":([^,]*),.*/\1/'; }
vals() { grep '"val_loss"' "$1/metrics.jsonl" | sed -E 's/.*"val_loss":([^,]*),.*/\1/'; }
json_crc() { sed -nE 's/.*"params_crc32": "([0-9a-f]*)".*/\1/p' "$1/result.json"; }
worst() { paste <(losses "$1"; vals "$1") <(losses "$2"; vals "$2") | awk 'BEGIN { w = 0 } { e = ($2 - $1) / $1; if (e < 0) e = -e; if (e > w) w = e; n++ } END { printf "%d %.2e", n, w }'; }

"$SG" $T --out "$W/r1" 2>/dev/null
timeout 120 $MPI -n 2 "$SG" $T --out "$W/r2" 2>"$W/r2.log"; rc2=$?
timeout 120 $MPI -n 4 "$SG" $T --peak_tflops 0.001 --profile_every 10 --out "$W/r4" 2>"$W/r4.log"; rc4=$?
check '[ $rc2 -eq 0 ] && [ $rc4 -eq 0 ]' "2 and 4 ranks train ($rc2, $rc4): $(tail -n 3 $W/r2.log)"
for n in 2 4; do
    w=$(worst "$W/r1" "$W/r$n")
    check '[ "${w% *}" = 33 ] && awk -v e="${w#* }" "BEGIN { exit !(e <= 1e-6) }"' "$n ranks: every training and validation loss within 1e-6 of one process (values, worst relative): $w"
done
check 'grep -q "\"ranks\": 4" $W/r4/result.json && grep -q "\"ranks\": 1" $W/r1/result.json' "result.json records the ranks"
check '[ "$(grep -c . $W/r4/metrics.jsonl)" = "$(grep -c . $W/r1/metrics.jsonl)" ] && [ "$(grep -c "^done:" $W/r4.log)" = 1 ]' "rank 0 alone writes metrics and the summary"
check 'grep -q ", 4 ranks" $W/r4.log' "the banner names the rank count"
# MFU over 4 ranks divides by 4 peaks; rank 0 alone logs its profile
check 'python3 - "$W/r4" <<'"'"'PY'"'"'
import json, sys
r = json.load(open(sys.argv[1] + "/result.json"))
t, p = r["throughput"], r["profile"]
assert r["ranks"] == 4 and t["peak_tflops_per_rank"] == 0.001, t
assert abs(t["mfu"] - t["flop_per_token"] * t["steady_tokens_per_s"] / (4 * 0.001e12)) <= 1e-5 * t["mfu"], t
assert p["steps"] == 3 and p["categories_ms"]["matmul"] > 0, p
PY
' "4 ranks: result.json's mfu is FLOP a token x tokens/s over 4 ranks' peaks; the profile of steps 10, 20, 30"
check '[ "$(grep -c "profile of 3 steps" $W/r4.log)" = 1 ]' "one profile line (rank 0's)"

# the gradient sum overlaps the last backward: buckets of whole layers are
# summed as they finish (a 1 KiB bucket: one per layer), or in one bucket
# (the 25 MiB default), or after the backward (--bucket_mb 0)
timeout 120 $MPI -n 2 -x SG_DIST_TIMES=1 "$SG" $T --bucket_mb 0.001 --out "$W/o2" 2>"$W/o2.log"; rc=$?
timeout 120 $MPI -n 2 "$SG" $T --bucket_mb 0 --out "$W/n2" 2>/dev/null; rc0=$?
check '[ $rc -eq 0 ] && [ $rc0 -eq 0 ] && [ -n "$(json_crc "$W/o2")" ] && [ "$(json_crc "$W/o2")" = "$(json_crc "$W/r2")" ] && [ "$(json_crc "$W/n2")" = "$(json_crc "$W/r2")" ]' "2 ranks: the sum in per-layer buckets during the backward, in one bucket, and after the backward end with bitwise equal parameters ($(json_crc "$W/o2") $(json_crc "$W/r2") $(json_crc "$W/n2"))"
check 'grep -qE "rank 0 of 2: .*; the sum in [3-9] buckets started during the backward" $W/o2.log' "SG_DIST_TIMES counts the buckets: $(grep -o "the sum in.*" $W/o2.log | head -n 1)"
timeout 120 $MPI -n 4 "$SG" $T --bucket_mb 0.001 --out "$W/o4" 2>/dev/null; rc=$?
w=$(worst "$W/r1" "$W/o4")
check '[ $rc -eq 0 ] && [ "${w% *}" = 33 ] && awk -v e="${w#* }" "BEGIN { exit !(e <= 1e-6) }"' "4 ranks, per-layer buckets: every loss within 1e-6 of one process ($w)"
expect 2 "bucket_mb: expected a number >= 0" -- "$SG" $T --bucket_mb -1 --out "$W/o9"
check '[ ! -e "$W/o9" ]' "a negative bucket size writes nothing"

# a run resumes with another number of ranks: 2 ranks stop at step 12, 1 and then 4 finish
timeout 120 $MPI -n 2 "$SG" $T --stop_at 12 --out "$W/rs" 2>/dev/null; rc=$?
check '[ $rc -eq 75 ] && [ -f $W/rs/checkpoint.bin ] && [ ! -f $W/rs/result.json ]' "2 ranks stop at step 12 with a checkpoint (exit $rc)"
"$SG" $T --stop_at 20 --out "$W/rs" 2>/dev/null
timeout 120 $MPI -n 4 "$SG" $T --out "$W/rs" 2>/dev/null; rc=$?
w=$(worst "$W/r1" "$W/rs")
check '[ $rc -eq 0 ] && awk -v e="${w#* }" "BEGIN { exit !(e <= 1e-6) }"' "2 ranks, then 1, then 4: the same run as one process throughout ($w)"

# ZeRO-1 (--zero 1): each rank keeps the AdamW state of its shard only; the
# gradients are reduce-scattered and the parameters all-gathered
timeout 120 $MPI -n 2 -x SG_DIST_TIMES=1 "$SG" $T --zero 1 --out "$W/z2" 2>"$W/z2.log"; rc2=$?
timeout 120 $MPI -n 4 "$SG" $T --zero 1 --out "$W/z4" 2>"$W/z4.log"; rc4=$?
check '[ $rc2 -eq 0 ] && [ $rc4 -eq 0 ]' "zero 1 with 2 and 4 ranks trains ($rc2, $rc4): $(tail -n 3 $W/z2.log $W/z4.log)"
for n in 2 4; do
    w=$(worst "$W/r1" "$W/z$n")
    check '[ "${w% *}" = 33 ] && awk -v e="${w#* }" "BEGIN { exit !(e <= 1e-6) }"' "zero 1, $n ranks: every loss within 1e-6 of one process (values, worst relative): $w"
done
# two ranks add each element once (a + b = b + a), whether all-reduced or
# reduce-scattered: the very same parameters
check '[ -n "$(json_crc "$W/z2")" ] && [ "$(json_crc "$W/z2")" = "$(json_crc "$W/r2")" ]' "zero 1 and zero 0 on 2 ranks end with bitwise equal parameters ($(json_crc "$W/z2") vs $(json_crc "$W/r2"))"
check 'grep -q "ZeRO-1: AdamW state 0.1 MiB per rank instead of 0.3" $W/z4.log' "the banner gives the AdamW state per rank: $(grep -o "ZeRO-1.*" $W/z4.log)"
check 'grep -q "rank 1 of 2: 30 steps, .* gradient and parameter collectives .* transfer" $W/z2.log' "SG_DIST_TIMES reports the collectives' share of a step: $(grep -m1 "collectives" $W/z2.log)"
# ZeRO-1 with the reduce-scatter overlapping the last backward (--bucket_mb,
# the default 25 included above): each bucket [a, b) is reduced piece by
# piece onto the ranks whose shards it meets, so the shards stay those of the
# reduce-scatter after the backward (--bucket_mb 0).  1 KiB buckets are one
# per layer and cut through shard boundaries; 0.05 MiB ones hold several
# layers; 1000 MiB is more than the whole model: one bucket.  With 2 ranks
# every element is a + b whatever the bucketing: the same losses, gradient
# norms (above grad_clip 1 in most steps, so clipping steers the run) and
# parameters, bitwise.
gnorms() { grep '"grad_norm"' "$1/metrics.jsonl" | sed -E 's/.*"loss":([^,]*),.*"grad_norm":([^,]*),.*/\1 \2/'; }
# final parameters: the worst difference of any element over its tensor's largest magnitude
pworst() {
    "$SG" export "$1" -o "$1.st" >/dev/null 2>&1 && "$SG" export "$2" -o "$2.st" >/dev/null 2>&1 || { echo "export failed"; return; }
    python3 - "$1.st" "$2.st" <<'PY'
import array, json, struct, sys
def load(p):
    b = open(p, 'rb').read()
    n = struct.unpack('<Q', b[:8])[0]
    h, d, out = json.loads(b[8:8 + n]), b[8 + n:], {}
    for k, v in h.items():
        if k != '__metadata__':
            a = array.array('f' if v['dtype'] == 'F32' else 'd')
            a.frombytes(d[v['data_offsets'][0]:v['data_offsets'][1]])
            out[k] = a
    return out
x, y = load(sys.argv[1]), load(sys.argv[2])
w, n = 0.0, 0
for k in x:
    s = max(abs(v) for v in x[k]) or 1.0
    w = max(w, max(abs(p - q) for p, q in zip(x[k], y[k])) / s)
    n += len(x[k])
print('%d %.2e' % (n if x.keys() == y.keys() else -1, w))
PY
}
timeout 120 $MPI -n 2 "$SG" $T --zero 1 --bucket_mb 0 --out "$W/zn2" 2>/dev/null; rc=$?
check '[ $rc -eq 0 ] && [ -n "$(json_crc "$W/zn2")" ] && [ "$(json_crc "$W/zn2")" = "$(json_crc "$W/r2")" ]' "zero 1 without overlap on 2 ranks: the parameters of zero 0 ($rc: $(json_crc "$W/zn2"))"
for b in 0.001 0.05 1000; do
    timeout 120 $MPI -n 2 -x SG_DIST_TIMES=1 "$SG" $T --zero 1 --bucket_mb $b --out "$W/zo2-$b" 2>"$W/zo2-$b.log"; rc=$?
    check '[ $rc -eq 0 ] && [ "$(json_crc "$W/zo2-$b")" = "$(json_crc "$W/zn2")" ] && [ "$(gnorms "$W/zo2-$b")" = "$(gnorms "$W/zn2")" ] && [ "$(vals "$W/zo2-$b")" = "$(vals "$W/zn2")" ]' "zero 1, 2 ranks, $b MiB buckets during the backward: every loss, gradient norm and parameter bitwise those of the reduce-scatter after it ($rc: $(json_crc "$W/zo2-$b"), $(gnorms "$W/zo2-$b" | wc -l) steps)"
done
check '[ "$(gnorms "$W/z2")" = "$(gnorms "$W/zn2")" ] && [ "$(json_crc "$W/z2")" = "$(json_crc "$W/zn2")" ]' "zero 1, 2 ranks, the default 25 MiB (one bucket): bitwise the reduce-scatter after the backward"
# the buckets counted: more than one, and more pieces than buckets (a bucket
# straddles a shard boundary); one bucket of 2 pieces when it is the model
zpieces() { sed -nE 's/.*rank 0 of [0-9]+: .*the reduce-scatter in ([0-9]+) buckets? \(([0-9]+) shard pieces?\) started during the backward.*/\1 \2/p' "$1"; }
p=$(zpieces "$W/zo2-0.001.log")
check '[ -n "$p" ] && [ "${p% *}" -gt 1 ] && [ "${p#* }" -gt "${p% *}" ]' "zero 1, 2 ranks, 1 KiB buckets: more than one bucket, and buckets straddling the shards (buckets, pieces: ${p:-none})"
p=$(zpieces "$W/zo2-1000.log")
check '[ "$p" = "1 2" ]' "zero 1, 2 ranks, 1000 MiB: one bucket in 2 pieces (${p:-none})"
# 4 ranks group the additions differently from one process and from the
# blocking reduce-scatter: within 1e-6 of both, losses and parameters
timeout 120 $MPI -n 4 "$SG" $T --zero 1 --bucket_mb 0 --out "$W/zn4" 2>/dev/null; rc=$?
check '[ $rc -eq 0 ]' "zero 1 without overlap on 4 ranks trains ($rc)"
for b in 0.001 0.05 1000; do
    timeout 120 $MPI -n 4 -x SG_DIST_TIMES=1 "$SG" $T --zero 1 --bucket_mb $b --out "$W/zo4-$b" 2>"$W/zo4-$b.log"; rc=$?
    w=$(worst "$W/zn4" "$W/zo4-$b"); w1=$(worst "$W/r1" "$W/zo4-$b")
    pw=$(pworst "$W/zn4" "$W/zo4-$b"); pw1=$(pworst "$W/r1" "$W/zo4-$b")
    check '[ $rc -eq 0 ] && [ "${w% *}" = 33 ] && [ "${w1% *}" = 33 ] && awk -v a="${w#* }" -v b="${w1#* }" "BEGIN { exit !(a <= 1e-6 && b <= 1e-6) }"' "zero 1, 4 ranks, $b MiB buckets: every loss within 1e-6 of the reduce-scatter after the backward ($w) and of one process ($w1)"
    check '[ "${pw% *}" -gt 0 ] 2>/dev/null && [ "${pw1% *}" = "${pw% *}" ] && awk -v a="${pw#* }" -v b="${pw1#* }" "BEGIN { exit !(a <= 1e-5 && b <= 1e-5) }"' "zero 1, 4 ranks, $b MiB buckets: final parameters within 1e-5 of their tensor's scale, against after the backward ($pw) and one process ($pw1)"
done
p=$(zpieces "$W/zo4-0.001.log")
check '[ -n "$p" ] && [ "${p% *}" -gt 1 ] && [ "${p#* }" -gt "${p% *}" ]' "zero 1, 4 ranks, 1 KiB buckets: buckets straddle the shards (buckets, pieces: ${p:-none})"
p=$(zpieces "$W/zo4-1000.log")
check '[ "$p" = "1 4" ]' "zero 1, 4 ranks, 1000 MiB: one bucket in 4 pieces (${p:-none})"
# the overlapped run's checkpoint is the full state: 2 ranks with overlap
# stop at step 12, and the run goes on with 1 rank, with 4 ranks (zero 1,
# overlap), or with 2 ranks alike, which ends bitwise where uninterrupted
timeout 120 $MPI -n 2 "$SG" $T --zero 1 --bucket_mb 0.001 --stop_at 12 --out "$W/zo" 2>/dev/null; rc=$?
check '[ $rc -eq 75 ] && [ -f "$W/zo/checkpoint.bin" ]' "2 ranks, zero 1 with overlap, stop at step 12 with a checkpoint ($rc)"
cp -r "$W/zo" "$W/zo-1"; cp -r "$W/zo" "$W/zo-4"; cp -r "$W/zo" "$W/zo-2"
"$SG" $T --out "$W/zo-1" 2>/dev/null; rc1=$?
timeout 120 $MPI -n 4 "$SG" $T --zero 1 --bucket_mb 0.001 --out "$W/zo-4" 2>/dev/null; rc4=$?
timeout 120 $MPI -n 2 "$SG" $T --zero 1 --bucket_mb 0.001 --out "$W/zo-2" 2>/dev/null; rc2=$?
w1=$(worst "$W/r1" "$W/zo-1"); w4=$(worst "$W/r1" "$W/zo-4")
check '[ $rc1 -eq 0 ] && [ "${w1% *}" = 33 ] && awk -v e="${w1#* }" "BEGIN { exit !(e <= 1e-6) }"' "resumed on 1 rank: the one-process run ($rc1: $w1)"
check '[ $rc4 -eq 0 ] && [ "${w4% *}" = 33 ] && awk -v e="${w4#* }" "BEGIN { exit !(e <= 1e-6) }"' "resumed on 4 ranks, zero 1 with overlap: the one-process run ($rc4: $w4)"
check '[ $rc2 -eq 0 ] && [ -n "$(json_crc "$W/zo-2")" ] && [ "$(json_crc "$W/zo-2")" = "$(json_crc "$W/zo2-0.001")" ] && [ "$(gnorms "$W/zo-2")" = "$(gnorms "$W/zo2-0.001")" ]' "resumed on 2 ranks alike: bitwise the uninterrupted run ($rc2: $(json_crc "$W/zo-2"))"
# a bucket size that is no size is refused by every rank, which write nothing
for b in -1 nan; do
    out=$(timeout 60 $MPI -n 2 "$SG" $T --zero 1 --bucket_mb $b --out "$W/zbad" 2>&1); rc=$?
    check '[ $rc -ne 0 ] && grep -q "bucket_mb: expected a number >= 0, got .$b." <<<"$out" && [ ! -e "$W/zbad" ]' "zero 1, 2 ranks, --bucket_mb $b: refused ($rc: $(grep -m1 bucket_mb <<<"$out"))"
done

# the checkpoint holds the whole state: a sharded run resumes on any ranks,
# sharded or not, and a sharded run resumed alike is the uninterrupted one
timeout 120 $MPI -n 2 "$SG" $T --zero 1 --stop_at 12 --out "$W/zs" 2>/dev/null; rc=$?
"$SG" $T --stop_at 20 --out "$W/zs" 2>/dev/null
timeout 120 $MPI -n 2 "$SG" $T --zero 1 --out "$W/zs" 2>/dev/null; rc2=$?
w=$(worst "$W/r1" "$W/zs")
check '[ $rc -eq 75 ] && [ $rc2 -eq 0 ] && awk -v e="${w#* }" "BEGIN { exit !(e <= 1e-6) }"' "2 ranks zero 1, then 1 rank, then 2 ranks zero 1: the one-process run ($rc, $rc2: $w)"
timeout 120 $MPI -n 2 "$SG" $T --zero 1 --stop_at 12 --out "$W/zb" 2>/dev/null
timeout 120 $MPI -n 2 "$SG" $T --zero 1 --out "$W/zb" 2>/dev/null
check '[ -n "$(json_crc "$W/zb")" ] && [ "$(json_crc "$W/zb")" = "$(json_crc "$W/z2")" ]' "2 ranks zero 1 stopped and resumed end bitwise where uninterrupted ($(json_crc "$W/zb"))"
timeout 120 $MPI -n 4 "$SG" $T --zero 1 --stop_at 12 --out "$W/zc" 2>/dev/null
timeout 120 $MPI -n 2 "$SG" $T --out "$W/zc" 2>/dev/null; rc=$?
w=$(worst "$W/r1" "$W/zc")
check '[ $rc -eq 0 ] && awk -v e="${w#* }" "BEGIN { exit !(e <= 1e-6) }"' "4 ranks zero 1, then 2 ranks zero 0: the one-process run ($rc: $w)"
expect 2 "zero: expected 0 \(off\) or 1" -- "$SG" $T --zero 2 --out "$W/z9"

# a signal reaches the ranks at different moments; they stop at one step
$MPI -n 2 "$SG" $T --iters 200000 --out "$W/sig" 2>"$W/sig.log" &
pid=$! # mpirun itself: it forwards SIGUSR1 to the ranks
for i in $(seq 1 200); do [ -s "$W/sig/metrics.jsonl" ] && break; sleep 0.1; done
sleep 0.5; kill -USR1 $pid; wait $pid; rc=$?
check '[ $rc -eq 75 ] && grep -q "SIGUSR1 received at step" $W/sig.log && [ -f $W/sig/checkpoint.bin ]' "SIGUSR1 to mpirun: both ranks checkpoint at one step and exit 75 ($rc)"

# a killed rank ends the whole job, naming it, within a bounded time
$MPI -n 2 "$SG" $T --iters 200000 --out "$W/kill" >"$W/kill.log" 2>&1 &
pid=$!
for i in $(seq 1 200); do [ -s "$W/kill/metrics.jsonl" ] && break; sleep 0.1; done
victim=""
for p in $(pgrep -f "sgtrain train.*$W/kill"); do
    tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -q "^OMPI_COMM_WORLD_RANK=1$" && victim=$p
done
t0=$SECONDS
[ -n "$victim" ] && kill -9 "$victim"
wait $pid; rc=$?
check '[ -n "$victim" ] && [ $rc -ne 0 ] && [ $rc -ne 124 ] && [ $((SECONDS - t0)) -le 30 ] && grep -qiE "rank 1.*(signal 9|killed)|(signal 9|killed).*rank 1" $W/kill.log' "killing rank 1 ends the job within 30 s, non-zero, naming the rank (rc $rc, $((SECONDS - t0)) s): $(grep -iE -m1 "rank 1" $W/kill.log)"
check '[ -z "$(pgrep -f "sgtrain train.*$W/kill")" ]' "no rank is left running"

# bad input: the micro-batches do not split evenly
out=$(timeout 60 $MPI -n 3 "$SG" $T --out "$W/odd" 2>&1); rc=$?
check '[ $rc -ne 0 ] && grep -q "grad_accum 4 is not a multiple of the 3 ranks" <<<"$out"' "grad_accum not divisible by the ranks is refused ($rc)"
# auto_micro_batch (src/batch_split.h): the step's 8 sequences shared by the
# ranks, in micro-batches of at most micro_batch on the CPU.  On 4 ranks,
# micro_batch 4 x grad_accum 2 is refused without it (2 micro-batches for 4
# ranks) and split as 4 micro-batches of 2 with it: the run 4 ranks train
# with micro_batch 2 x grad_accum 4, bitwise.
A="train --tier test --micro_batch 4 --grad_accum 2 --iters 30 --val_every 10 --ckpt_every 0 --data $W/d"
out=$(timeout 60 $MPI -n 4 "$SG" $A --out "$W/noauto" 2>&1); rc=$?
check '[ $rc -eq 2 ] && grep -q "grad_accum 2 is not a multiple of the 4 ranks" <<<"$out" && [ ! -e "$W/noauto" ]' \
    "micro_batch 4 x grad_accum 2 on 4 ranks is refused without auto_micro_batch ($rc)"
timeout 120 $MPI -n 4 "$SG" $A --auto_micro_batch true --out "$W/auto4" 2>"$W/auto4.log"; rc=$?
check '[ $rc -eq 0 ] && grep -q "auto_micro_batch: 8 sequences a step as 4 micro-batches of 2 (1 a rank); no device memory to fill: at most micro_batch 4" "$W/auto4.log" &&
       grep -q "\"batch_split\": {\"micro_batch\": 2, \"grad_accum\": 4, \"auto\": true}" "$W/auto4/result.json" &&
       grep -q "^micro_batch: 4$" "$W/auto4/config.yaml" && grep -q "^auto_micro_batch: true$" "$W/auto4/config.yaml"' \
    "with auto_micro_batch 4 ranks take 4 micro-batches of 2; config.yaml keeps micro_batch 4 ($rc): $(grep -m1 auto_micro_batch "$W/auto4.log")"
check '[ -n "$(json_crc "$W/auto4")" ] && [ "$(json_crc "$W/auto4")" = "$(json_crc "$W/r4")" ] && [ "$(losses "$W/auto4"; vals "$W/auto4")" = "$(losses "$W/r4"; vals "$W/r4")" ]' \
    "... bitwise the run of micro_batch 2 x grad_accum 4 on 4 ranks (params_crc32 $(json_crc "$W/auto4") and $(json_crc "$W/r4"))"
# one process: the configured split itself (4 divides 8), bitwise
"$SG" $A --out "$W/e42" 2>/dev/null
"$SG" $A --auto_micro_batch 1 --out "$W/a42" 2>"$W/a42.log"; rc=$?
check '[ $rc -eq 0 ] && [ "$(json_crc "$W/a42")" = "$(json_crc "$W/e42")" ] && grep -q "as 2 micro-batches of 4;" "$W/a42.log"' \
    "one process: 2 micro-batches of 4, bitwise micro_batch 4 x grad_accum 2 ($rc): $(grep -m1 auto_micro_batch "$W/a42.log")"
# 4 x 3 = 12 sequences on 2 ranks: 6 a rank, in micro-batches of 3 (the
# largest divisor of 6 not above 4), bitwise micro_batch 3 x grad_accum 4
B3="train --tier test --iters 12 --val_every 6 --ckpt_every 0 --data $W/d"
timeout 120 $MPI -n 2 "$SG" $B3 --micro_batch 4 --grad_accum 3 --auto_micro_batch on --out "$W/a43" 2>"$W/a43.log"; rc=$?
timeout 120 $MPI -n 2 "$SG" $B3 --micro_batch 3 --grad_accum 4 --out "$W/e34" 2>/dev/null
check '[ $rc -eq 0 ] && grep -q "12 sequences a step as 4 micro-batches of 3 (2 a rank)" "$W/a43.log" &&
       [ -n "$(json_crc "$W/a43")" ] && [ "$(json_crc "$W/a43")" = "$(json_crc "$W/e34")" ]' \
    "2 ranks: 12 sequences as 4 micro-batches of 3, bitwise micro_batch 3 x grad_accum 4 ($rc): $(grep -m1 auto_micro_batch "$W/a43.log")"
out=$(timeout 60 $MPI -n 3 "$SG" $A --auto_micro_batch true --out "$W/auto3" 2>&1); rc=$?
check '[ $rc -eq 2 ] && grep -q "auto_micro_batch: the 8 sequences of a step (micro_batch 4 x grad_accum 2) do not split evenly over 3 ranks" <<<"$out" && [ ! -e "$W/auto3" ]' \
    "auto_micro_batch: 8 sequences over 3 ranks are refused, exit 2, no run directory ($rc)"
# a launcher MPI does not understand
out=$(SLURM_STEP_NUM_TASKS=4 "$SG" $T --out "$W/pmi" 2>&1); rc=$?
check '[ $rc -eq 2 ] && grep -q "launcher started 4 processes (SLURM_STEP_NUM_TASKS) but MPI sees 1" <<<"$out"' "a launcher MPI does not speak is named ($rc)"
# a build without MPI refuses to be one of several ranks
if [ -z "${SG_SKIP_NOMPI_BUILD:-}" ]; then
    (cd "$ROOT" && env -u MAKEFLAGS -u MAKELEVEL make -s B="$W/nompi" MPI=no BLAS="$(cat "$B/blas.choice" 2>/dev/null || echo openblas)" "$W/nompi/sgtrain" >/dev/null 2>&1)
    check '! ldd $W/nompi/sgtrain | grep -q libmpi' "MPI=no builds without MPI"
    out=$(OMPI_COMM_WORLD_SIZE=2 "$W/nompi/sgtrain" $T --out "$W/nm" 2>&1); rc=$?
    check '[ $rc -eq 2 ] && grep -q "this build has no MPI" <<<"$out" && [ ! -e $W/nm ]' "without MPI: refuses to run as one of 2 ranks, writes nothing ($rc)"
fi
finish
