"""Puts two runs of the same benchmark side by side: the markdown tables a bench_*.py script
wrote for the library before and after a change, measured in one session on one GPU
(scripts/gpu-compare.sh). Tables pair by their header line, rows by position (the grids are
fixed); every numeric cell that differs prints as "before → after (±x%)", so a reader sees each
default-path cell's change. Which direction is better depends on the column (ms: lower, TFLOP/s
and GB/s: higher); the summary line counts cells that moved more than the threshold either way.

    python3 bench/compare_tables.py before.md after.md --title "bench_flash" [--threshold 5]
"""

import argparse
import re
import sys

NUMBER = re.compile(r"^-?\d+(\.\d+)?(e[-+]?\d+)?x?$")


def tables(path):
    """[(header cells, [row cells])] of every markdown table in the file."""
    found, current = [], None
    for line in open(path, encoding="utf-8"):
        line = line.strip()
        if not line.startswith("|"):
            current = None
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]
        if current is None:
            current = (cells, [])
            found.append(current)
        elif all(re.fullmatch(r":?-+:?", c) for c in cells):
            continue
        else:
            current[1].append(cells)
    return found


def value(cell):
    text = cell.replace(",", "")
    return float(text.rstrip("x")) if NUMBER.match(text) else None


def compare(before_path, after_path, threshold):
    before = tables(before_path)
    after = {tuple(h): rows for h, rows in tables(after_path)}
    lines, moved = [], []
    for header, rows in before:
        other = after.get(tuple(header))
        if other is None:
            lines.append(f"(table with columns {' | '.join(header)}: not in the after run)")
            continue
        lines.append("| " + " | ".join(header) + " |")
        lines.append("|" + "---|" * len(header))
        for row_b, row_a in zip(rows, other):
            cells = []
            for name, b, a in zip(header, row_b, row_a):
                vb, va = value(b), value(a)
                if vb is None or va is None or vb == va:
                    cells.append(a if b == a else f"{b} → {a}")
                    continue
                change = (va - vb) / abs(vb) * 100 if vb else float("inf")
                cells.append(f"{b} → {a} ({change:+.0f}%)")
                if abs(change) > threshold:
                    moved.append(f"{' '.join(row_a[:4])} [{name}]: {b} → {a} ({change:+.0f}%)")
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
    return lines, moved


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("before")
    parser.add_argument("after")
    parser.add_argument("--title", default="")
    parser.add_argument("--threshold", type=float, default=5.0,
                        help="percent change a cell must exceed to be listed in the summary")
    args = parser.parse_args()
    lines, moved = compare(args.before, args.after, args.threshold)
    print(f"### {args.title}: before → after\n")
    print("\n".join(lines))
    print(f"cells that moved more than {args.threshold:g}%: {len(moved)}")
    for line in moved:
        print("  " + line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
