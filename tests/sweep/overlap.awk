# The trace of tests/e2e_sweep_jobs.sh's sgtrain wrapper, "start|end TIME
# GPU THREADS PID KIND DIR [RC]" lines, summed up as "max=N clash=N
# order=N": the most tasks running at once, the starts on a GPU slot
# already busy, and the analyses that began before their run ended or on
# another GPU.
{ ev[NR] = $1; t[NR] = $2; gpu[NR] = $3; kind[NR] = $6; dir[NR] = $7 }
$1 == "end" && $6 == "train" { tend[$7] = $2; tgpu[$7] = $3 }
END {
    n = NR
    # events in time order (insertion sort: a few dozen lines)
    for (i = 1; i <= n; i++) o[i] = i
    for (i = 2; i <= n; i++) { k = o[i]; j = i - 1; while (j > 0 && t[o[j]] + 0 > t[k] + 0) { o[j + 1] = o[j]; j-- } o[j + 1] = k }
    run = 0; max = 0; clash = 0; order = 0
    for (i = 1; i <= n; i++) {
        e = o[i]
        if (ev[e] == "start") {
            if (busy[gpu[e]] > 0) clash++
            busy[gpu[e]]++; run++
            if (run > max) max = run
            if (kind[e] == "analyze" && (!(dir[e] in tend) || t[e] + 0 < tend[dir[e]] + 0 || gpu[e] != tgpu[dir[e]])) order++
        } else { busy[gpu[e]]--; run-- }
    }
    printf "max=%d clash=%d order=%d\n", max, clash, order
}
