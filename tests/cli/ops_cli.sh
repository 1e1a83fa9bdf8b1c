#!/usr/bin/env bash
# The `vioscope` command line as a user meets it, one scenario per call (ctest: ops_cli.NAME):
#   tests/cli/ops_cli.sh NAME BUILD_DIR SOURCE_DIR
# Every wait is bounded (DEADLINE seconds); a target the test starts is killed at the end
# whatever happens.  Exit 0 pass, 1 fail, 77 skipped.
set -uo pipefail
name=$1
build=$(cd "$2" && pwd)
src=$(cd "$3" && pwd)
V=$build/tools/vioscope
DEADLINE=${OPS_CLI_DEADLINE:-20}
work=$(mktemp -d /tmp/vs-ops-cli.XXXXXX)
pids=()
cleanup() {
	for p in "${pids[@]}"; do
		kill -KILL "$p" 2>/dev/null
		wait "$p" 2>/dev/null
	done
	rm -rf "$work"
}
trap cleanup EXIT
fail() {
	echo "FAIL ($name): $*" >&2
	for f in out err; do [[ -s $work/$f ]] && { echo "--- $f:" >&2; head -c 4000 "$work/$f" >&2; }; done
	exit 1
}

# run CMD...: exit status in $rc, stdout in $work/out, stderr in $work/err.
run() {
	timeout -k 5 "$DEADLINE" "$@" >"$work/out" 2>"$work/err"
	rc=$?
}
# expect RC PATTERN CMD...: CMD exits RC and its stderr holds PATTERN (grep -E).
expect() {
	local want=$1 pattern=$2
	shift 2
	run "$@"
	[[ $rc == "$want" ]] || fail "'$*' exited $rc, not $want"
	grep -qE -- "$pattern" "$work/err" || fail "'$*': no /$pattern/ in its stderr"
}
# A target in the background (stderr into $work/TAG.err): its pid in $last (and pids).
start_target() {
	local tag=$1
	shift
	"$V" target "$@" 2>"$work/$tag.err" &
	pids+=($!)
	last=$!
	last_err=$work/$tag.err
}
# wait_socket PATH: until it is a listening socket (it appears only then), while the
# target started last still runs.
wait_socket() {
	local end=$((SECONDS + DEADLINE))
	until [[ -S $1 ]]; do
		kill -0 "$last" 2>/dev/null || fail "the target exited: $(cat "$last_err")"
		((SECONDS < end)) || fail "no socket at $1 within $DEADLINE s"
		sleep 0.05
	done
}
# stop_target PID: SIGTERM, and it must exit 0.
stop_target() {
	kill -TERM "$1"
	timeout -k 5 "$DEADLINE" tail --pid="$1" -f /dev/null
	wait "$1"
	local st=$?
	[[ $st == 0 ]] || fail "the target (pid $1) exited $st after SIGTERM"
}
commands() {
	"$V" --help | awk '/^Commands:/ { on = 1; next } on && /^$/ { exit } on { print $1 }'
}
# The machine's memory, RAM and swap, in KiB.
machine_kib() {
	awk '/^(MemTotal|SwapTotal):/ { s += $2 } END { print s }' /proc/meminfo
}

# ---- help ---------------------------------------------------------------------------------
help_of_every_command() {
	local n=0
	for c in $(commands); do
		run "$V" "$c" --help
		[[ $rc == 0 ]] || fail "'vioscope $c --help' exited $rc"
		grep -q '^usage: vioscope' "$work/out" || fail "'vioscope $c --help' printed no usage"
		[[ ! -s $work/err ]] || fail "'vioscope $c --help' wrote to stderr"
		n=$((n + 1))
	done
	((n >= 6)) || fail "only $n commands listed by vioscope --help"
	# Defaults, and every option the docs give (issue 24, items 5 and 11).
	run "$V" target --help
	for want in '--queues N +request queues, 1..16: give QEMU the same num_queues \(default: 1\)' \
		'\(default: 512\)' '\(default: 32\)' '\(default: 30 s\)' \
		'\(default: root and the target.s own uid\)' ',log-writes=LOG' ',delay=USEC' \
		',drop-write=K' ',misdirect-write=K' ',stale-read=K' ',fail-flush=K' ',gate=KIND' \
		'3 could not start'; do
		tr -s ' \n' ' ' <"$work/out" | grep -qE -- "$want" ||
			fail "vioscope target --help lacks /$want/"
	done
	run "$V" rpc --help
	for want in '\(default: 60 s\)' '\(default: \$VIOSCOPE_RPC_SOCKET\)' '--json' \
		'lun_add id=N spec=BACKEND' 'stats \[interval=true\]'; do
		tr -s ' \n' ' ' <"$work/out" | grep -qE -- "$want" || fail "vioscope rpc --help lacks /$want/"
	done
	# `vioscope help CMD` is the same text.
	"$V" target --help >"$work/a"
	"$V" help target >"$work/b"
	cmp -s "$work/a" "$work/b" || fail "'vioscope help target' differs from 'vioscope target --help'"
}

