# Sourced by every tests/e2e_*.sh: the counters and checks behind the
# "NAME: N passed, N failed" line that tests/run.sh adds up.  Set E2E_NAME
# before sourcing; end the script with `finish`.
pass=0 fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*" >&2; }
# check 'SHELL CONDITION' "what it shows": the condition is eval'd, so it may
# use the script's variables
check() { if eval "$1"; then ok; else bad "$2"; fi; }
# expect STATUS PATTERN -- command...: the exit status, and output matching
# the extended regex PATTERN
expect() {
    local want=$1 pat=$2; shift 3
    local out rc
    out=$("$@" 2>&1); rc=$?
    if [ "$rc" -ne "$want" ]; then bad "exit $rc (want $want): $*"$'\n'"$out"; return; fi
    if ! grep -qE -- "$pat" <<<"$out"; then bad "message /$pat/ missing: $*"$'\n'"$out"; return; fi
    ok
}
finish() {
    echo "$E2E_NAME: $pass passed, $fail failed"
    [ "$fail" -eq 0 ]
    exit
}
