#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""pair.py: time two commands in pairs (A B A B ...), as a shared machine's
load then falls on both alike, and print each one's median wall time and
the median of the per-pair ratios B / A; with --cpu, their CPU time (user +
sys, of the command and its children) too, which moves least with what
else a shared machine runs.

    pair.py [--cpu] N 'COMMAND A' 'COMMAND B'   (each run by sh -c, output discarded)
"""
import os
import statistics
import subprocess
import sys
import time


def once(cmd):
    """Wall and CPU (user + sys) seconds of one run."""
    t = time.monotonic()
    p = subprocess.Popen(["sh", "-c", cmd], stdout=subprocess.DEVNULL)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.monotonic() - t
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        raise subprocess.CalledProcessError(p.returncode, cmd)
    return wall, ru.ru_utime + ru.ru_stime


def line(label, ta, tb):
    ratios = [y / x for x, y in zip(ta, tb) if x > 0]
    print("%sA %.3f s  B %.3f s  B/A %.2f (median of %d pairs; min %.2f, max %.2f);"
          " fastest A %.3f s, B %.3f s"
          % (label, statistics.median(ta), statistics.median(tb), statistics.median(ratios),
             len(ratios), min(ratios), max(ratios), min(ta), min(tb)))


def main():
    args = sys.argv[1:]
    cpu = bool(args) and args[0] == "--cpu"
    if cpu:
        args = args[1:]
    if len(args) != 3:
        sys.exit(__doc__)
    n, a, b = int(args[0]), args[1], args[2]
    runs_a, runs_b = [], []
    for _ in range(n):
        runs_a.append(once(a))
        runs_b.append(once(b))
    line("wall " if cpu else "", [r[0] for r in runs_a], [r[0] for r in runs_b])
    if cpu:
        line("CPU  ", [r[1] for r in runs_a], [r[1] for r in runs_b])
    print("  A: %s\n  B: %s" % (a, b))


if __name__ == "__main__":
    main()
