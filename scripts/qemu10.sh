#!/usr/bin/env bash
# A private QEMU 10 (Debian bookworm-backports' qemu-system-x86) beside the system's QEMU 7.2,
# which stays installed and untouched: the packages are fetched with `apt-get download` and
# unpacked with `dpkg -x` into a cache directory, and a wrapper script runs that binary with its
# own libraries (LD_LIBRARY_PATH), modules (QEMU_MODULE_DIR) and firmware (-L).
#
# usage: scripts/qemu10.sh          prints the wrapper's path (stdout, one line); progress on stderr
#
# Steps, each only when needed (a second run finds the wrapper working and only prints its path):
#   1. the bookworm-backports apt source: /etc/apt/sources.list.d/vioscope-backports.sources
#      (deb822; the same Debian mirror as the existing sources, Debian's archive keyring), unless
#      a source for that suite is there already
#   2. `apt-get update` of that source alone, when apt knows no backports qemu-system-x86
#   3. `apt-get download` of qemu-system-x86, qemu-system-common, qemu-system-data from
#      backports, plus every package qemu-system-x86 depends on that the installed one does not
#      satisfy (seabios >> 1.16.3 from backports; a library not installed, in the newest version
#      that satisfies it); `dpkg -x` of each into DIR/root
#   4. `ldd` of the binary with the wrapper's library path: no library may be missing
#   5. DIR/qemu-system-x86_64 (the wrapper), checked with -version (10.x)
#
# Environment:
#   VIOSCOPE_QEMU10_DIR    the cache directory (default tests/guest/cache/qemu10, git-ignored)
#   VIOSCOPE_QEMU10_SUITE  the suite (default: the codename of /etc/os-release + "-backports")
#
# Exit status: 0 done (path on stdout), 1 error, 77 the package archive cannot be reached (or
# does not have the package): a test that needs QEMU 10 skips.
# Needs root for steps 1-3 (writes /etc/apt/sources.list.d and apt's lists); not once cached.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
dir=${VIOSCOPE_QEMU10_DIR:-$repo/tests/guest/cache/qemu10}
PKG=qemu-system-x86
WANT_MAJOR=10
SOURCES_FILE=/etc/apt/sources.list.d/vioscope-backports.sources
KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg
APT_OPTS=(-o DPkg::Lock::Timeout=120 -o Acquire::Retries=2 -o Acquire::http::Timeout=30)

log() { printf 'qemu10: %s\n' "$*" >&2; }
die() {
	printf 'qemu10: error: %s\n' "$*" >&2
	exit 1
}
unreachable() {
	printf 'qemu10: SKIP: %s\n' "$*" >&2
	exit 77
}

