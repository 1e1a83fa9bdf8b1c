#!/bin/sh
# check_hp_codegen.sh OBJDUMP FUNCTION COLD_WITH.o COLD_WITHOUT.o ALL_WITH.o
#
# A function whose only trace sites are _HP compiles, in the cold flavour, to the
# same machine code as without them; in the all flavour it differs (so the
# comparison can see a site).  Addresses are stripped before comparing.
#
# check_hp_codegen.sh OBJDUMP --saves OOL_FUNCTION INLINE_FUNCTION WITHOUT.o ALL_WITH.o
#
# The same small function with a site recorded out of line (_OOL) and inline: in the
# all flavour, the first saves as many callee-saved registers in its prologue as
# without the site, the second more (so the count can see a record's registers; where
# it does not, as with clang, the check is skipped: exit 77).
set -u
objdump=$1
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT

# The function's instructions, without addresses or symbol offsets.
disasm() { # OBJECT [FUNCTION]
	"$objdump" -d --no-show-raw-insn "$1" |
		awk -v f="<${2:-$func}>:" 'index($0, f) { on = 1; next } on && /^$/ { exit } on' |
		sed -e 's/^ *[0-9a-f]*:[[:space:]]*//' -e 's/[0-9a-f]* </</g' \
			-e 's/[[:space:]]*#.*$//'
}

# Registers the function's prologue saves: its leading pushes of a register.
saves() { # OBJECT FUNCTION
	n=$(disasm "$1" "$2" | awk '/^push +%/ { n++; next } { exit } END { print n + 0 }')
	if [ -z "$(disasm "$1" "$2")" ]; then
		echo "FAIL: no disassembly of $2 in $1" >&2
		exit 1
	fi
	echo "$n"
}

if [ "$2" = --saves ]; then
	ool=$3 inl=$4 without=$5 all=$6
	ool_without=$(saves "$without" "$ool") || exit 1
	ool_all=$(saves "$all" "$ool") || exit 1
	inl_without=$(saves "$without" "$inl") || exit 1
	inl_all=$(saves "$all" "$inl") || exit 1
	if [ "$ool_all" -ne "$ool_without" ]; then
		echo "FAIL: all: $ool saves $ool_all registers, $ool_without without its _OOL site"
		exit 1
	fi
	if [ "$inl_all" -le "$inl_without" ]; then
		# clang, and gcc with sanitizers, keep this record in scratch registers
		echo "skipped: all: $inl saves $inl_all registers with its inline record, as" \
			"many as without it: this compiler shows no difference to check"
		exit 77
	fi
	echo "ok: all: $ool saves $ool_all registers, as without its _OOL site;" \
		"$inl with the record inline saves $inl_all (without: $inl_without)"
	exit 0
fi

func=$2 with=$3 without=$4 all=$5

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
