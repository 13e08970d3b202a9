#!/bin/bash
# A real one-node Slurm cluster (Debian's slurm-wlm 22.05 + munge) for end-to-end tests,
# run as root, everything (conf, keys, sockets, state, spool, logs, pid files) under DIR.
#
#   eval "$(bash tests/slurm/cluster.sh start DIR)"   install if missing, start; prints the exports
#   bash tests/slurm/cluster.sh stop DIR              cancel all jobs, wait, stop every daemon it started
#   bash tests/slurm/cluster.sh status DIR            sinfo + squeue
#   bash tests/slurm/cluster.sh env DIR               print the exports again (no start)
#   bash tests/slurm/cluster.sh wait DIR [-t SECONDS] JOBID...
#                                                     return when none of the jobs (array jobs and
#                                                     12_3 task ids included) is in squeue; 124 on timeout
#
# Only the export lines go to stdout; everything else goes to stderr.
# Environment: SG_SLURM_GPUS=N gres gpus on the node (default: the /dev/nvidiaN devices if there
# are any, else 2 fake ones, symlinks to /dev/null; 0 = none).
# See tests/slurm/README.md for the settings and the timings.

set -u
PATH=$PATH:/usr/sbin:/sbin

usage() {
	sed -n '4,12p' "$0" | sed 's/^# \{0,1\}//' >&2
	exit 2
}
log() { printf 'cluster.sh: [%s] %s\n' "$(date +%T.%3N)" "$*" >&2; }
die() { log "error: $*"; exit 1; }

