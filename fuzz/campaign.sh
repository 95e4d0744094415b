#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Long libFuzzer runs with a persistent corpus and a ledger of what ran.
#
#   setsid fuzz/campaign.sh [-j JOBS] [-t SECONDS] [TARGET...]   run (default: all)
#   fuzz/campaign.sh --merge [TARGET...]                  fold new coverage into fuzz/corpus
#   fuzz/campaign.sh --totals                             hours, executions, findings per target
#   fuzz/campaign.sh --readme                             put those totals into fuzz/README.md
#
# Binaries come from $FUZZ_BUILD (default build-fuzz, configured with
# -Dfuzzing=true) and are copied first, so rebuilding during a run is safe.
# Corpora live in $FUZZ_STATE (default /var/tmp/btrfsimg-fuzz/<target>),
# seeded from fuzz/corpus/<target>; crash artifacts land beside them. Every
# finished run appends one line to fuzz/ledger.tsv: date, commit, target,
# seconds, executions, coverage edges, features, corpus units, findings.
# Runs are niced (and their session's autogroup too) so that a developer's
# builds and benchmarks still get the CPU.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${FUZZ_BUILD:-build-fuzz}
state=${FUZZ_STATE:-/var/tmp/btrfsimg-fuzz}
ledger=fuzz/ledger.tsv
jobs=1 seconds=1800 mode=run

all_targets() {
  for f in "$build"/fuzz/fuzz_*; do [ -x "$f" ] && echo "${f##*/fuzz_}"; done
}

run_one() { # target seconds
  local t=$1 secs=$2 dir="$state/$1" log rc=0 dict=()
  mkdir -p "$dir/corpus"
  [ -d "fuzz/corpus/$t" ] && cp -n fuzz/corpus/"$t"/* "$dir/corpus/" 2>/dev/null || true
  [ -f "fuzz/$t.dict" ] && dict=(-dict="fuzz/$t.dict")
  log="$dir/run-$(date +%Y%m%d-%H%M%S).log"
  local start=$SECONDS commit
  commit=$(cat "$state/bin/fuzz_$t.commit" 2>/dev/null || echo unknown)
  nice -n 19 "$state/bin/fuzz_$t" "${dict[@]}" -max_total_time="$secs" -timeout=60 \
    -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$dir/" \
    "$dir/corpus" >"$log" 2>&1 || rc=$?
  record "$t" $((SECONDS - start)) "$log" "$rc" "$commit"
}

record() { # target seconds log rc commit
  local t=$1 log=$3 rc=$4 commit=$5 execs secs cov ft units findings
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n1)
  secs=$2
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -n1 | cut -d' ' -f2)
  ft=$(grep -o 'ft: [0-9]*' "$log" | tail -n1 | cut -d' ' -f2)
  units=$(find "$state/$t/corpus" -type f | wc -l)
  findings=$([ "$rc" -eq 0 ] && echo 0 || echo "1 (exit $rc, see $log)")
  [ -f "$ledger" ] || printf 'date\tcommit\ttarget\tseconds\texecutions\tcov\tft\tcorpus\tfindings\n' >"$ledger"
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$(date -u +%F)" \
    "$commit" "$t" "$secs" "${execs:-0}" "${cov:-0}" "${ft:-0}" \
    "$units" "$findings" >>"$ledger"
}

merge_one() { # target: add to fuzz/corpus only the inputs that bring new coverage
  local t=$1
  [ -d "$state/$t/corpus" ] || return 0
  mkdir -p "fuzz/corpus/$t"
  "$state/bin/fuzz_$t" -merge=1 -rss_limit_mb=2048 -timeout=60 \
    "fuzz/corpus/$t" "$state/$t/corpus" >"$state/$t/merge.log" 2>&1
  grep -E '^MERGE-OUTER: [0-9]+ new files' "$state/$t/merge.log" | sed "s/^/$t: /"
}

totals() { # a Markdown table: per target, from every run in the ledger
  printf '| target | runs | hours | executions | coverage edges | corpus | findings |\n'
  printf '| --- | --- | --- | --- | --- | --- | --- |\n'
  { ls fuzz/fuzz_*.c | sed 's|fuzz/fuzz_||; s|\.c$||'; echo --; cat "$ledger"; } |
  awk -F'\t' '$0 == "--" { ledger = 1; next }
    !ledger { r[$0] = 0; next }
    ledger && $1 != "date" { t = $3; r[t]++; s[t] += $4; e[t] += $5; c[t] = $6; u[t] = $8
      split($9, w, " "); if (w[1] != "0") f[t]++ }
    END { for (t in r) printf "| %s | %d | %.2f | %d | %d | %d | %d |\n", t, r[t], s[t] / 3600,
                             e[t], c[t], u[t], f[t] }' | sort
}

while [ $# -gt 0 ]; do
  case $1 in
    -j) jobs=$2; shift 2 ;;
    -t) seconds=$2; shift 2 ;;
    --merge) mode=merge; shift ;;
    --totals) totals; exit 0 ;;
    --readme) # between the <!-- fuzz-totals --> markers
      totals >"$state/totals.md"
      python3 - "$state/totals.md" <<'PY'
import re, sys
table = open(sys.argv[1]).read().strip()
s = open("fuzz/README.md").read()
s, n = re.subn(r"(<!-- fuzz-totals -->\n).*?(\n<!-- /fuzz-totals -->)",
               lambda m: m[1] + table + m[2], s, flags=re.S)
if n != 1:
    sys.exit("fuzz/README.md: no <!-- fuzz-totals --> section")
open("fuzz/README.md", "w").write(s)
PY
      exit 0 ;;
    --run-one) run_one "$2" "$3"; exit 0 ;;
    *) break ;;
  esac
done
targets=("$@")
[ ${#targets[@]} -gt 0 ] || mapfile -t targets < <(all_targets)
mkdir -p "$state/bin"
if [ "$mode" = merge ]; then
  for t in "${targets[@]}"; do merge_one "$t"; done
  exit 0
fi
# nice alone does not yield the CPU to other sessions when the kernel groups
# tasks by session (sched_autogroup): runs lower their session's group too,
# so start them in a session of their own (setsid)
echo 19 >/proc/self/autogroup 2>/dev/null || true
for t in "${targets[@]}"; do  # the binary, and the commit it was built from
  cp "$build/fuzz/fuzz_$t" "$state/bin/"
  git describe --always --dirty >"$state/bin/fuzz_$t.commit"
done
printf '%s\n' "${targets[@]}" | xargs -P "$jobs" -I{} "$0" --run-one {} "$seconds"