version_of_every_command() {
	# The commit the binary was built from (the build writes it into tools/version.c; a
	# commit made since does not change the binary), and it is one of this tree's commits.
	local commit='[0-9a-f]{12}(-dirty)?' re c
	c=$(sed -n 's/^const char vs_cli_commit\[\] = "\(.*\)";$/\1/p' "$build/tools/version.c")
	if [[ -n "$c" && "$c" != unknown ]]; then
		git -C "$src" cat-file -e "${c%-dirty}^{commit}" 2>/dev/null ||
			! git -C "$src" rev-parse 2>/dev/null || fail "built from $c, not a commit here"
		commit="$c"
	fi
	re="^vioscope [0-9]+\.[0-9]+\.[0-9]+ \(commit $commit of [0-9]{4}-[0-9]{2}-[0-9]{2}, cold flavour\)$"
	run "$V" --version
	[[ $rc == 0 ]] && grep -qE "$re" "$work/out" || fail "vioscope --version: $(cat "$work/out")"
	for c in $(commands); do
		run "$V" "$c" --version
		[[ $rc == 0 ]] || fail "'vioscope $c --version' exited $rc"
		grep -qE "$re" "$work/out" || fail "'vioscope $c --version' printed: $(cat "$work/out")"
	done
	run "$build/tools/vioscope-all" target --version
	grep -qE "all flavour\)$" "$work/out" || fail "vioscope-all --version: $(cat "$work/out")"
}

one_error_format() {
	expect 2 "^vioscope target: unknown option '--frobnicate' \(see --help\)$" \
		"$V" target --frobnicate
	expect 2 "^vioscope rpc: unknown option '--frobnicate'" "$V" rpc --frobnicate lun_list
	expect 2 "^vioscope target: option '--poll' takes no value$" "$V" target --poll=3
	expect 2 "^vioscope target: option '--queues' needs a value" "$V" target --queues
	expect 2 "^vioscope target: --queues '0': expected a whole number in 1..16$" \
		"$V" target --socket "$work/s" --lun 0:ram=1M --queues 0
	expect 2 "^vioscope: unknown command 'frobnicate'" "$V" frobnicate
	expect 2 "^vioscope help: no command 'frobnicate'" "$V" help frobnicate
}

# ---- exit status ------------------------------------------------------------------------------
target_usage_errors_exit_2() {
	local s=$work/s
	expect 2 "LUN 0 \(ram\): bad backend spec 'ram': ram needs a size \(ram=SIZE, e\.g\. ram=1G\)" \
		"$V" target --socket "$s" --lun 0:ram
	expect 2 "bad size '-5'" "$V" target --socket "$s" --lun 0:ram=-5
	expect 2 "bad size '1.5G'" "$V" target --socket "$s" --lun 0:ram=1.5G
	expect 2 "bad size '0'" "$V" target --socket "$s" --lun 0:null=0
	expect 2 "size 6144 bytes is not a whole number of 4096-byte blocks" \
		"$V" target --socket "$s" --lun 0:ram=6K --block-size 4096
	expect 2 "'drop-write=3' is a test-only option" "$V" target --socket "$s" --lun 0:ram=1M,drop-write=3
	expect 2 "unknown option 'frob'" "$V" target --socket "$s" --lun "0:file=$work/x.img,frob"
	expect 2 "unknown backend 'disk'" "$V" target --socket "$s" --lun 0:disk=1G
	expect 2 "--rpc $s names the --socket path" "$V" target --socket "$s" --rpc "$s" --lun 0:ram=1M
	expect 2 "names the --socket path" "$V" target --socket "$s" --rpc "$work/./s" --lun 0:ram=1M
	(cd "$work" && expect 2 "names the --socket path" "$V" target --socket s --rpc "$work/s" --lun 0:ram=1M) ||
		exit 1
	[[ ! -e $s ]] || fail "a refused command line left $s behind"
}

target_cannot_run_exits_3() {
	expect 3 "LUN 0 \(file=$work/missing.img\): .*No such file or directory" \
		"$V" target --socket "$work/s" --lun "0:file=$work/missing.img"
	expect 3 "" "$V" target --socket "$work/s" --lun-root "$work/nowhere" --lun 0:file=x.img
	touch "$work/taken"
	expect 3 "taken" "$V" target --socket "$work/taken" --lun 0:ram=1M
	start_target a --socket "$work/a.sock" --lun 0:ram=1M
	wait_socket "$work/a.sock"
	expect 3 "^vioscope target: --rpc: .*another process is listening" \
		"$V" target --socket "$work/b.sock" --rpc "$work/a.sock" --lun 0:ram=1M
	stop_target "$last"
}

