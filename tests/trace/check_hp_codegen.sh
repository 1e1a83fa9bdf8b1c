#!/bin/sh
# check_hp_codegen.sh OBJDUMP FUNCTION COLD_WITH.o COLD_WITHOUT.o ALL_WITH.o
#
# A function whose only trace sites are _HP compiles, in the cold flavour, to the
# same machine code as without them; in the all flavour it differs (so the
# comparison can see a site).  Addresses are stripped before comparing.
set -u
objdump=$1 func=$2 with=$3 without=$4 all=$5
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT

# The function's instructions, without addresses or symbol offsets.
disasm() {
	"$objdump" -d --no-show-raw-insn "$1" |
		awk -v f="<$func>:" 'index($0, f) { on = 1; next } on && /^$/ { exit } on' |
		sed -e 's/^ *[0-9a-f]*:[[:space:]]*//' -e 's/[0-9a-f]* </</g' \
			-e 's/[[:space:]]*#.*$//'
}

disasm "$with" > "$tmp/with" || exit 1
disasm "$without" > "$tmp/without" || exit 1
disasm "$all" > "$tmp/all" || exit 1
for f in with without all; do
	if [ ! -s "$tmp/$f" ]; then
		echo "FAIL: no disassembly of $func in the '$f' object"
		exit 1
	fi
done
if ! diff -u "$tmp/without" "$tmp/with"; then
	echo "FAIL: cold: $func differs with its _HP sites (diff above: without -> with)"
	exit 1
fi
if cmp -s "$tmp/without" "$tmp/all"; then
	echo "FAIL: all: $func is the same with its _HP sites compiled in: the check is blind"
	exit 1
fi
echo "ok: cold $func: $(wc -l < "$tmp/with") instructions, identical with and without _HP sites;" \
	"all: $(wc -l < "$tmp/all") instructions"
