#!/usr/bin/env bash
# Run every libFuzzer target for a while, one at a time (never two at once: the machine is
# shared), then merge what each found into its corpus and print a summary.
#
#   scripts/fuzz.sh [--minutes N] [--no-merge] [NAME...]
#
#   --minutes N   per target (default 5); a target also stops at 10 million executions
#   --no-merge    leave the corpora as they are
#   NAME          only these targets (fuzz_NAME), e.g. target_session vhost_msg
#
# Targets are the fuzz_* executables of build-fuzz (configured here with -DVIOSCOPE_FUZZ=ON,
# clang).  Seeds and merged corpora live in fuzz/corpus/NAME (or fuzz/AREA/corpus_NAME for
# a target that keeps its seeds beside it); new inputs gather in build-fuzz/fuzz-work/NAME
# and only those that add coverage are merged back.  Findings (crash-*, leak-*, timeout-*,
# oom-*) go to build-fuzz/findings/NAME; the exit status is 1 when there is any.
# CI runs each target for 10 seconds instead (ctest -R '^fuzz\.').
set -euo pipefail
cd "$(dirname "$0")/.."
minutes=5
merge=1
names=()
while (($#)); do
	case "$1" in
	--minutes)
		minutes=${2:?--minutes needs a number}
		shift 2
		;;
	--no-merge)
		merge=0
		shift
		;;
	-h | --help)
		sed -n '2,17p' "$0"
		exit 0
		;;
	*)
		names+=("$1")
		shift
		;;
	esac
done
[[ "$minutes" =~ ^[0-9]+$ ]] && ((minutes > 0)) || { echo "fuzz.sh: --minutes takes a whole number > 0" >&2; exit 2; }

CC=clang cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DVIOSCOPE_FUZZ=ON >/dev/null
targets=$(cmake --build build-fuzz --target help | sed -n 's/^\.\.\. \(fuzz_[a-z0-9_]*\).*/\1/p' | sort)
if ((${#names[@]})); then
	targets=$(printf 'fuzz_%s\n' "${names[@]}")
fi
# shellcheck disable=SC2086
cmake --build build-fuzz -j"$(nproc)" --target $targets

seeds_of() { # NAME -> its corpus directory in the tree
	if [[ -d fuzz/corpus/$1 ]]; then
		echo "fuzz/corpus/$1"
	else
		compgen -G "fuzz/*/corpus_$1" | head -1 || true
	fi
}

summary=()
found=0
for t in $targets; do
	name=${t#fuzz_}
	exe=$(find build-fuzz/fuzz -type f -name "$t" -perm -u+x | head -1)
	[[ -n "$exe" ]] || { echo "fuzz.sh: no $t in build-fuzz" >&2; exit 2; }
	seeds=$(seeds_of "$name")
	[[ -n "$seeds" ]] || { seeds=fuzz/corpus/$name; mkdir -p "$seeds"; }
	work=build-fuzz/fuzz-work/$name
	findings=build-fuzz/findings/$name
	log=build-fuzz/fuzz-work/$name.log
	mkdir -p "$work" "$findings"
	printf '\n==== %s: %s minute(s), seeds %s\n' "$name" "$minutes" "$seeds"
	# Undefined behaviour and leaks are findings too.
	UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 "$exe" \
		-max_total_time=$((minutes * 60)) -runs=10000000 -timeout=25 \
		-artifact_prefix="$findings/" -print_final_stats=1 "$work" "$seeds" >"$log" 2>&1 || true
	done_line=$(grep -E '^#[0-9]+ +DONE' "$log" | tail -1 || true)
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
	cov=$(sed -n 's/.* cov: \([0-9]*\) ft: \([0-9]*\).*/cov \1 ft \2/p' <<<"$done_line")
	[[ -n "$cov" ]] || cov=$(grep -E 'cov: [0-9]+ ft: [0-9]+' "$log" | tail -1 |
		sed -n 's/.* cov: \([0-9]*\) ft: \([0-9]*\).*/cov \1 ft \2/p')
	n=$(find "$findings" -type f | wc -l)
	((n)) && { found=1; grep -E '^(==[0-9]+==ERROR|SUMMARY)' "$log" | head -5 || true; }
	if ((merge)) && ((n == 0)); then
		"$exe" -merge=1 "$seeds" "$work" >>"$log" 2>&1 || true
	fi
	summary+=("$(printf '%-16s %12s executions  %-22s %s finding(s)  corpus %s files' \
		"$name" "${execs:-?}" "${cov:-cov ?}" "$n" "$(find "$seeds" -type f | wc -l)")")
	tail -3 "$log"
done

printf '\n==== summary (%s minute(s) each; logs in build-fuzz/fuzz-work)\n' "$minutes"
printf '%s\n' "${summary[@]}"
exit $found
