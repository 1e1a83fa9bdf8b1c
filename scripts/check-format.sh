#!/usr/bin/env bash
# clang-format (the repo's .clang-format) on every C line changed since the tree was
# formatted once (commit FORMATTED below): prints the diff clang-format wants and exits 1,
# or exits 0.  Lines nobody changed since are not checked again, so a newer clang-format
# that lays out a few old lines differently cannot turn CI red.  In a clone without that
# commit (a shallow one), every tracked C file is checked whole.
# Usage: scripts/check-format.sh      (to fix: git clang-format FORMATTED, or clang-format -i FILE)
set -euo pipefail
cd "$(dirname "$0")/.."
FORMATTED=28993a9bbc068199847ddeb55f85a52e098065e1
dirs=(src include tools bench tests fuzz examples)
command -v clang-format >/dev/null && command -v git-clang-format >/dev/null || {
	echo "check-format: clang-format and git-clang-format are missing (scripts/deps.sh installs clang-format)" >&2
	exit 3
}
if git cat-file -e "$FORMATTED^{commit}" 2>/dev/null; then
	out=$(git clang-format --quiet --diff --extensions c,h "$FORMATTED" -- "${dirs[@]}" || true)
	if [[ -n "$out" && "$out" != *"no modified files to format"* && "$out" != *"did not modify any files"* ]]; then
		printf '%s\n' "$out"
		echo "check-format: the lines above are not as .clang-format lays them out (fix: git clang-format $FORMATTED)" >&2
		exit 1
	fi
else
	mapfile -t files < <(git ls-files -- "${dirs[@]}" | grep -E '\.[ch]$')
	if ! clang-format --dry-run --Werror "${files[@]}"; then
		echo "check-format: the files above are not as .clang-format lays them out (fix: clang-format -i FILE)" >&2
		exit 1
	fi
fi
echo "format: ok"
