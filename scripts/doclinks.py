#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Every relative link of the user documentation resolves.

    scripts/doclinks.py SOURCE_ROOT

Reads README.md, docs/*.md and tools/README.md under SOURCE_ROOT. A link
[text](target) whose target is not a URL must name a file or folder that
exists (relative to the file the link is in), and a #fragment must be a
heading of the Markdown file it points to (GitHub's anchors: lower case,
punctuation dropped, spaces as hyphens, a repeated heading numbered -1,
-2, ...). Links inside code (fenced blocks, `spans`) are text, not links.

Before the documents, the checker runs on a sample with one dead file
link and one dead anchor and must report exactly those two, so a checker
that finds nothing cannot pass. Exit 0 when every link resolves, 1 with
each dead link as FILE:LINE: TARGET (why).
"""
import glob
import os
import re
import sys
import tempfile

LINK = re.compile(r'(?<!!)\[(?:[^\]\\]|\\.)*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)')
SCHEME = re.compile(r'^[a-zA-Z][a-zA-Z0-9+.-]*:')


def strip_code(lines):
    """The lines with fenced blocks blanked and inline code spans removed,
    numbered from 1."""
    fence = None
    for n, line in enumerate(lines, 1):
        m = re.match(r'^\s*(```+|~~~+)', line)
        if fence:
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence):
                fence = None
            yield n, ''
        elif m:
            fence = m.group(1)
            yield n, ''
        elif re.match(r'^(    |\t)', line):
            yield n, ''  # an indented code block (the docs' command examples)
        else:
            yield n, re.sub(r'(`+)(?:(?!\1).)+\1', '', line)


def slug(heading):
    s = heading.strip().lower()
    s = re.sub(r'[^\w\- ]', '', s)
    return s.replace(' ', '-')


def anchors(path, cache={}):
    if path not in cache:
        seen, found = {}, set()
        with open(path, encoding='utf-8') as f:
            lines = f.read().splitlines()
        fence = None
        for line in lines:
            m = re.match(r'^\s*(```+|~~~+)', line)
            if fence:
                if m and m.group(1)[0] == fence[0]:
                    fence = None
                continue
            if m:
                fence = m.group(1)
                continue
            h = re.match(r'^#{1,6}\s+(.*?)\s*#*\s*$', line)
            if h:
                base = slug(h.group(1))
                k = seen.get(base, 0)
                seen[base] = k + 1
                found.add(base if k == 0 else '%s-%d' % (base, k))
        cache[path] = found
    return cache[path]


def check_file(path):
    """(line, target, why) for every dead link of @path."""
    bad = []
    with open(path, encoding='utf-8') as f:
        lines = f.read().splitlines()
    for n, line in strip_code(lines):
        for m in LINK.finditer(line):
            target = m.group(1)
            if SCHEME.match(target):
                continue
            name, _, frag = target.partition('#')
            dest = os.path.normpath(os.path.join(os.path.dirname(path), name)) if name else path
            if not os.path.exists(dest):
                bad.append((n, target, 'no such file'))
            elif frag and dest.endswith('.md') and os.path.isfile(dest) \
                    and frag not in anchors(dest):
                bad.append((n, target, 'no heading with that anchor in ' + os.path.basename(dest)))
    return bad


def self_test():
    """The checker on a sample: one good link, one good anchor, one dead
    file and one dead anchor; True when exactly the dead ones are found."""
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, 'a.md'), 'w') as f:
            f.write('# A\n\n## What it does (here)\n\n[b](b.md) [self](#what-it-does-here)\n'
                    '[gone](missing.md) [bad anchor](b.md#nowhere)\n`[code](not-a-link.md)`\n'
                    '```\n[fenced](not-a-link-either.md)\n```\n')
        with open(os.path.join(d, 'b.md'), 'w') as f:
            f.write('# B\n')
        got = [(n, t) for n, t, _ in check_file(os.path.join(d, 'a.md'))]
        return got == [(6, 'missing.md'), (6, 'b.md#nowhere')], got


def main():
    if len(sys.argv) != 2:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    ok, got = self_test()
    if not ok:
        print('doclinks: the self-test found %r, expected the two dead links' % (got,))
        return 1
    root = sys.argv[1]
    files = [os.path.join(root, 'README.md'), os.path.join(root, 'tools', 'README.md')]
    files += sorted(glob.glob(os.path.join(root, 'docs', '*.md')))
    dead, count = 0, 0
    for path in files:
        if not os.path.exists(path):
            print('%s: missing' % os.path.relpath(path, root))
            dead += 1
            continue
        for n, target, why in check_file(path):
            print('%s:%d: %s (%s)' % (os.path.relpath(path, root), n, target, why))
            dead += 1
        count += 1
    print('%d files, %d dead links' % (count, dead))
    return 1 if dead else 0


if __name__ == '__main__':
    sys.exit(main())