rpc_exit_status() {
	expect 3 "^vioscope rpc: cannot connect to $work/nothing" "$V" rpc --socket "$work/nothing" lun_list
	expect 2 "^vioscope rpc: which METHOD" "$V" rpc --socket "$work/nothing"
	expect 2 "^vioscope rpc: --count goes with --watch" "$V" rpc --socket "$work/r" --count 2 stats
	start_target a --socket "$work/a.sock" --rpc "$work/r" --lun 0:ram=1M
	wait_socket "$work/r"
	expect 1 "^vioscope rpc: lun_add: LUN 0 exists \(ram=1M\) \(code -32000, EEXIST\)" \
		"$V" rpc --socket "$work/r" lun_add id=0 spec=ram=1M
	run "$V" rpc --socket "$work/r" --json lun_list
	[[ $rc == 0 ]] || fail "rpc --json lun_list exited $rc"
	python3 - "$work/out" <<-'EOF' || fail "rpc --json lun_list: not the envelope"
		import json, sys
		j = json.load(open(sys.argv[1]))
		assert j["vioscope"]["version"] and j["vioscope"]["commit"] and j["time"].endswith("Z")
		assert j["method"] == "lun_list" and j["result"][0]["spec"] == "ram=1M"
		assert j["argv"][1:] == ["rpc", "--socket", j["socket"], "--json", "lun_list"]
	EOF
	stop_target "$last"
}

# ---- the image lock -------------------------------------------------------------------------
image_locked_between_targets() {
	local img=$work/disk.img
	truncate -s 16M "$img"
	start_target a --socket "$work/a.sock" --rpc "$work/a.rpc" --lun "0:file=$img"
	local a=$last
	wait_socket "$work/a.sock"
	# A second writer, or a reader while it writes, is refused and leaves no socket.
	expect 3 "LUN 0 \(file=$img\): file=$img: $img is in use: another LUN or process .* holds a lock on it" \
		"$V" target --socket "$work/b.sock" --lun "0:file=$img"
	[[ ! -e $work/b.sock ]] || fail "the refused target left its socket"
	expect 3 "is in use.*failed to get the shared lock" "$V" target --socket "$work/b.sock" --lun "0:file=$img,ro"
	# A LUN added at run time to the same target: refused too.
	expect 1 "lun_add: LUN 1 \(file=$img\): .*is in use.*EBUSY" \
		"$V" rpc --socket "$work/a.rpc" lun_add id=1 "spec=file=$img"
	# Once the first is gone, the image is free again.
	stop_target "$a"
	start_target b --socket "$work/b.sock" --lun "0:file=$img"
	wait_socket "$work/b.sock"
	stop_target "$last"
	# Readers share.
	start_target r1 --socket "$work/r1.sock" --lun "0:file=$img,ro"
	local r1=$last
	wait_socket "$work/r1.sock"
	start_target r2 --socket "$work/r2.sock" --lun "0:file=$img,ro"
	wait_socket "$work/r2.sock"
	stop_target "$last"
	stop_target "$r1"
	# `shared` writers (a migration's source and destination) share; an exclusive one does not.
	start_target s1 --socket "$work/s1.sock" --lun "0:file=$img,shared"
	local s1=$last
	wait_socket "$work/s1.sock"
	start_target s2 --socket "$work/s2.sock" --lun "0:file=$img,shared"
	wait_socket "$work/s2.sock"
	expect 3 "is in use.*failed to get the write lock" "$V" target --socket "$work/b.sock" --lun "0:file=$img"
	stop_target "$last"
	stop_target "$s1"
}

image_locked_between_luns() {
	local img=$work/disk.img
	truncate -s 16M "$img"
	expect 3 "LUN 1 \(file=$img\): .*is in use" \
		"$V" target --socket "$work/s" --lun "0:file=$img" --lun "1:file=$img"
	start_target ro --socket "$work/s" --lun "0:file=$img,ro" --lun "1:file=$img,ro"
	wait_socket "$work/s"
	stop_target "$last"
}

ram_beyond_the_machine() {
	local kib half
	kib=$(machine_kib)
	expect 3 "LUN 0 \(ram=$((kib + 1048576))K\): .* is more than this machine's memory can hold" \
		"$V" target --socket "$work/s" --lun "0:ram=$((kib + 1048576))K"
	# Together: each fits, both do not.
	half=$((kib / 2 + 1024))
	expect 3 "LUN 1 \(ram=${half}K\): .*of which this process's RAM LUNs hold" \
		"$V" target --socket "$work/s" --lun "0:ram=${half}K" --lun "1:ram=${half}K"
	# Growing past it at run time (within the 64 GiB the LUN may grow to).
	if ((kib + 1048576 < 64 * 1048576)); then
		start_target a --socket "$work/a.sock" --rpc "$work/r" --lun 0:ram=1M
		wait_socket "$work/r"
		expect 1 "lun_resize: .*growing by .* is more than this machine's memory can hold" \
			"$V" rpc --socket "$work/r" lun_resize id=0 "size=$((kib + 1048576))K"
		stop_target "$last"
	fi
}

