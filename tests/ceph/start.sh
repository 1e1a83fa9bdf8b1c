#!/usr/bin/env bash
# Start a throw-away single-host Ceph cluster for RBD tests: monitor mon.a, manager mgr.x, one
# BlueStore OSD (osd.0) on a sparse file, a pool "rbd" initialised for RBD. 127.0.0.1 only, cephx,
# every file under one private directory. Stop it with stop.sh, restart the OSD with restart-osd.sh.
#
# Stdout gets one line, the path of the cluster's ceph.conf, once the cluster is HEALTH_OK:
#   CEPH_CONF=$(tests/ceph/start.sh | tail -1)
# Progress and errors go to stderr. Exit 0 ready, 1 failed (daemons stopped, logs kept in the
# directory), 77 Ceph is not available here (a test should skip with the message printed).
#
# Installs what it needs when missing (Debian: ceph-mon ceph-mgr ceph-osd ceph-common librbd-dev
# fio) as root or with passwordless sudo. A cluster already running in the same directory is
# stopped and replaced. Knobs: see README.md (VIOSCOPE_CEPH_DIR, _PORT, _OSD_SIZE, _TIMEOUT, _NO_APT).
set -euo pipefail
self=start
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/ceph/lib.sh
. "$here/lib.sh"

PORT=${VIOSCOPE_CEPH_PORT:-12046}
OSD_SIZE=${VIOSCOPE_CEPH_OSD_SIZE:-4G}

exec 3>&1 1>&2 # stdout is for the ceph.conf path only

skip() {
	printf 'ceph start: SKIP: %s\n' "$*" >&2
	exit 77
}

t0=$(date +%s%N)
elapsed() {
	local ms=$((($(date +%s%N) - t0) / 1000000))
	echo "$((ms / 1000)).$((ms % 1000 / 100)) s"
}
step() { say "+$(elapsed) $*"; }

# --- what this machine needs -------------------------------------------------------------------
packages=(ceph-mon ceph-mgr ceph-osd ceph-common librbd-dev fio)
commands=(ceph-mon ceph-mgr ceph-osd ceph ceph-authtool monmaptool rbd fio)

