#!/bin/sh
# check_off_strings.sh OBJDUMP OFF_BIN COLD_BIN ALL_BIN
#
# The off flavour carries no trace format strings and no site table; cold carries
# its cold sites' formats but not the _HP ones; all carries both.
set -u
objdump=$1 off=$2 cold=$3 all=$4
status=0

has() { grep -q -a -F -e "$2" "$1"; }
expect() { # expect yes|no BINARY STRING
	if has "$2" "$3"; then found=yes; else found=no; fi
	if [ "$found" != "$1" ]; then
		echo "FAIL: $(basename "$2"): \"$3\" present=$found, expected $1"
		status=1
	fi
}

# the markers, and the formats of every kind of site in the workload
expect no "$off" "vioscope-offcheck-%d-unique"
expect no "$off" "vioscope-hpcheck-%d-unique"
for fmt in "seq t=%u i=%u v=%#llx d=%d s=%s" "tick %u" "print %d %s" "helper v=%d" \
	"error path rc=%d why=%s" "ints %d %u %lld" "--> enter" "<-- exit rc=%lld"; do
	expect no "$off" "$fmt"
	expect yes "$cold" "$fmt"
done
expect yes "$cold" "vioscope-offcheck-%d-unique"
expect no "$cold" "vioscope-hpcheck-%d-unique"
expect yes "$all" "vioscope-offcheck-%d-unique"
expect yes "$all" "vioscope-hpcheck-%d-unique"

# no site table in off, one in cold
if "$objdump" -h "$off" | grep -q vs_trace_sites; then
	echo "FAIL: the off binary has a vs_trace_sites section"
	status=1
fi
if ! "$objdump" -h "$cold" | grep -q vs_trace_sites; then
	echo "FAIL: the cold binary has no vs_trace_sites section (is the check blind?)"
	status=1
fi
[ $status = 0 ] && echo "ok: off has no format strings and no site table"
exit $status