sizes_and_times_with_units() {
	start_target a --socket "$work/a.sock" --rpc "$work/r" --worker-timeout 1m \
		--lun 0:ram=64MiB --lun 1:null=512KiB
	wait_socket "$work/r"
	run "$V" rpc --socket "$work/r" --timeout 1m lun_list
	[[ $rc == 0 ]] || fail "rpc --timeout 1m exited $rc"
	grep -q '"bytes": 67108864' "$work/out" && grep -q '"bytes": 524288' "$work/out" ||
		fail "ram=64MiB and null=512KiB are not 67108864 and 524288 bytes"
	run "$V" rpc --socket "$work/r" lun_resize id=0 size=1GiB
	grep -q '"bytes": 1073741824' "$work/out" || fail "size=1GiB did not make 1073741824 bytes"
	run "$V" rpc --socket "$work/r" stats --watch 100ms --count 1
	[[ $rc == 0 ]] || fail "stats --watch 100ms exited $rc"
	stop_target "$last"
}

# ---- man pages and completion ---------------------------------------------------------------------
man_pages_from_the_help() {
	local page version
	[[ -f $build/man/vioscope.1 ]] || fail "no $build/man/vioscope.1"
	version=$("$V" --version | sed -E 's/^vioscope ([^ ]+) .*/\1/')
	for c in $(commands); do
		page=$build/man/vioscope-$c.1
		[[ -f $page ]] || fail "no man page for $c ($page)"
		LC_ALL=C.UTF-8 MANWIDTH=2000 man --warnings -l "$page" >"$work/man" 2>"$work/err" ||
			fail "man -l $page failed"
		[[ ! -s $work/err ]] || fail "man -l $page warned: $(cat "$work/err")"
		grep -q "vioscope $version" "$work/man" || fail "$page does not say vioscope $version"
		# It says what --help says: the same options, the same defaults.
		"$V" "$c" --help >"$work/help"
		tr -s ' \n' ' ' <"$work/man" >"$work/man1"
		for o in $(grep -oE -- '(^|[^a-z-])--[a-z][a-z-]*' "$work/help" | grep -oE -- '--.*' | sort -u); do
			grep -qF -- "$o" "$work/man1" || fail "$page lacks $o, which '$c --help' names"
		done
		tr -s ' \n' ' ' <"$work/help" >"$work/help1"
		while read -r d; do
			grep -qF -- "$d" "$work/man1" || fail "$page lacks '$d'"
		done < <(grep -oE '\(default: [^)]*\)' "$work/help1" | sort -u)
	done
}

complete_words() { # WORD...: what _vioscope offers for the last word
	bash -c 'source "$0"; COMP_WORDS=("${@}"); COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); _vioscope
		printf "%s\n" "${COMPREPLY[@]}"' "$completion" "$@"
}

completion_from_the_help() {
	completion=$build/bash-completion/vioscope
	[[ -f $completion ]] || fail "no $completion"
	complete_words vioscope tar | grep -qx target || fail "'vioscope tar<TAB>' does not offer target"
	complete_words vioscope target --so | grep -qx -- --socket || fail "no --socket for target"
	complete_words vioscope target --ad | grep -qx -- --adaptive-poll || fail "no --adaptive-poll"
	[[ $(complete_words vioscope rpc lun_r | sort | tr '\n' ' ') == "lun_remove lun_resize " ]] ||
		fail "rpc lun_r<TAB>: $(complete_words vioscope rpc lun_r)"
	touch "$work/sockfile"
	complete_words vioscope target --socket "$work/sock" | grep -qx "$work/sockfile" ||
		fail "no file names after --socket"
	complete_words vioscope trace --dr | grep -qx -- --dry-run || fail "no --dry-run for trace"
	bash -c 'source "$0"; complete -p vioscope-all' "$completion" | grep -q _vioscope ||
		fail "vioscope-all has no completion"
}

