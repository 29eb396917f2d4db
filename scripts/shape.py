#!/usr/bin/env python3
"""The shape of the source: largest files, largest functions, median function length.

Reads operators/*/src and sim/src. A function's length is counted from its `fn` line to
the line of its closing brace; braces inside strings, chars and comments are skipped.
Test modules (`#[cfg(test)]` blocks and files under tests/) are left out of the function
figures, since a table test is long by nature.

    python3 scripts/shape.py            # summary
    python3 scripts/shape.py --over 80  # every function longer than 80 lines
"""
import argparse, re, statistics, sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FN = re.compile(r'^\s*(pub(\([^)]*\))?\s+)?(const\s+)?(async\s+)?(unsafe\s+)?fn\s+(\w+)')


def strip(line, state):
    """Drop string, char and comment text from a line; state carries block comments and strings."""
    out, i = [], 0
    while i < len(line):
        c = line[i]
        if state['block']:
            if line.startswith('*/', i):
                state['block'] = False
                i += 2
            else:
                i += 1
            continue
        if state['str']:
            if c == '\\':
                i += 2
                continue
            if c == '"':
                state['str'] = False
            i += 1
            continue
        if line.startswith('//', i):
            break
        if line.startswith('/*', i):
            state['block'] = True
            i += 2
            continue
        if c == '"':
            state['str'] = True
            i += 1
            continue
        if c == "'" and re.match(r"'(\\.|[^\\'])'", line[i:i + 4]):
            i += len(re.match(r"'(\\.|[^\\'])'", line[i:i + 4]).group(0))
            continue
        out.append(c)
        i += 1
    return ''.join(out)


def functions(path):
    lines = path.read_text().splitlines()
    state = {'block': False, 'str': False}
    clean = [strip(l, state) for l in lines]
    test_ranges, depth = [], 0
    found = []
    for n, line in enumerate(lines):
        m = FN.match(line)
        if not m:
            continue
        d, opened, end = 0, False, None
        for k in range(n, len(clean)):
            for ch in clean[k]:
                if ch == '{':
                    d += 1
                    opened = True
                elif ch == '}':
                    d -= 1
                elif ch == ';' and not opened and d == 0:
                    end = k
                    break
            if end is not None:
                break
            if opened and d == 0:
                end = k
                break
        if end is None or not opened:
            continue
        found.append((n, end, m.group(6)))
    # test blocks
    for n, line in enumerate(lines):
        if line.strip().startswith('#[cfg(test)]'):
            d, opened = 0, False
            for k in range(n + 1, len(clean)):
                for ch in clean[k]:
                    if ch == '{':
                        d += 1
                        opened = True
                    elif ch == '}':
                        d -= 1
                if opened and d == 0:
                    test_ranges.append((n, k))
                    break
    return [(s, e, name) for (s, e, name) in found
            if not any(a <= s <= b for a, b in test_ranges)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--over', type=int)
    ap.add_argument('--top', type=int, default=10)
    args = ap.parse_args()
    files = sorted(list(ROOT.glob('operators/*/src/**/*.rs')) + list(ROOT.glob('sim/src/**/*.rs')))
    sizes = sorted(((len(f.read_text().splitlines()), f.relative_to(ROOT)) for f in files), reverse=True)
    fns = []
    for f in files:
        for s, e, name in functions(f):
            fns.append((e - s + 1, f'{f.relative_to(ROOT)}:{s + 1}', name))
    fns.sort(reverse=True)
    if args.over is not None:
        for length, at, name in fns:
            if length > args.over:
                print(f'{length:5}  {name}  {at}')
        return
    print(f'files: {len(files)}, over 700 lines: {sum(1 for s, _ in sizes if s > 700)}')
    for s, f in sizes[:args.top]:
        print(f'  {s:5}  {f}')
    lengths = [l for l, _, _ in fns]
    print(f'functions: {len(fns)}, median {statistics.median(lengths)} lines, over 80: {sum(1 for l in lengths if l > 80)}')
    for length, at, name in fns[:args.top]:
        print(f'  {length:5}  {name}  {at}')


if __name__ == '__main__':
    sys.exit(main())
