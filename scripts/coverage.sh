#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Source-based coverage (clang -fprofile-instr-generate -fcoverage-mapping)
# of the library, from what the fuzzers found:
#
#   scripts/coverage.sh [--tests]
#
# Builds $COV_BUILD (default build-cov) without sanitizers, replays every
# fuzz corpus through its plain regress_<t> driver: fuzz/corpus/<t>,
# fuzz/crashers/<t> and, if present, the campaign corpus
# $FUZZ_STATE/<t>/corpus (default /var/tmp/btrfsimg-fuzz). One profile per
# target. Prints llvm-cov's per-file report for src/*.c over all targets,
# then a table of each target's own totals. With --tests the meson test
# suite also runs under its own profile, reported separately and in a
# combined total. Profiles: $COV_BUILD/cov/<t>.profdata, fuzz.profdata,
# tests.profdata, all.profdata. Needs clang and llvm (scripts/deps.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${COV_BUILD:-build-cov}
state=${FUZZ_STATE:-/var/tmp/btrfsimg-fuzz}
with_tests=false
[ "${1:-}" = --tests ] && with_tests=true

tool() { # name: the unversioned llvm tool, else the newest versioned one
  command -v "$1" 2>/dev/null && return
  local t
  t=$(compgen -c "$1-" | grep -E "^$1-[0-9]+$" | sort -t- -k3 -n | tail -n1)
  [ -n "$t" ] && command -v "$t" && return
  echo "coverage.sh: $1 not found (apt-get install llvm)" >&2
  return 1
}
profdata=$(tool llvm-profdata)
llvmcov=$(tool llvm-cov)

# Instrumented programs run while building (meson's compiler checks) and by
# tests write profiles where they stand unless told otherwise.
stray=$(mktemp -d)
trap 'rm -rf "$stray"' EXIT
export LLVM_PROFILE_FILE="$stray/%p.profraw"

flags="-fprofile-instr-generate -fcoverage-mapping"
opts=(-Dtests=$with_tests -Dfuzzing=false -Db_sanitize=none -Dbuildtype=debug
      "-Dc_args=$flags" "-Dc_link_args=-fprofile-instr-generate")
if [ -f "$build/build.ninja" ]; then
  meson configure "$build" "${opts[@]}" >/dev/null
else
  CC=clang meson setup "$build" "${opts[@]}" >/dev/null
fi

targets=()
for f in fuzz/fuzz_*.c; do t=${f#fuzz/fuzz_}; targets+=("${t%.c}"); done
ninja_targets=("${targets[@]/#/fuzz/regress_}")
if $with_tests; then ninja -C "$build" >/dev/null; else ninja -C "$build" "${ninja_targets[@]}" >/dev/null; fi

cov=$build/cov
rm -rf "$cov"
mkdir -p "$cov"
cov=$(cd "$cov" && pwd)
# report src/*.c only (harnesses, tests and headers left out)
only_src=(-ignore-filename-regex='(^|/)(fuzz|tests|tools|include)/|\.h$')

# Every harness defines LLVMFuzzerTestOneInput: llvm-cov warns that its
# records differ between drivers. Only harness code is concerned.
quiet() { "$@" 2> >(grep -v 'functions have mismatched data' >&2); }

# Coverage of one profile over some binaries: "lines regions functions" percent.
totals() { # profdata binary...
  local p=$1 first=$2
  shift 2
  quiet "$llvmcov" report "$first" "${@/#/-object=}" -instr-profile="$p" "${only_src[@]}" |
    awk '$1 == "TOTAL" { print $10, $4, $7 }'
}

printf '%-10s %8s %8s %8s %8s\n' target inputs lines regions funcs >"$cov/table.txt"
for t in "${targets[@]}"; do
  dirs=()
  for d in "fuzz/corpus/$t" "fuzz/crashers/$t" "$state/$t/corpus"; do
    [ -d "$d" ] && dirs+=("$d")
  done
  [ ${#dirs[@]} -gt 0 ] || continue
  n=$(find "${dirs[@]}" -type f | wc -l)
  mkdir -p "$cov/$t"
  LLVM_PROFILE_FILE="$cov/$t/%p.profraw" "$build/fuzz/regress_$t" "${dirs[@]}" >/dev/null ||
    echo "coverage.sh: regress_$t failed on some input (coverage still counted)" >&2
  "$profdata" merge -sparse "$cov/$t"/*.profraw -o "$cov/$t.profdata"
  echo "$t $n" >>"$cov/inputs.txt"
done

# Every driver as an object, so that each target's percentages share one
# denominator: all of src/*.c, not only the files that target links.
bins=()
for t in "${targets[@]}"; do [ -f "$cov/$t.profdata" ] && bins+=("$build/fuzz/regress_$t"); done
while read -r t n; do
  read -r l r f < <(totals "$cov/$t.profdata" "${bins[@]}")
  printf '%-10s %8s %8s %8s %8s\n' "$t" "$n" "$l" "$r" "$f" >>"$cov/table.txt"
done <"$cov/inputs.txt"
objs=()
for b in "${bins[@]:1}"; do objs+=("-object=$b"); done
"$profdata" merge -sparse "$cov"/*.profdata -o "$cov/fuzz.profdata"

echo "== library coverage from the fuzz corpora (all targets)"
quiet "$llvmcov" report "${bins[0]}" "${objs[@]}" -instr-profile="$cov/fuzz.profdata" "${only_src[@]}"
echo
echo "== per target (its own inputs only; % of all of src/*.c)"
cat "$cov/table.txt"

if $with_tests; then
  mkdir -p "$cov/tests"
  LLVM_PROFILE_FILE="$cov/tests/%p.profraw" meson test -C "$build" --no-rebuild \
    --num-processes 2 >/dev/null || echo "coverage.sh: some tests failed" >&2
  "$profdata" merge -sparse "$cov/tests"/*.profraw -o "$cov/tests.profdata"
  "$profdata" merge -sparse "$cov/fuzz.profdata" "$cov/tests.profdata" -o "$cov/all.profdata"
  mapfile -t tbins < <(find "$build/tests" "$build/tests/unit" "$build/tools" "$build/fuzz" \
                         -maxdepth 1 -type f -perm -u+x 2>/dev/null | sort)
  for so in "$build"/libbtrfsimg.so*; do [ -f "$so" ] && ! [ -L "$so" ] && tbins+=("$so"); done
  echo
  echo "== test suite alone / fuzz corpora and test suite together (lines regions funcs)"
  echo "tests: $(totals "$cov/tests.profdata" "${tbins[@]}")"
  echo "all:   $(totals "$cov/all.profdata" "${tbins[@]}")"
fi