# ---- the install tree ------------------------------------------------------------------------------
install_tree() {
	local p=$work/prefix
	cmake --install "$build" --prefix "$p" >"$work/out" 2>"$work/err" || fail "cmake --install failed"
	for f in bin/vioscope bin/vioscope-off bin/vioscope-all bin/vioscope-cold-print \
		bin/vioscope-all-print include/vioscope/trace.h include/vioscope/target.h \
		include/vioscope/initiator.h lib/libvioscope_trace.so \
		lib/libvioscope_target-cold.a lib/libvioscope_initiator-all.a \
		lib/pkgconfig/vioscope-target-cold.pc lib/pkgconfig/vioscope-initiator-cold.pc \
		share/man/man1/vioscope.1 share/man/man1/vioscope-trace.1 \
		share/man/man1/vioscope-target.1 share/bash-completion/completions/vioscope \
		lib/systemd/system/vioscope-target@.service \
		lib/systemd/system/vioscope-target-config@.service; do
		[[ -e $p/$f ]] || fail "cmake --install did not place $f"
	done
	# man finds the pages there; the installed flavours say which they are.
	MANPATH=$p/share/man man -w vioscope-trace | grep -q "^$p/" || fail "man -w vioscope-trace"
	MANPATH=$p/share/man MANWIDTH=200 man vioscope-target 2>/dev/null | grep -q -- '--lun-root DIR' ||
		fail "man vioscope-target does not show --lun-root"
	"$p/bin/vioscope-all-print" --version | grep -q "all-print flavour" || fail "vioscope-all-print"
	completion=$p/share/bash-completion/completions/vioscope
	complete_words vioscope rp | grep -qx rpc || fail "the installed completion"
	# The unit runs the installed binary, and systemd accepts it.
	local unit=$p/lib/systemd/system/vioscope-target@.service
	grep -q "^ExecStart=$p/bin/vioscope target --socket %t/vioscope/%i/vhost.sock" "$unit" ||
		fail "the unit's ExecStart: $(grep ExecStart "$unit")"
	grep -q '^Type=notify$' "$unit" && grep -q '^KillSignal=SIGTERM$' "$unit" || fail "Type=notify, SIGTERM"
	local conf=$p/lib/systemd/system/vioscope-target-config@.service
	grep -q "^ExecStart=$p/bin/vioscope target --config /etc/vioscope/%i.json --config-autosave$" "$conf" ||
		fail "the config unit's ExecStart: $(grep ExecStart "$conf")"
	grep -q '^Type=notify$' "$conf" && grep -q '^ExecReload=/bin/kill -HUP $MAINPID$' "$conf" ||
		fail "the config unit: Type=notify, ExecReload"
	if command -v systemd-analyze >/dev/null; then
		mkdir "$work/units"
		cp "$unit" "$work/units/vioscope-target@check.service"
		cp "$conf" "$work/units/vioscope-target-config@check.service"
		# (with the installed man pages: it checks that Documentation= names a page)
		for u in vioscope-target@check vioscope-target-config@check; do
			MANPATH=$p/share/man systemd-analyze verify "$work/units/$u.service" \
				>"$work/out" 2>"$work/err" ||
				fail "systemd-analyze verify refused $u"
			! grep -q 'vioscope-target' "$work/err" || fail "systemd-analyze verify: $(cat "$work/err")"
		done
	else
		echo "systemd-analyze not found: the unit file is not verified" >&2
	fi
	# target.h and initiator.h with their libraries, through pkg-config, out of the tree.
	cp -r "$src/examples" "$work/ex"
	PKG_CONFIG_PATH=$p/lib/pkgconfig make -s -C "$work/ex" loopback >"$work/out" 2>"$work/err" ||
		fail "the pkg-config build of examples/loopback.c failed"
	VIOSCOPE_TRACE_DIR=$work "$work/ex/loopback" >"$work/out" 2>"$work/err" ||
		fail "loopback (installed target and initiator) failed"
	grep -q "4096 bytes written and read back" "$work/out" || fail "loopback printed: $(cat "$work/out")"
}

# ---- the configuration file (--config) ----------------------------------------------------