[[ $# -eq 0 ]] || {
	sed -n '7p' "$0" | sed 's/^# \{0,1\}//' >&2
	exit 2
}

wrapper=$dir/qemu-system-x86_64
root=$dir/root
# works: the wrapper runs and says QEMU 10.
works() {
	[[ -x $wrapper ]] || return 1
	local v
	v=$("$wrapper" -version 2>/dev/null | head -n 1) || return 1
	[[ $v =~ version\ $WANT_MAJOR\. ]]
}
if works; then
	echo "$wrapper"
	exit 0
fi

mkdir -p "$dir"

# --- 1. the backports source --------------------------------------------------------------------------
if ! command -v apt-get >/dev/null || ! command -v dpkg-deb >/dev/null; then
	die "not a Debian system (no apt-get/dpkg-deb)"
fi
# shellcheck source=/dev/null
codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
[[ -n $codename ]] || die "no VERSION_CODENAME in /etc/os-release"
suite=${VIOSCOPE_QEMU10_SUITE:-$codename-backports}

# apt_sources: the enabled source files (one-line .list and deb822 .sources).
apt_sources() {
	local f
	for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
		[[ -f $f ]] && echo "$f"
	done
}
# mirror: the URI of the first source that serves suite $codename (the main Debian archive).
mirror() {
	local f
	while read -r f; do
		if [[ $f == *.sources ]]; then
			# deb822 stanzas: a URIs line and a Suites line naming $codename in the same stanza.
			awk -v want="$codename" '
				/^[[:space:]]*$/ { if (uri != "" && ok) { print uri; exit } uri = ""; ok = 0; next }
				tolower($1) == "uris:" { uri = $2 }
				tolower($1) == "suites:" { for (i = 2; i <= NF; i++) if ($i == want) ok = 1 }
				END { if (uri != "" && ok) print uri }' "$f"
		else
			# deb [options] URI SUITE COMPONENTS...
			sed -E 's/#.*//; s/\[[^]]*\]//' "$f" | awk -v want="$codename" \
				'$1 == "deb" && $3 == want { print $2 }'
		fi
	done < <(apt_sources) | head -n 1
}
# has_suite: some enabled source names $suite.
has_suite() {
	local f
	while read -r f; do
		sed 's/#.*//' "$f" | grep -Eq "(^|[[:space:]])$suite([[:space:]]|$)" && return 0
	done < <(apt_sources)
	return 1
}

own_source=
if has_suite; then
	log "an apt source for $suite is there already"
else
	[[ $(id -u) -eq 0 ]] || die "no apt source for $suite and not root: run as root once to add $SOURCES_FILE"
	uri=$(mirror)
	[[ -n $uri ]] || die "no Debian mirror serving '$codename' in the apt sources to take for $suite"
	[[ -f $KEYRING ]] || die "no $KEYRING (package debian-archive-keyring)"
	log "adding $SOURCES_FILE ($uri $suite main)"
	tmp_src=$(mktemp "$SOURCES_FILE.XXXXXX")
	printf 'Types: deb\nURIs: %s\nSuites: %s\nComponents: main\nSigned-By: %s\n' \
		"$uri" "$suite" "$KEYRING" >"$tmp_src"
	chmod 0644 "$tmp_src"
	mv "$tmp_src" "$SOURCES_FILE"
	own_source=1
fi
[[ -f $SOURCES_FILE ]] && own_source=1

# --- 2. apt-get update, only when apt knows no QEMU in $suite ---------------------------------------
# suite_version PKG: the newest version apt has of PKG from $suite (empty if none).
suite_version() {
	apt-cache madison "$1" 2>/dev/null | awk -F'|' -v s=" $suite/" \
		'index($3, s) { gsub(/ /, "", $2); print $2; exit }'
}
if [[ -z $(suite_version "$PKG") ]]; then
	[[ $(id -u) -eq 0 ]] || die "apt has no $PKG from $suite and 'apt-get update' needs root"
	upd=(apt-get "${APT_OPTS[@]}" --error-on=any)
	if [[ -n $own_source ]]; then
		# Only the backports source: the system's other lists stay as they are.
		upd+=(-o "Dir::Etc::sourcelist=$SOURCES_FILE" -o Dir::Etc::sourceparts=-
			-o APT::Get::List-Cleanup=0)
	fi
	log "apt-get update ($suite)"
	if ! "${upd[@]}" update >"$dir/update.log" 2>&1 </dev/null; then
		cat "$dir/update.log" >&2 || true
		[[ -n $(suite_version "$PKG") ]] ||
			unreachable "the package archive for $suite cannot be reached (apt-get update failed, above)"
	fi
fi
ver=$(suite_version "$PKG")
[[ -n $ver ]] || unreachable "apt knows no $PKG in $suite after an update"
[[ $ver =~ ^([0-9]+:)?$WANT_MAJOR\. ]] || die "$suite has $PKG $ver, not QEMU $WANT_MAJOR"
log "$PKG $ver from $suite"

# --- 3. download and unpack ------------------------------------------------------------------------------
debs=$(mktemp -d "$dir/debs.XXXXXX")
trap 'rm -rf "$debs"' EXIT
# apt-get download runs as root here (APT::Sandbox::User=root): its _apt user may not reach $dir.
dl() {
	log "apt-get download $*"
	if ! (cd "$debs" && apt-get "${APT_OPTS[@]}" -o APT::Sandbox::User=root download "$@") \
		>"$dir/download.log" 2>&1 </dev/null; then
		cat "$dir/download.log" >&2 || true
		# Known to apt but not fetched: the archive is unreachable.
		unreachable "apt-get download $* failed (above)"
	fi
}
dl "$PKG=$ver" "qemu-system-common=$ver"
data_ver=$(suite_version qemu-system-data)
[[ -n $data_ver ]] || die "no qemu-system-data in $suite"
dl "qemu-system-data=$data_ver"

# Every dependency of the binary's package that the installed system does not satisfy.
# satisfied NAME OP VER: NAME is installed (in a version meeting OP VER when given).
satisfied() {
	local inst
	inst=$(dpkg-query -W -f='${db:Status-Status} ${Version}' "$1" 2>/dev/null) || return 1
	[[ $inst == installed\ * ]] || return 1
	[[ -z ${2:-} ]] || dpkg --compare-versions "${inst#installed }" "$2" "$3"
}
# pick NAME OP VER: the newest version apt has of NAME that meets OP VER (any suite).
pick() {
	local v
	while read -r v; do
		[[ -z ${2:-} ]] || dpkg --compare-versions "$v" "$2" "$3" || continue
		echo "$v"
		return 0
	done < <(apt-cache madison "$1" 2>/dev/null | awk -F'|' '{ gsub(/ /, "", $2); print $2 }' |
		sort -u | sort -r -V)
	return 1
}
extra=()
deps=$(dpkg-deb -f "$debs/${PKG}_"*.deb Depends)
IFS=',' read -ra items <<<"$deps"
for item in "${items[@]}"; do
	item=${item%%|*} # of alternatives, the first
	# "name (op ver)" or "name"; the arch qualifier dropped.
	if [[ $item =~ ^[[:space:]]*([^[:space:](:]+)(:[a-z0-9]+)?[[:space:]]*(\(([<>=]+)[[:space:]]*([^)[:space:]]+)\))?[[:space:]]*$ ]]; then
		name=${BASH_REMATCH[1]} op=${BASH_REMATCH[4]} want=${BASH_REMATCH[5]}
	else
		die "cannot parse the dependency '$item' of $PKG"
	fi
	case $name in qemu-system-common | qemu-system-data) continue ;; esac
	# dpkg's operators: >> << >= <= =
	satisfied "$name" "$op" "$want" && continue
	v=$(pick "$name" "$op" "$want") ||
		die "$PKG $ver needs $name${op:+ ($op $want)}: neither installed nor available from apt"
	log "needed: $name${op:+ ($op $want)}: not installed in such a version, taking $v"
	extra+=("$name=$v")
