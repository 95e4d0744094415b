#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""pair.py: time two commands in pairs (A B A B ...), as a shared machine's
load then falls on both alike, and print each one's median wall time and
the median of the per-pair ratios B / A.

    pair.py N 'COMMAND A' 'COMMAND B'     (each run by sh -c, output discarded)
"""
import statistics
import subprocess
import sys
import time


def once(cmd):
    t = time.monotonic()
    subprocess.run(["sh", "-c", cmd], check=True, stdout=subprocess.DEVNULL)
    return time.monotonic() - t


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    n, a, b = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    ta, tb = [], []
    for _ in range(n):
        ta.append(once(a))
        tb.append(once(b))
    ratios = [y / x for x, y in zip(ta, tb) if x > 0]
    print("A %.3f s  B %.3f s  B/A %.2f (median of %d pairs; min %.2f, max %.2f)"
          % (statistics.median(ta), statistics.median(tb), statistics.median(ratios), n,
             min(ratios), max(ratios)))
    print("  A: %s\n  B: %s" % (a, b))


if __name__ == "__main__":
    main()