# write_config FILE SOCKET [RPC]: a valid configuration, LUN 0 on RAM and LUN 1 on null.
write_config() {
	local rpc=${3:+"\"rpc\": \"$3\","}
	cat >"$1" <<-EOF
		{ $rpc
		  "controllers": [
		    { "name": "vm1", "socket": "$2", "queues": 2,
		      "luns": [ { "id": 0, "spec": "ram=1M" },
		                { "id": 1, "spec": "null=1M" } ] }
		  ]
		}
	EOF
}
# col_of FILE LINE TEXT: the column where TEXT starts on LINE of FILE (what the target must
# name).
col_of() {
	local l
	l=$(sed -n "$2p" "$1")
	l=${l%%"$3"*}
	echo $((${#l} + 1))
}
# refused PATTERN: `target --config bad.json` exits 2 saying PATTERN, and no socket is left.
refused() {
	expect 2 "$1" "$V" target --config "$work/bad.json"
	[[ ! -e $work/vs.sock ]] || fail "a refused configuration left $work/vs.sock"
}

# A file that is not valid is refused whole, with its path, line and column (and the JSON
# path of a value at fault), exit 2, and nothing is created; one that cannot be read exits 3.
config_invalid_refused() {
	local sock=$work/vs.sock f=$work/bad.json
	printf '{\n  "controllers": [\n    {"name": "vm1", "socket": "%s",, "luns": []}\n]}\n' \
		"$sock" >"$f"
	refused "vioscope target: --config $f:3:[0-9]+: "
	write_config "$f" "$sock"
	sed -i 's/"queues": 2/"queue": 2/' "$f"
	refused "--config $f:3:$(col_of "$f" 3 '"queue"'): controllers\[0\]\.queue: unknown key 'queue'"
	write_config "$f" "$sock"
	sed -i 's/"queues": 2/"queues": "2"/' "$f"
	refused "$f:3:$(col_of "$f" 3 '"queues"'): controllers\[0\]\.queues: expected a whole number in 1\.\.16"
	write_config "$f" "$sock"
	sed -i 's/"null=1M"/"null"/' "$f"
	refused "$f:5:$(col_of "$f" 5 '"spec"'): controllers\[0\]\.luns\[1\]\.spec: LUN 1 \(null\): bad backend spec"
	write_config "$f" "$sock"
	sed -i 's/"id": 1/"id": 0/' "$f"
	refused "$f:5:$(col_of "$f" 5 '"id"'): controllers\[0\]\.luns\[1\]\.id: LUN 0 given twice"
	write_config "$f" "$sock"
	sed -i 's/^  \]$/  , { "name": "vm1", "socket": "x", "luns": [ { "id": 0, "spec": "ram=1M" } ] } ]/' "$f"
	refused "$f:6:5: controllers\[1\]: controller 'vm1' given twice"
	write_config "$f" "$sock"
	expect 2 "--socket with --config" "$V" target --config "$f" --socket "$sock"
	expect 2 "--config-autosave without --config" "$V" target --config-autosave --socket "$sock" --lun 0:ram=1M
	expect 3 "--config $work/none.json: cannot open: No such file" "$V" target --config "$work/none.json"
	[[ ! -e $sock ]] || fail "a refused configuration left $sock"
}

# rpc_ok METHOD [K=V...]: the call succeeds (stdout in $work/out).
rpc_ok() {
	run "$V" rpc --socket "$work/rpc.sock" "$@"
	[[ $rc == 0 ]] || fail "rpc $* exited $rc"
}
# only_files DIR NAME...: DIR holds exactly these (no temporary file left).
only_files() {
	local dir=$1 got
	shift
	got=$(cd "$dir" && ls -A | sort | tr '\n' ' ')
	[[ $got == "$(printf '%s\n' "$@" | sort | tr '\n' ' ')" ]] || fail "$dir holds: $got"
}

# save_config writes the live configuration over the file, owner-only, leaving no temporary
# file; a name is written beside it, a path anywhere else is refused; a write that fails
# (a file-size limit: even root cannot pass it) leaves the old file whole and no temporary.
config_save_atomic() {
	local d=$work/cfg f
	mkdir "$d"
	f=$d/target.json
	write_config "$f" "$work/vs.sock" "$work/rpc.sock"
	start_target t --config "$f"
	wait_socket "$work/rpc.sock"
	rpc_ok lun_add id=2 spec=null=2M
	rpc_ok save_config
	grep -q "\"path\": \"$f\"" "$work/out" || fail "save_config answered: $(cat "$work/out")"
	grep -q '"spec": "null=2M"' "$f" || fail "the saved file lacks LUN 2: $(cat "$f")"
	[[ $(stat -c %a "$f") == 600 ]] || fail "the saved file's mode is $(stat -c %a "$f")"
	rpc_ok save_config path=copy.json
	cmp -s "$f" "$d/copy.json" || fail "copy.json differs from the file"
	only_files "$d" target.json copy.json
	for bad in ../x.json /tmp/x.json .hidden ""; do
		run "$V" rpc --socket "$work/rpc.sock" save_config "path=$bad"
		[[ $rc == 1 ]] || fail "save_config path=$bad exited $rc"
	done
	only_files "$d" target.json copy.json
	[[ ! -e $work/x.json ]] || fail "save_config wrote outside the directory"
	stop_target "$last"

	# 40 LUNs: more than the 1 KiB file-size limit the second target runs under.
	write_config "$f" "$work/vs.sock" "$work/rpc.sock"
	for i in $(seq 2 41); do
		sed -i "s|{ \"id\": 1, \"spec\": \"null=1M\" }|&, { \"id\": $i, \"spec\": \"null=1M\" }|" "$f"
	done
	cp "$f" "$work/before.json"
	rm -f "$d/copy.json"
	"$V" target --config "$f" 2>"$work/t2.err" &
	pids+=($!)
	last=$!
	last_err=$work/t2.err
	wait_socket "$work/rpc.sock"
	prlimit --pid "$last" --fsize=1024 # once it serves: its own start writes no more
	run "$V" rpc --socket "$work/rpc.sock" save_config
	[[ $rc == 1 ]] || fail "save_config under a 1 KiB file-size limit exited $rc"
	grep -q "File too large" "$work/err" || fail "save_config said: $(cat "$work/err")"
	cmp -s "$f" "$work/before.json" || fail "a failed save changed the file"
	only_files "$d" target.json
	stop_target "$last"
}

# --config-autosave: each change over the socket is in the file when its reply comes.
config_autosave() {
	local f=$work/target.json
	write_config "$f" "$work/vs.sock" "$work/rpc.sock"
	start_target t --config "$f" --config-autosave
	wait_socket "$work/rpc.sock"
	rpc_ok lun_add id=5 spec=ram=2M
	grep -q '"spec": "ram=2M"' "$f" || fail "lun_add not saved: $(cat "$f")"
	rpc_ok lun_remove id=1
	! grep -q '"null=1M"' "$f" || fail "lun_remove not saved: $(cat "$f")"
	rpc_ok trace_set spec=verbose:vhost
	grep -q '"trace": "verbose:vhost"' "$f" || fail "trace_set not saved: $(cat "$f")"
	rpc_ok qos_set id=5 iops=500 burst_iops=50
	grep -q '"qos": "iops=500,burst_iops=50"' "$f" || fail "qos_set not saved: $(cat "$f")"
	run "$V" rpc --socket "$work/rpc.sock" lun_add id=5 spec=ram=1M
	grep -q '"spec": "ram=2M"' "$f" || fail "a refused lun_add changed the file"
	stop_target "$last"
}

# wait_log TEXT: until the target started last logged TEXT.
wait_log() {
	local end=$((SECONDS + DEADLINE))
	until grep -qF -- "$1" "$last_err"; do
		((SECONDS < end)) || fail "no '$1' in the target's log within $DEADLINE s: $(cat "$last_err")"
		sleep 0.05
	done
}
# lun_ids: the LUN ids lun_list reports, on one line.
lun_ids() {
	rpc_ok --table lun_list
	awk 'NR > 1 { printf "%s ", $1 }' "$work/out"
}

# SIGHUP applies the file's changes (a LUN removed, one added); a file that is invalid or
# changes what takes a restart changes nothing, and says why.
config_sighup_reload() {
	local f=$work/target.json
	write_config "$f" "$work/vs.sock" "$work/rpc.sock"
	start_target t --config "$f"
	wait_socket "$work/rpc.sock"
	sed -i 's/"id": 1, "spec": "null=1M"/"id": 3, "spec": "null=2M"/' "$f"
	kill -HUP "$last"
	wait_log "reload: $f: removed LUN 1 (null=1M), added LUN 3 (null=2M)"
	[[ $(lun_ids) == "0 3 " ]] || fail "after the reload, LUNs $(lun_ids)"
	# A LUN's limits changed in the file: set as qos_set would, the LUN kept.
	sed -i 's/"id": 0, "spec": "ram=1M"/&, "qos": "read_iops=100"/' "$f"
	kill -HUP "$last"
	wait_log "reload: $f: LUN 0's QoS"
	rpc_ok --json lun_list
	python3 -c 'import json,sys; l=json.load(open(sys.argv[1]))["result"][0]; assert l["id"] == 0 and l["qos"]["read_iops"] == 100, l' \
		"$work/out" || fail "after the reload, lun_list: $(cat "$work/out")"
	cp "$f" "$work/good.json"
	sed -i 's/"id": 3, "spec": "null=2M"/"id": 4, "spec": "null=2M", "ro": true/' "$f"
	kill -HUP "$last"
	wait_log "reload: $f:5:$(col_of "$f" 5 '"ro"'): controllers[0].luns[1].ro: unknown key 'ro'"
	wait_log "; nothing changed"
	[[ $(lun_ids) == "0 3 " ]] || fail "an invalid file changed the LUNs: $(lun_ids)"
	cp "$work/good.json" "$f"
	sed -i 's/"queues": 2/"queues": 1/; s/"id": 3/"id": 6/' "$f"
	kill -HUP "$last"
	wait_log "controllers[0].queues changed: that takes removing the controller and adding it again (or a restart); nothing changed"
	[[ $(lun_ids) == "0 3 " ]] || fail "a file needing a restart changed the LUNs: $(lun_ids)"
	stop_target "$last"
}

# Controllers: two from the file, one added and one removed over the socket with
# --config-autosave (each in the file when its reply comes), a controller's limits over all
# its LUNs set over the socket (saved) and in the file (reloaded), a SIGHUP that adds one
# and removes another, and a restart from the file that brings back the same controllers
# with their LUNs and limits.
ctrl_names() {
	rpc_ok --json controller_list
	python3 -c 'import json,sys; print(" ".join(c["name"] for c in json.load(open(sys.argv[1]))["result"]))' "$work/out"
}
# ctrl_iops NAME N: controller NAME's limit over all its LUNs is N IOPS.
ctrl_iops() {
	rpc_ok --json controller_list
	python3 -c 'import json,sys; c=[c for c in json.load(open(sys.argv[1]))["result"] if c["name"] == sys.argv[2]][0]; assert c["qos"]["iops"] == int(sys.argv[3]), c' \
		"$work/out" "$1" "$2" || fail "controller $1's limits: $(cat "$work/out")"
}
config_controllers() {
	local f=$work/target.json
	cat >"$f" <<-EOF
		{ "rpc": "$work/rpc.sock",
		  "controllers": [
		    { "name": "vm1", "socket": "$work/vm1.sock", "luns": [ { "id": 0, "spec": "ram=1M" } ] },
		    { "name": "vm2", "socket": "$work/vm2.sock", "queues": 2, "qos": "iops=2000",
		      "luns": [ { "id": 0, "spec": "null=1M" }, { "id": 4, "spec": "ram=2M", "qos": "iops=300" } ] }
		  ]
		}
	EOF
	start_target t --config "$f" --config-autosave
	wait_socket "$work/rpc.sock"
	[[ -S $work/vm1.sock && -S $work/vm2.sock ]] || fail "the controllers' sockets are not there"
	[[ $(ctrl_names) == "vm1 vm2" ]] || fail "controllers at start: $(ctrl_names)"
	ctrl_iops vm2 2000
	rpc_ok qos_set controller=vm2 id=all iops=1500
	grep -q '"qos": "iops=1500"' "$f" || fail "qos_set id=all not saved: $(cat "$f")"
	rpc_ok controller_add name=vm3 socket="$work/vm3.sock" 'luns=[{"id":1,"spec":"ram=1M"}]'
	grep -q '"name": "vm3"' "$f" || fail "controller_add not saved: $(cat "$f")"
	rpc_ok controller_remove name=vm1
	! grep -q '"name": "vm1"' "$f" || fail "controller_remove not saved: $(cat "$f")"
	[[ ! -e $work/vm1.sock ]] || fail "vm1's socket is left"
	run "$V" rpc --socket "$work/rpc.sock" lun_list
	[[ $rc == 1 ]] && grep -q "missing param 'controller': the target has 2 controllers (vm2, vm3)" "$work/err" ||
		fail "lun_list without a controller: $rc $(cat "$work/err")"
	# The file edited: vm3 goes, vm5 comes.
	python3 - "$f" "$work/vm5.sock" <<-'PY'
		import json, sys
		d = json.load(open(sys.argv[1]))
		d["controllers"] = [c for c in d["controllers"] if c["name"] != "vm3"]
		d["controllers"].append({"name": "vm5", "socket": sys.argv[2], "luns": [{"id": 0, "spec": "ram=1M"}]})
		json.dump(d, open(sys.argv[1], "w"), indent=2)
	PY
	sed -i 's/"iops=1500"/"iops=1200"/' "$f"
	kill -HUP "$last"
	wait_log "reload: $f: removed controller vm3, controller vm2's QoS, added controller vm5 ($work/vm5.sock)"
	[[ $(ctrl_names) == "vm2 vm5" ]] || fail "after the reload: $(ctrl_names)"
	stop_target "$last"
	start_target t2 --config "$f"
	wait_socket "$work/rpc.sock"
	[[ $(ctrl_names) == "vm2 vm5" ]] || fail "after the restart: $(ctrl_names)"
	rpc_ok --json lun_list controller=vm2
	python3 -c 'import json,sys; l=json.load(open(sys.argv[1]))["result"]; assert [x["id"] for x in l] == [0, 4] and l[1]["qos"]["iops"] == 300, l' \
		"$work/out" || fail "vm2's LUNs after the restart: $(cat "$work/out")"
	ctrl_iops vm2 1200
	# and served: the initiator finds LUN 4 (its second) behind vm2's socket and verifies it
	run "$V" check verify --socket "$work/vm2.sock" --queues 2 --lun 1 --destroy-data --writes 50 --time 60
	[[ $rc == 0 ]] || fail "check verify on vm2 after the restart: $rc $(cat "$work/err")"
	stop_target "$last"
}

case $name in
help_of_every_command | version_of_every_command | one_error_format | \
	target_usage_errors_exit_2 | target_cannot_run_exits_3 | rpc_exit_status | \
	image_locked_between_targets | image_locked_between_luns | ram_beyond_the_machine | \
	sizes_and_times_with_units | man_pages_from_the_help | completion_from_the_help | install_tree | \
	config_invalid_refused | config_save_atomic | config_autosave | config_sighup_reload | \
	config_controllers)
	cd "$work" && "$name" && echo "ok: $name"
	;;
*)
	echo "usage: $0 NAME BUILD_DIR SOURCE_DIR (no test '$name')" >&2
	exit 2
	;;
esac
