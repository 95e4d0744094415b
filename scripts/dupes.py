#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Runs of identical lines shared between the library, the CLI and the
Python binding.

    scripts/dupes.py REPO [MIN]

Lines are compared with their indentation and trailing blanks stripped;
blank lines, #include lines and lines of punctuation alone ("}", "};") neither
count nor break a run. A run of MIN (default 6) or more such lines that
occurs in two of src/, tools/ and python/ is one copy (reported once per
pair of files). Exit 0 when there are none, 1 with each listed.
"""
import os
import re
import sys

GROUPS = ('src', 'tools', 'python')
TRIVIAL = re.compile(r"^([{}();,\s]*|#\s*include\s.*)$")


def lines_of(path):
    out = []
    for n, line in enumerate(open(path, errors='replace'), 1):
        s = line.strip()
        if s and not TRIVIAL.match(s):
            out.append((s, n))
    return out


def files(repo):
    for g in GROUPS:
        for d, _, names in os.walk(os.path.join(repo, g)):
            for f in sorted(names):
                if f.endswith(('.c', '.h')):
                    yield g, os.path.relpath(os.path.join(d, f), repo)


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    repo, k = sys.argv[1], int(sys.argv[2]) if len(sys.argv) == 3 else 6
    text, windows = {}, {}
    for g, f in files(repo):
        text[f] = (g, lines_of(os.path.join(repo, f)))
        ls = text[f][1]
        for i in range(len(ls) - k + 1):
            windows.setdefault(tuple(s for s, _ in ls[i:i + k]), []).append((f, i))
    # per pair of files in different groups: the window starts they share
    shared = {}
    for w, at in windows.items():
        for fa, ia in at:
            for fb, ib in at:
                if text[fa][0] < text[fb][0]:
                    shared.setdefault((fa, fb), set()).add((ia, ib))
    runs = []
    for (fa, fb), starts in sorted(shared.items()):
        for ia, ib in sorted(starts):
            if (ia - 1, ib - 1) in starts:
                continue  # inside a run already counted
            n = k
            while (ia + n - k + 1, ib + n - k + 1) in starts:
                n += 1
            runs.append('%s:%d and %s:%d: %d lines' % (fa, text[fa][1][ia][1], fb,
                                                     text[fb][1][ib][1], n))
    for r in runs:
        print('dupes: ' + r)
    print('dupes: %d runs of %d or more lines shared between %s' % (len(runs), k, ', '.join(GROUPS)))
    return 1 if runs else 0


if __name__ == '__main__':
    sys.exit(main())