done
((${#extra[@]} == 0)) || dl "${extra[@]}"

log "unpacking into $root"
rm -rf "$root.new"
mkdir -p "$root.new"
for deb in "$debs"/*.deb; do
	dpkg -x "$deb" "$root.new"
done
rm -rf "$root"
mv "$root.new" "$root"
(cd "$debs" && printf '%s\n' *.deb) >"$dir/packages.txt"

# --- 4. the wrapper, and ldd ----------------------------------------------------------------------------
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || echo x86_64-linux-gnu)
libpath=
for d in "$root/lib/$multiarch" "$root/usr/lib/$multiarch"; do
	[[ -d $d ]] && libpath+=${libpath:+:}$d
done
fwdirs=()
for d in "$root/usr/share/qemu" "$root/usr/share/seabios" "$root/usr/lib/ipxe/qemu"; do
	[[ -d $d ]] && fwdirs+=(-L "$d")
done
bin=$root/usr/bin/qemu-system-x86_64
[[ -x $bin ]] || die "no $bin in the unpacked packages"
cat >"$wrapper.new" <<EOF
#!/bin/sh
# QEMU $ver from $suite, unpacked by scripts/qemu10.sh (the system's QEMU is not this one).
LD_LIBRARY_PATH='$libpath'\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}
QEMU_MODULE_DIR='$root/usr/lib/$multiarch/qemu'
export LD_LIBRARY_PATH QEMU_MODULE_DIR
exec '$bin' ${fwdirs[*]} "\$@"
EOF
# The -L words above hold paths without spaces or quotes (checked here).
[[ $root != *[[:space:]\'\"]* ]] || die "the cache path '$root' must not contain spaces or quotes"
chmod 0755 "$wrapper.new"
missing=$(LD_LIBRARY_PATH=$libpath ldd "$bin" 2>&1 | grep -E 'not found' || true)
[[ -z $missing ]] || die "libraries of $bin not found even with the unpacked ones: $missing"
mv "$wrapper.new" "$wrapper"
works || die "$wrapper does not run as QEMU $WANT_MAJOR: $("$wrapper" -version 2>&1 | head -n 3)"
log "$("$wrapper" -version | head -n 1)"
echo "$wrapper"