install_missing() {
	command -v dpkg-query >/dev/null || return 0 # not Debian: the command check below decides
	local p missing=() sudo=()
	for p in "${packages[@]}"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
	done
	((${#missing[@]})) || return 0
	[[ -z ${VIOSCOPE_CEPH_NO_APT:-} ]] || skip "packages missing: ${missing[*]} (VIOSCOPE_CEPH_NO_APT is set)"
	command -v apt-get >/dev/null || skip "packages missing: ${missing[*]} (and no apt-get)"
	if ((EUID != 0)); then
		sudo -n true 2>/dev/null || skip "packages missing: ${missing[*]} (installing them needs root or passwordless sudo)"
		sudo=(sudo -n)
	fi
	step "installing ${missing[*]}"
	"${sudo[@]}" apt-get update -qq || skip "apt-get update failed; packages missing: ${missing[*]}"
	"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -o DPkg::Lock::Timeout=300 \
		--no-install-recommends "${missing[@]}" >/dev/null ||
		skip "apt-get install ${missing[*]} failed"
}

install_missing
for c in "${commands[@]}"; do
	command -v "$c" >/dev/null || skip "command $c not found (Debian packages: ${packages[*]})"
done

# --- the directory ------------------------------------------------------------------------------
if [[ -e $MARKER ]]; then
	say "replacing the cluster in $CEPH_DIR"
	"$here/stop.sh" || die "could not stop the cluster in $CEPH_DIR"
elif [[ -e $CEPH_DIR && -n $(ls -A "$CEPH_DIR" 2>/dev/null) ]]; then
	die "$CEPH_DIR exists, is not empty and was not made by start.sh; remove it or set VIOSCOPE_CEPH_DIR"
fi

# A monitor that cannot bind its port exits without a word: check the port first.
if (exec 4<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; then
	die "127.0.0.1:$PORT is in use (another cluster? set VIOSCOPE_CEPH_PORT)"
fi

mkdir -p "$CEPH_DIR"
touch "$MARKER"
mkdir -p "$CEPH_DIR"/{run,log,crash,mon.a,mgr.x,osd.0}

ready=0
# On failure: report, stop whatever started, keep the logs.
on_exit() {
	local rc=$?
	((ready || rc == 77)) && return
	local f
	for f in "$CEPH_DIR"/log/*.log; do
		[[ -s $f ]] || continue
		printf '==== last lines of %s\n' "$f" >&2
		tail -n 20 "$f" >&2
	done
	kill_daemons || true
	say "FAILED after $(elapsed); logs kept in $CEPH_DIR/log (stop.sh removes them)"
	exit 1
}
trap on_exit EXIT
trap 'exit 1' INT TERM HUP

# --- configuration and keys ---------------------------------------------------------------------
fsid=$(cat /proc/sys/kernel/random/uuid)
osd_uuid=$(cat /proc/sys/kernel/random/uuid)
mon_addr="[v2:127.0.0.1:$PORT]"
D=$CEPH_DIR
cat >"$CONF" <<CONF
# Written by vioscope tests/ceph/start.sh; removed by stop.sh.
[global]
fsid = $fsid
mon host = $mon_addr
public addr = 127.0.0.1
cluster addr = 127.0.0.1
# every client here speaks msgr2: one port per daemon is enough
ms bind msgr1 = false
auth allow insecure global id reclaim = false
run dir = $D/run
crash dir = $D/crash
mon data = $D/\$name
mgr data = $D/\$name
osd data = $D/\$name
# one OSD: pools of one replica, placed on OSDs rather than hosts, and no warnings about it
osd pool default size = 1
osd pool default min size = 1
osd crush chooseleaf type = 0
mon allow pool size one = true
mon warn on pool no redundancy = false
osd pool default pg autoscale mode = off
mon allow pool delete = true
# quicker cluster map updates and PG statistics than the defaults (1 s, 5 s, 5 s)
paxos propose interval = 0.2
mgr stats period = 1
mon mgr digest period = 1
# the test machine's disk may well be less than 30% free; stop the monitor only below 1%
mon data avail warn = 1
mon data avail crit = 1

[mon]
log file = $D/log/\$cluster-\$name.log
pid file = $D/run/\$cluster-\$name.pid
# else the cluster log goes to /var/log/ceph
mon cluster log file = $D/log/\$cluster.log

[mgr]
log file = $D/log/\$cluster-\$name.log
pid file = $D/run/\$cluster-\$name.pid

[osd]
log file = $D/log/\$cluster-\$name.log
pid file = $D/run/\$cluster-\$name.pid
osd objectstore = bluestore
# BlueStore on a sparse file osd.0/block, made by --mkfs (no loop device, no ceph-volume)
bluestore block create = true
bluestore block size = $OSD_SIZE
bluestore fsck on mkfs = false
# sized for 2 cores and 24 GiB: 1 GiB memory target (the least allowed is 896 MiB), 2x2 op threads
osd memory target = 1073741824
osd op num shards = 2
osd op num threads per shard = 2
# the same behaviour whatever disk holds the directory (a virtio disk says it is rotational):
# small writes are deferred through the RocksDB WAL (4k random writes ran 2x faster than with
# the SSD settings in one comparison here)
bluestore debug enforce settings = hdd
# A restarted OSD replays the RocksDB WAL (twice) and loads every PG log before it boots; with the
# defaults (256 MiB memtables, up to 10000 log entries per PG) that took 12-18 s after a minute
# of 4k writes, with these 7-8 s.
bluestore rocksdb options annex = write_buffer_size=33554432,max_total_wal_size=134217728
osd max pg log entries = 500

[client]
keyring = $D/client.admin.keyring
# like SPDK's test cluster: no librbd write-back cache, a completed write is on the OSD
rbd cache = false
CONF

# Every key is made now and put into the monitor's database by its mkfs: no "ceph auth" later.
{
	ceph-authtool "$D/client.admin.keyring" --create-keyring -n client.admin --gen-key \
		--cap mon 'allow *' --cap mgr 'allow *' --cap osd 'allow *' --cap mds 'allow *'
	ceph-authtool "$D/mgr.x/keyring" --create-keyring -n mgr.x --gen-key \
		--cap mon 'allow profile mgr' --cap osd 'allow *' --cap mds 'allow *'
	ceph-authtool "$D/osd.0/keyring" --create-keyring -n osd.0 --gen-key \
		--cap mon 'allow profile osd' --cap mgr 'allow profile osd' --cap osd 'allow *'
	ceph-authtool "$D/mon.keyring" --create-keyring -n mon. --gen-key --cap mon 'allow *'
	for k in client.admin.keyring mgr.x/keyring osd.0/keyring; do
		ceph-authtool "$D/mon.keyring" --import-keyring "$D/$k"
	done
	monmaptool --create --fsid "$fsid" --addv a "$mon_addr" "$D/monmap"
} >"$D/log/setup.log" 2>&1 || die "keys or monmap: see $D/log/setup.log"

# --- daemons ------------------------------------------------------------------------------------
started=() # daemons started so far, by name (mon.a ...)
# A daemon has written its pid file by the time its start command returns; fail at once if one
# has died since, instead of waiting out the timeout.
check_started() {
	local name pid
	for name in "${started[@]}"; do
		if ! pid=$(cat "$D/run/ceph-$name.pid" 2>/dev/null) || ! is_running "$pid"; then
			die "ceph-$name exited: see $D/log/ceph-$name.log"
		fi
	done
}

# wait_for DESCRIPTION COMMAND...: poll until COMMAND succeeds, fail after TIMEOUT seconds.
# Each ceph call in COMMAND gets 15 s (some, like "pg stat" without a manager, would block).
wait_for() {
	local what=$1 end=$((SECONDS + TIMEOUT)) cephc_timeout=15
	shift
	until "$@" >/dev/null 2>&1; do
		check_started
		((SECONDS < end)) || die "no $what after $TIMEOUT s"
		sleep 0.2
	done
}

# Daemons fork into the background: they must not inherit our stdout (fd 3) or stderr, or a caller
# reading them through a pipe would wait for the cluster to stop.
run() { "$@" </dev/null >>"$D/log/setup.log" 2>&1 3>&-; }

run ceph-mon -c "$CONF" -i a --mkfs --monmap "$D/monmap" --keyring "$D/mon.keyring" ||
	die "ceph-mon --mkfs: see $D/log/setup.log"
run ceph-mon -c "$CONF" -i a || die "ceph-mon did not start"
started+=(mon.a)
wait_for "monitor quorum" cephc quorum_status
step "monitor up"

# The manager only reports (PG states, usage, health checks it owns): start it early, it takes longest.
run ceph-mgr -c "$CONF" -i x || die "ceph-mgr did not start"
started+=(mgr.x)

osd_id=$(cephc osd new "$osd_uuid" 2>>"$D/log/setup.log") || die "ceph osd new failed"
[[ $osd_id == 0 ]] || die "ceph osd new gave id '$osd_id', expected 0"
run ceph-osd -c "$CONF" -i 0 --mkfs --osd-uuid "$osd_uuid" ||
	die "ceph-osd --mkfs: see $D/log/setup.log"
run ceph-osd -c "$CONF" -i 0 || die "ceph-osd did not start"
started+=(osd.0)
osd_up() { cephc osd dump | grep -q '^osd\.0 up '; }
wait_for "osd.0 up" osd_up
step "osd.0 up"

run cephc osd pool create rbd 8 8 || die "ceph osd pool create rbd failed"
# writes to the pool, so it also waits until the pool's PGs are active
run timeout "$TIMEOUT" rbd -c "$CONF" pool init rbd || die "rbd pool init failed"
step "pool rbd ready"

# HEALTH_OK alone can come while the manager still shows PGs as creating: wait for both.
healthy() {
	cephc pg stat | grep -qE '^([0-9]+) pgs: \1 active\+clean;' && [[ $(cephc health) == HEALTH_OK ]]
}
wait_for "HEALTH_OK with every PG active+clean" healthy
step HEALTH_OK

ready=1
echo "$CONF" >&3
