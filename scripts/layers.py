#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Check that the library's dependencies point down the stack.

    scripts/layers.py REPO [LIBBTRFSIMG_INTERNAL.a [FOLDER=OBJECTS.a ...]]

src/ has one folder per layer, numbered in the order data flows up:
base, image, volume, btrfs, files, inum. Two graphs are
checked:
  - includes: a file may include headers of its own layer or a lower one
    (the public headers count as the levels src/README.md gives them); tools/
    and python/btrfsimg/ include only the public headers in include/ and
    their own; no header includes itself or another that includes it back
    (directly or round a circle);
  - calls (with the static library): file A depends on file B when A's
    object file uses a symbol B's defines (nm). Every such edge must point
    to the same or a lower layer, and the files must form no cycle: no
    two files of any folder call each other, directly or round a circle
    (a strongly connected component of more than one file). Calls made
    inside a header's static inline function count for the file that
    includes it; calls through function pointers are not seen. An object
    of the library that names no src/FOLDER/FILE.c fails too;
  - calls among a front end's own files (FOLDER=OBJECTS.a: tools=..., the
    CLI's objects; python/btrfsimg=..., the extension's): no cycle, so its
    shared helpers sit below the parts that use them.
Exit 0 when both hold, 1 with every offending edge or cycle listed.
"""
import os
import re
import subprocess
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z0-9]+)/([A-Za-z0-9_]+\.h)"', re.M)
ANY_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
LEVEL_ROW = re.compile(r'^\|\s*(\d+)\s*\|\s*`([a-z0-9]+)/`\s*\|', re.M)
PUBLIC_ROW = re.compile(r'`(btrfsimg[a-z_]*\.h)` to\s+(?:level (\d+)|`([a-z0-9]+)/`)')
LEVELS = {}
PUBLIC_LAYER = {}


def read_levels(src):
    """The stack as src/README.md tables it: folder -> level."""
    text = open(os.path.join(src, 'README.md')).read()
    LEVELS.update({m.group(2): int(m.group(1)) for m in LEVEL_ROW.finditer(text)})
    for m in PUBLIC_ROW.finditer(re.sub(r'\s+', ' ', text)):
        PUBLIC_LAYER[m.group(1)] = int(m.group(2)) if m.group(2) else LEVELS[m.group(3)]


def layer_of(path):
    return LEVELS.get(path.split('/')[0]) if '/' in path else None


def sources(src):
    for d in sorted(os.listdir(src)):
        if layer_of(d + '/') is None:
            continue
        for f in sorted(os.listdir(os.path.join(src, d))):
            if f.endswith(('.c', '.h')):
                yield d + '/' + f


def include_problems(src):
    bad = []
    for f in sources(src):
        text = open(os.path.join(src, f)).read()
        for m in INCLUDE.finditer(text):
            target = '%s/%s' % m.groups()
            if not os.path.exists(os.path.join(src, target)) or layer_of(target) is None:
                bad.append('%s includes %s, which is in no layer folder' % (f, target))
            elif layer_of(target) > layer_of(f):
                bad.append('%s (layer %d) includes %s (layer %d): an upward include'
                           % (f, layer_of(f), target, layer_of(target)))
            elif layer_of(target) == layer_of(f) and m.group(1) != f.split('/')[0]:
                bad.append('%s includes %s: peer folders do not use each other'
                           % (f, target))
        for m in ANY_INCLUDE.finditer(text):
            layer = PUBLIC_LAYER.get(m.group(1))
            if layer is not None and layer > layer_of(f):
                bad.append('%s (layer %d) includes %s (layer %d): an upward include'
                           % (f, layer_of(f), m.group(1), layer))
    stray = [f for f in os.listdir(src) if f.endswith(('.c', '.h'))]
    bad += ['src/%s is outside every layer folder' % f for f in stray]
    return bad


FRONTS = ('tools', 'python/btrfsimg')


def tools_problems(repo):
    """The CLI and the binding are thin over the public headers: nothing
    from src/, and nothing of each other."""
    bad = []
    public = set(os.listdir(os.path.join(repo, 'include')))
    for folder in FRONTS:
        top = os.path.join(repo, folder)
        for d, _, names in sorted(os.walk(top)):
            for f in sorted(n for n in names if n.endswith(('.c', '.h'))):
                rel = os.path.relpath(os.path.join(d, f), top)
                for m in ANY_INCLUDE.finditer(open(os.path.join(d, f)).read()):
                    name = m.group(1)
                    if name not in public and not os.path.exists(os.path.join(top, name)):
                        bad.append('%s/%s includes "%s": not a public header'
                                   % (folder, rel, name))
    return bad


def object_name(member):
    # meson names objects src_btrfs_tree.c.o
    m = re.match(r'src_([a-z0-9]+)_(.+)\.c\.o$', os.path.basename(member))
    return '%s/%s.c' % m.groups() if m else None


def include_cycles(src):
    """Headers that include each other, directly or round a circle: the
    include guards hide it, and whichever is included first sees the
    other half-declared."""
    edges = {}
    for f in sources(src):
        for m in INCLUDE.finditer(open(os.path.join(src, f)).read()):
            target = '%s/%s' % m.groups()
            edges.setdefault(f, {}).setdefault(target, [])
    bad = ['%s includes itself' % f for f in sorted(edges) if f in edges[f]]
    for comp in cycles(edges):
        links = ['%s -> %s' % (a, b) for a in comp for b in edges.get(a, {}) if b in comp]
        bad.append('include circle among %s: %s' % (', '.join(comp), '; '.join(links)))
    return bad


def call_graph(archive, name_of=object_name, unknown=None):
    out = subprocess.run(['nm', '-A', archive], capture_output=True, text=True, check=True).stdout
    defs, uses = {}, []
    for line in out.splitlines():
        # archive:member: [value] type name
        parts = line.split(':')
        if len(parts) < 3:
            continue
        f = name_of(parts[1])
        if f is None and unknown is not None and parts[1].endswith('.o'):
            unknown.add(os.path.basename(parts[1]))
        fields = parts[-1].split()
        if f is None or len(fields) < 2:
            continue
        kind, sym = fields[-2], fields[-1]
        if kind == 'U':
            uses.append((f, sym))
        elif kind in 'TDRBC':
            defs[sym] = f
    edges = {}
    for f, sym in uses:
        g = defs.get(sym)
        if g and g != f:
            edges.setdefault(f, {}).setdefault(g, []).append(sym)
    return edges


def cycles(edges):
    """Strongly connected components with more than one file (Tarjan)."""
    index, low, stack, on, out, n = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    nodes = set(edges) | {g for e in edges.values() for g in e}
    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


def call_problems(archive):
    unknown = set()
    edges = call_graph(archive, unknown=unknown)
    # an object not named for a file of a layer folder would drop out of
    # the graph unseen, its calls and circles with it
    bad = ['%s in the library is no src/FOLDER/FILE.c: its calls are not checked' % o
           for o in sorted(unknown)]
    for f, targets in sorted(edges.items()):
        for g, syms in sorted(targets.items()):
            if layer_of(g) > layer_of(f) or (layer_of(g) == layer_of(f)
                                             and g.split('/')[0] != f.split('/')[0]):
                bad.append('%s (layer %d) calls %s (layer %d): %s'
                           % (f, layer_of(f), g, layer_of(g), ', '.join(sorted(set(syms)))))
    for comp in cycles(edges):
        links = ['%s -> %s (%s)' % (f, g, ', '.join(sorted(set(edges[f][g]))[:3]))
                 for f in comp for g in edges.get(f, {}) if g in comp]
        bad.append('cycle among %s: %s' % (', '.join(comp), '; '.join(links)))
    nfiles = len(set(edges) | {g for e in edges.values() for g in e})
    return bad, nfiles, sum(len(t) for t in edges.values())


def front_problems(repo, folder, archive):
    """A front end's call graph over its objects: no cycle among its files."""
    root = os.path.join(repo, folder)
    # meson names the object of tools/cmds/walk.c "cmds_walk.c.o"
    by_object = {}
    for d, _, names in os.walk(root):
        for f in names:
            if f.endswith('.c'):
                rel = os.path.relpath(os.path.join(d, f), root)
                by_object[rel.replace('/', '_') + '.o'] = folder + '/' + rel
    edges = call_graph(archive, lambda member: by_object.get(os.path.basename(member)))
    bad = []
    for comp in cycles(edges):
        links = ['%s -> %s (%s)' % (f, g, ', '.join(sorted(set(edges[f][g]))[:3]))
                 for f in comp for g in edges.get(f, {}) if g in comp]
        bad.append('cycle among %s: %s' % (', '.join(comp), '; '.join(links)))
    nfiles = len(set(edges) | {g for e in edges.values() for g in e})
    return bad, '%d call edges between %d files of %s/' % (
        sum(len(t) for t in edges.values()), nfiles, folder)


def main():
    if len(sys.argv) < 2 or any('=' not in a for a in sys.argv[3:]):
        sys.exit(__doc__)
    src = os.path.join(sys.argv[1], 'src')
    read_levels(src)
    missing = sorted(d for d in os.listdir(src)
                     if os.path.isdir(os.path.join(src, d)) and d not in LEVELS)
    bad = ['src/%s/ is not in the stack table of src/README.md' % d for d in missing]
    bad += include_problems(src) + include_cycles(src) + tools_problems(sys.argv[1])
    summary = 'includes of %d library files, of tools/ and of python/btrfsimg/' % len(
        list(sources(src)))
    if len(sys.argv) >= 3:
        more, nfiles, nedges = call_problems(sys.argv[2])
        bad += more
        summary += ', %d call edges between %d files' % (nedges, nfiles)
    for arg in sys.argv[3:]:
        folder, archive = arg.split('=', 1)
        more, what = front_problems(sys.argv[1], folder, archive)
        bad += more
        summary += ', ' + what
    for b in bad:
        print('layers: ' + b)
    print('layers: %s checked, %d problems' % (summary, len(bad)))
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
