# shellcheck shell=bash disable=SC2034 # the variables are for the scripts that source this
# Sourced by start.sh, stop.sh and restart-osd.sh: where the cluster lives and how its daemons are found.
# The caller sets `self` (its name in messages) before sourcing.

CEPH_DIR=$(realpath -m -- "${VIOSCOPE_CEPH_DIR:-/tmp/vioscope-ceph}")
CONF=$CEPH_DIR/ceph.conf
# start.sh creates it first thing; stop.sh and start.sh delete only a directory that has it
MARKER=$CEPH_DIR/.vioscope-ceph
TIMEOUT=${VIOSCOPE_CEPH_TIMEOUT:-120}

# shellcheck disable=SC2154 # self is set by the sourcing script
say() { printf 'ceph %s: %s\n' "$self" "$*" >&2; }
die() {
	say "error: $*"
	exit 1
}

# The ceph CLI against this cluster, never blocking for long (60 s, or $cephc_timeout).
cephc() { timeout "${cephc_timeout:-60}" ceph -c "$CONF" --connect-timeout 30 "$@"; }

# True if pid is a ceph daemon started with this cluster's ceph.conf (a pid file may be stale
# and its pid reused by something else).
is_ours() {
	local comm
	comm=$(cat "/proc/$1/comm" 2>/dev/null) || return 1
	case $comm in ceph-mon | ceph-mgr | ceph-osd) ;; *) return 1 ;; esac
	tr '\0' '\n' <"/proc/$1/cmdline" 2>/dev/null | grep -qxF -- "$CONF"
}

# True while any thread of pid still runs. After SIGKILL the leader can be a zombie for a while
# whose other threads still hold its sockets, files and locks (the pid file's, the BlueStore
# block file's); a new daemon started then dies at once.
is_running() {
	local state
	state=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null) || return 1
	[[ ${state%% *} != Z ]] && return 0
	local tasks=("/proc/$1/task/"*)
	((${#tasks[@]} > 1))
}

# Wait until pid no longer runs (see is_running); false after `seconds`.
wait_gone() {
	local pid=$1 end=$((SECONDS + $2))
	while is_running "$pid"; do
		((SECONDS < end)) || return 1
		sleep 0.05
	done
}

# Pids of this cluster's running daemons, from their pid files.
daemon_pids() {
	local f pid
	for f in "$CEPH_DIR"/run/*.pid; do
		[[ -f $f ]] || continue
		pid=$(<"$f") || continue
		is_ours "$pid" && echo "$pid"
	done
	return 0
}

# SIGKILL every daemon of this cluster and wait until each is gone. The cluster is throw-away:
# a clean shutdown only costs time. The daemons' parent is init, which reaps them when it gets to
# it: give it up to 5 s so that no zombie shows in ps afterwards, but a thread-less zombie holds
# nothing and is not an error.
kill_daemons() {
	local pids pid ok=0 end
	mapfile -t pids < <(daemon_pids)
	((${#pids[@]})) || return 0
	kill -KILL "${pids[@]}" 2>/dev/null || true
	for pid in "${pids[@]}"; do
		wait_gone "$pid" 30 || {
			say "pid $pid ($(cat "/proc/$pid/comm" 2>/dev/null)) still runs 30 s after SIGKILL"
			ok=1
		}
	done
	end=$((SECONDS + 5))
	for pid in "${pids[@]}"; do
		while [[ -e /proc/$pid ]] && ((SECONDS < end)); do sleep 0.05; done
	done
	return $ok
}