[ $# -ge 2 ] || usage
cmd=$1
dir=$(realpath -m -- "$2") || die "bad DIR $2"
shift 2
conf=$dir/slurm.conf
msock=$dir/munge/munge.socket.2
cluster=sgtest

# The marker every daemon started here carries in its environment (inherited by slurmstepd):
# stop finds strays by it, never by name alone.
marker="SG_SLURM_DIR=$dir"

alive() { [ -n "${1:-}" ] && kill -0 "$1" 2>/dev/null; }
pidof_file() { [ -s "$1" ] && tr -dc '0-9' <"$1"; }

has_marker() { { tr '\0' '\n' <"/proc/$1/environ"; } 2>/dev/null | grep -qxF -- "$marker"; }
# pids of processes (any name) whose environment holds our marker
marked_pids() {
	local p
	for p in /proc/[0-9]*; do
		p=${p#/proc/}
		[ "$p" = "$$" ] && continue
		has_marker "$p" && echo "$p"
	done
}
# pids of job processes of this cluster that outlived their job (slurmstepd puts SLURM_CONF and
# SLURM_CLUSTER_NAME in every job's environment); never this script or its ancestors
job_pids() {
	local p anc=" " q=$BASHPID
	while [ -n "$q" ] && [ "$q" -gt 1 ]; do
		anc+="$q "
		q=$(awk '/^PPid:/ { print $2 }' "/proc/$q/status" 2>/dev/null)
	done
	for p in /proc/[0-9]*; do
		p=${p#/proc/}
		case $anc in *" $p "*) continue ;; esac
		{ tr '\0' '\n' <"/proc/$p/environ"; } 2>/dev/null |
			grep -cxF -e "SLURM_CONF=$conf" -e "SLURM_CLUSTER_NAME=$cluster" | grep -qx 2 && echo "$p"
	done
}

sl() { SLURM_CONF=$conf "$@"; }

exports() {
	printf 'export SLURM_CONF=%q\n' "$conf"
}

# ---------------------------------------------------------------------------------------- install
have_pmix() { ls /usr/lib/*/pmix2/lib/libpmix.so >/dev/null 2>&1; }
daemon_pids() { local n; for n in munged slurmctld slurmd slurmdbd; do pgrep -x "$n"; done | sort; }
install_pkgs() {
	local need=()
	command -v slurmctld >/dev/null || need+=(slurmctld)
	command -v slurmd >/dev/null || need+=(slurmd)
	command -v sbatch >/dev/null || need+=(slurm-client)
	command -v munged >/dev/null || need+=(munge)
	# srun --mpi=pmix (what Debian's Open MPI speaks): slurm's mpi_pmix plugin dlopens
	# /usr/lib/<triplet>/pmix2/lib/libpmix.so, the unversioned link that only libpmix-dev ships
	have_pmix || need+=(libpmix-dev)
	[ ${#need[@]} -eq 0 ] && return 0
	[ "$(id -u)" = 0 ] || die "missing ${need[*]} and not root"
	[ "${need[*]}" = libpmix-dev ] || need=(slurm-wlm munge libpmix-dev)
	log "installing ${need[*]}"
	local before t0=$SECONDS
	before=$(daemon_pids)
	export DEBIAN_FRONTEND=noninteractive
	if ! apt-get install -y --no-install-recommends "${need[@]}" >"$dir/apt.log" 2>&1; then
		log "apt-get install failed; apt-get update and retry"
		apt-get update >>"$dir/apt.log" 2>&1
		apt-get install -y --no-install-recommends "${need[@]}" >>"$dir/apt.log" 2>&1 ||
			{ tail -20 "$dir/apt.log" >&2; die "apt-get install ${need[*]} failed (log: $dir/apt.log)"; }
	fi
	log "installed in $((SECONDS - t0)) s"
	# a package script may have started the system's daemons (no policy-rc.d): stop those
	local p
	for p in $(daemon_pids | comm -13 <(echo "$before") -); do
		log "stopping $(cat "/proc/$p/comm" 2>/dev/null) pid $p started by the package install"
		kill "$p" 2>/dev/null
	done
}

# ---------------------------------------------------------------------------------------- ports
# local ports of all TCP sockets (any state), decimal, from /proc (no dependency on ss/netstat)
used_ports() {
	local f _ la rest
	for f in /proc/net/tcp /proc/net/tcp6; do
		[ -r "$f" ] || continue
		while read -r _ la rest; do
			[[ $la == *:* ]] && echo $((16#${la##*:}))
		done < <(tail -n +2 "$f")
	done | sort -un
}
# two free ports below the ephemeral range (an outgoing connection can take a port there between
# the check and slurmctld's bind)
free_ports() {
	local used base lo hi elo ehi tries=0
	read -r elo ehi </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || { elo=32768 ehi=60999; }
	if [ "$elo" -gt 12000 ]; then lo=10000 hi=$((elo - 2)); else lo=$((ehi + 1)) hi=65533; fi
	[ "$hi" -gt $((lo + 100)) ] || { lo=10000 hi=65533; }
	used=" $(used_ports | tr '\n' ' ') "
	while [ $tries -lt 500 ]; do
		base=$((lo + (RANDOM * 32768 + RANDOM) % (hi - lo)))
		case $used in *" $base "* | *" $((base + 1)) "*) ;; *) echo "$base $((base + 1))"; return 0 ;; esac
		tries=$((tries + 1))
	done
	die "no free port pair found"
}

# ---------------------------------------------------------------------------------------- conf
write_conf() {
	local host=$1 ctlport=$2 dport=$3 ngpus=$4 gpufiles=$5 nodeline mem cpus mpi
	# slurmd -C: "NodeName=vm CPUs=2 Boards=1 SocketsPerBoard=1 CoresPerSocket=2 ThreadsPerCore=1 RealMemory=24105"
	nodeline=$(slurmd -C 2>/dev/null | grep -m1 '^NodeName=') || die "slurmd -C failed"
	mem=$(sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p' <<<"$nodeline")
	cpus=$(sed -n 's/.*CPUs=\([0-9]*\).*/\1/p' <<<"$nodeline")
	if [ -z "$mem" ] || [ -z "$cpus" ]; then die "cannot parse slurmd -C: $nodeline"; fi
	# a node registering less memory than configured is drained: leave some slack
	mem=$((mem * 9 / 10))
	nodeline=$(sed -e 's/^NodeName=[^ ]* *//' -e 's/RealMemory=[0-9]*/RealMemory='"$mem"'/' <<<"$nodeline")
	if have_pmix; then mpi=pmix; else mpi=none; fi
	local gres='' grestypes=''
	if [ "$ngpus" -gt 0 ]; then
		gres="Gres=gpu:$ngpus"
		grestypes=GresTypes=gpu
		printf 'NodeName=%s Name=gpu File=%s\n' "$host" "$gpufiles" >"$dir/gres.conf"
	else
		rm -f "$dir/gres.conf"
	fi
	cat >"$conf" <<EOF
# written by tests/slurm/cluster.sh; see tests/slurm/README.md
ClusterName=$cluster
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctlport
SlurmdPort=$dport
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
# cred_expire: a requeued job waits this long (default 120 s, minimum 5) before it may start again
AuthInfo=socket=$msock,cred_expire=${SG_SLURM_CRED_EXPIRE:-5}
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
MailProg=/bin/true
PlugStackConfig=$dir/plugstack.conf
ProctrackType=${SG_SLURM_PROCTRACK:-proctrack/linuxproc}
TaskPlugin=task/none
MpiDefault=$mpi
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
# no sacct without slurmdbd: one line per finished (or requeued) job here instead
JobCompType=jobcomp/filetxt
JobCompLoc=$dir/log/jobcomp.txt
SchedulerType=sched/backfill
SchedulerParameters=bf_interval=1,sched_interval=2,batch_sched_delay=0,sched_min_interval=0
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=$((mem / cpus))
ReturnToService=2
JobRequeue=1
# keep finished jobs visible to scontrol for an hour; a small MinJobAge purges failed jobs and
# then a dependency on them counts as satisfied
MinJobAge=3600
DependencyParameters=kill_invalid_depend
KillWait=5
InactiveLimit=0
Waittime=0
SlurmdTimeout=300
SlurmctldTimeout=120
MaxArraySize=10001
MaxJobCount=100000
$grestypes
NodeName=$host NodeAddr=127.0.0.1 $nodeline $gres State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
	: >"$dir/plugstack.conf" # not /etc/slurm's
}

# ---------------------------------------------------------------------------------------- gpus
# prints "N FILES" (gres.conf File= value) or "0 -"
setup_gpus() {
	local n=${SG_SLURM_GPUS:-} real f
	real=$(for f in /dev/nvidia[0-9]*; do [[ $f =~ /nvidia[0-9]+$ ]] && [ -c "$f" ] && echo "$f"; done | sort -V)
	if [ -z "$n" ]; then
		if [ -n "$real" ]; then n=$(wc -l <<<"$real"); else n=2; fi
	fi
	[ "$n" -gt 0 ] 2>/dev/null || { echo "0 -"; return; }
	if [ -n "$real" ] && [ "$(wc -l <<<"$real")" -ge "$n" ]; then
		echo "$n /dev/nvidia[0-$((n - 1))]"
		return
	fi
	# fake ones: symlinks to /dev/null (slurmd wants a character device; no mknod needed)
	local i
	mkdir -p "$dir/dev"
	for ((i = 0; i < n; i++)); do
		ln -sfn /dev/null "$dir/dev/fakegpu$i" || { log "cannot create $dir/dev/fakegpu$i: no gpus"; echo "0 -"; return; }
	done
	echo "$n $dir/dev/fakegpu[0-$((n - 1))]"
}

# ---------------------------------------------------------------------------------------- start
start() {
	[ "$(id -u)" = 0 ] || die "start needs root (SlurmUser=root, munged as root)"
	local host
	host=$(hostname -s)
	# unix sockets (108 bytes): DIR/munge/munge.socket.2 and slurmstepd's DIR/spool/HOST_JOBID.STEPID
	local longest=$dir/spool/${host}_4294967294.4294967294
	[ ${#longest} -lt 108 ] || die "DIR is too long for the unix socket paths under it ($longest)"
	if [ -n "$(marked_pids)" ]; then
		log "daemons of $dir already running: stopping them first"
		stop
	fi
	mkdir -p "$dir/log" || die "cannot create $dir"
	rm -f "$dir"/log/*.log "$dir"/log/*.out "$dir/log/jobcomp.txt"
	install_pkgs
	local t0=$SECONDS ctlport dport ngpus gpufiles
	rm -rf "$dir/state" "$dir/spool"
	mkdir -p "$dir/state" "$dir/spool" "$dir/munge"
	chmod go+x,go-w "$dir" # munged: its socket, key and seed dirs must not be writable by others, and the socket reachable
	chmod 0711 "$dir/munge"
	chmod 0755 "$dir/log"

	# munge: a key of our own, every path in DIR
	if [ ! -s "$dir/munge/munge.key" ]; then
		mungekey -c -k "$dir/munge/munge.key" 2>/dev/null ||
			dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none ||
			die "cannot create the munge key"
	fi
	chown root:root "$dir/munge/munge.key"
	chmod 0400 "$dir/munge/munge.key"
	local margs=(--socket="$msock" --key-file="$dir/munge/munge.key" --pid-file="$dir/munge/munged.pid"
		--log-file="$dir/log/munged.log" --seed-file="$dir/munge/munged.seed")
	if ! env "$marker" munged "${margs[@]}" </dev/null >>"$dir/log/munged.out" 2>&1; then
		log "munged refused to start; retrying with --force"
		env "$marker" munged --force "${margs[@]}" </dev/null >>"$dir/log/munged.out" 2>&1 || {
			tail -5 "$dir/log/munged.log" "$dir/log/munged.out" >&2
			die "munged did not start"
		}
	fi
	munge -S "$msock" -n 2>/dev/null | unmunge -S "$msock" >/dev/null 2>&1 || die "munge round trip failed"

	read -r ngpus gpufiles <<<"$(setup_gpus)"
	local attempt state
	for attempt in 1 2 3; do
		read -r ctlport dport <<<"$(free_ports)"
		write_conf "$host" "$ctlport" "$dport" "$ngpus" "$gpufiles"
		rm -f "$dir"/log/slurm*.log "$dir"/log/slurm*.out "$dir/slurmctld.pid" "$dir/slurmd.pid"
		env "$marker" SLURM_CONF="$conf" slurmctld -f "$conf" </dev/null >>"$dir/log/slurmctld.out" 2>&1 &&
			env "$marker" SLURM_CONF="$conf" slurmd -f "$conf" </dev/null >>"$dir/log/slurmd.out" 2>&1 &&
			state=$(wait_idle "$host") && break
		# a port taken between the check and the bind: new ports
		if [ $attempt -lt 3 ] && grep -qs 'Address already in use' "$dir"/log/slurm*.log; then
			log "port $ctlport or $dport already in use; trying others"
			# shellcheck disable=SC2046
			kill -9 $(marked_pids | grep -vx "$(pidof_file "$dir/munge/munged.pid")") 2>/dev/null
			sleep 0.5
			continue
		fi
		state=$(sl sinfo -h -N -n "$host" -o '%T' 2>/dev/null | head -1)
		log "node $host is '${state:-unknown}' after $((SECONDS - t0)) s"
		diag
		stop
		die "the cluster did not come up"
	done
	log "cluster up in $((SECONDS - t0)) s: node $host ($state), ports $ctlport/$dport, gpus $ngpus, conf $conf"
	exports
}

# wait_idle HOST: print the node state once idle; 1 if a daemon dies or on timeout
wait_idle() {
	local state resumed=0 p deadline=$((SECONDS + ${SG_SLURM_START_TIMEOUT:-60}))
	while :; do
		state=$(sl sinfo -h -N -n "$1" -o '%T' 2>/dev/null | head -1)
		case $state in
		idle | mixed | allocated) echo "$state"; return 0 ;;
		down* | drain* | fail* | *'*')
			if [ $resumed -lt 3 ] && [ -n "$state" ]; then
				sl scontrol update nodename="$1" state=resume >/dev/null 2>&1 && resumed=$((resumed + 1))
			fi ;;
		esac
		for p in slurmctld slurmd; do
			if [ -s "$dir/$p.pid" ] && ! alive "$(pidof_file "$dir/$p.pid")"; then
				log "$p exited"
				return 1
			fi
		done
		[ $SECONDS -lt $deadline ] || return 1
		sleep 0.5
	done
}

diag() {
	{
		echo "---- sinfo"
		sl sinfo -N -l 2>&1
		sl scontrol show node 2>&1 | grep -E 'State|Reason'
		local f
		for f in slurmctld.log slurmd.log munged.log slurmctld.out slurmd.out munged.out; do
			[ -s "$dir/log/$f" ] && { echo "---- tail $dir/log/$f"; tail -15 "$dir/log/$f"; }
		done
	} >&2
}

# ---------------------------------------------------------------------------------------- stop
kill_wait() { # kill_wait NAME PID...: TERM, wait up to 10 s, KILL
	local name=$1 p i
	shift
	[ $# -gt 0 ] || return 0
	kill "$@" 2>/dev/null
	for ((i = 0; i < 100; i++)); do
		local any=0
		for p in "$@"; do alive "$p" && any=1; done
		[ $any = 0 ] && return 0
		sleep 0.1
	done
	log "$name ($*) ignored SIGTERM: SIGKILL"
	kill -9 "$@" 2>/dev/null
	sleep 0.2
}

stop() {
	local ctl d m i ids
	ctl=$(pidof_file "$dir/slurmctld.pid")
	d=$(pidof_file "$dir/slurmd.pid")
	m=$(pidof_file "$dir/munge/munged.pid")
	# only trust a pid file whose process carries our marker (a stale file may name another process)
	for v in ctl d m; do
		if [ -n "${!v}" ] && ! has_marker "${!v}"; then
			eval "$v="
		fi
	done
	if alive "$ctl" && [ -f "$conf" ]; then
		# cancel every job, then SIGKILL their processes ourselves: scancel (even --signal=KILL)
		# sends TERM and gives the job KillWait seconds, and with proctrack/linuxproc a child of a
		# killed batch shell escapes to init; the slurmstepds then finish at once
		ids=$(sl squeue -h -o '%A' 2>/dev/null | sort -u)
		if [ -n "$ids" ]; then
			log "cancelling $(wc -w <<<"$ids") job(s)"
			local t0=$SECONDS
			for ((i = 0; i < 300; i++)); do # 60 s
				if [ $((i % 10)) = 0 ]; then
					# shellcheck disable=SC2086
					sl scancel $ids 2>/dev/null
					sl scancel -u root 2>/dev/null
				fi
				# shellcheck disable=SC2046
				kill -9 $(job_pids) 2>/dev/null
				sleep 0.2
				ids=$(sl squeue -h -o '%A' 2>/dev/null | sort -u)
				[ -z "$ids" ] && break
			done
			if [ -n "$ids" ]; then
				log "jobs still in squeue after $((SECONDS - t0)) s:"
				sl squeue >&2
			else
				log "queue empty after $((SECONDS - t0)) s"
			fi
		fi
	fi
	# both at once: each takes 1-2 s to exit
	# shellcheck disable=SC2046
	kill_wait "slurmd/slurmctld" $(alive "$d" && echo "$d") $(alive "$ctl" && echo "$ctl")
	# strays: slurmstepd (outlives slurmd), daemons whose pid file went missing, job processes
	# that escaped their job (proctrack/linuxproc loses children re-parented to init)
	local strays
	strays=$({ marked_pids | grep -vx "${m:-x}"; job_pids; } | sort -un)
	if [ -n "$strays" ]; then
		log "killing strays: $(for p in $strays; do printf '%s(%s) ' "$p" "$(cat "/proc/$p/comm" 2>/dev/null)"; done)"
		# shellcheck disable=SC2086
		kill -9 $strays 2>/dev/null
	fi
	# shellcheck disable=SC2046
	kill_wait munged $(alive "$m" && echo "$m")
	sleep 0.2
	strays=$({ marked_pids; job_pids; } | sort -un)
	if [ -n "$strays" ]; then
		log "still alive after SIGKILL: $strays"
		ps -o pid,ppid,stat,cmd -p "$(tr '\n' ',' <<<"$strays" | sed 's/,$//')" >&2
	fi
	rm -f "$dir/slurmctld.pid" "$dir/slurmd.pid" "$dir/munge/munged.pid"
	return 0
}

# ---------------------------------------------------------------------------------------- wait
wait_jobs() {
	local timeout=${SG_SLURM_WAIT_TIMEOUT:-600} ids=() a
	while [ $# -gt 0 ]; do
		case $1 in
		-t) timeout=$2; shift 2 ;;
		--timeout=*) timeout=${1#*=}; shift ;;
		*) ids+=("$1"); shift ;;
		esac
	done
	[ ${#ids[@]} -gt 0 ] || usage
	local deadline=$((SECONDS + timeout)) q left
	while :; do
		# %A job id (each array task has its own), %F array job id, %i 12_3 form
		if ! q=$(sl squeue -h -r -o '%A %F %i' 2>&1); then
			log "squeue failed: $q"
			return 1
		fi
		left=
		for a in "${ids[@]}"; do
			awk -v a="$a" '$1 == a || $2 == a || $3 == a { f = 1 } END { exit !f }' <<<"$q" && left+=" $a"
		done
		[ -z "$left" ] && return 0
		if [ $SECONDS -ge $deadline ]; then
			log "timeout after $timeout s; still queued:$left"
			sl squeue >&2
			return 124
		fi
		sleep 0.5
	done
}

case $cmd in
start) start ;;
stop) stop ;;
status)
	sl sinfo -N -l
	sl squeue -l
	;;
env) exports ;;
wait) wait_jobs "$@" ;;
*) usage ;;
esac
