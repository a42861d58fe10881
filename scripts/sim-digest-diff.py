#!/usr/bin/env python3
"""Compares the schedules of two sim_test runs made with DLOCK_SIM_DIGEST=1 (docs/simulation.md).

For every test case and seed in both runs: did the schedule make the same random draws
(`decisions`, `draws`), take the same shape (its trace without numbers and random ids), reach
the same outcome (counts of operations, results, faults) and the same violations? Where a seed
differs, its trail (each step's draws and shape) tells where: `budget` if every step of the
shorter schedule is the same in the longer one (one run's time budget, kScheduleBudget, ended
its steps sooner), `finish` if only the final step differs, else the step where they part.
Prints a table per test case with the median wall-clock and CPU time of a schedule in each run
(the CPU time where the log has it), then the seeds that part within their steps (up to --show
of them). Exits 1 if any seed differs.

Usage: scripts/sim-digest-diff.py A.log B.log [--show N]
       scripts/sim-digest-diff.py A.log            (one run: only the times)
"""

import argparse
import statistics
import sys
from collections import defaultdict

FIELDS = ("draws", "decisions", "shape", "outcome", "violations")


def read(path):
    runs = {}
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            if not line.startswith("digest "):
                continue
            words = line.split()
            kv = dict(zip(words[2::2], words[3::2]))
            runs[(words[1], int(kv["seed"]))] = kv
    return runs


def median_ms(runs, test, field="ms"):
    times = [float(kv[field]) for (t, _), kv in runs.items() if t == test and field in kv]
    return statistics.median(times) if times else float("nan")


def parting(kva, kvb):
    """Where two runs of a seed part: 'same', 'budget', 'finish' or 'step N'."""
    if all(kva[f] == kvb[f] for f in FIELDS):
        return "same"
    if "trail" not in kva or "trail" not in kvb:
        return "step ?"  # a log without trails
    ta, tb = kva["trail"].split(","), kvb["trail"].split(",")
    shorter = min(len(ta), len(tb))
    common = next((i for i, (x, y) in enumerate(zip(ta, tb)) if x != y), shorter)
    if common >= shorter - 1:
        return "budget" if len(ta) != len(tb) else "finish"
    return f"step {common - 1}"  # part 0 is the schedule's start, part i + 1 its step i


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("a")
    ap.add_argument("b", nargs="?")
    ap.add_argument("--show", type=int, default=10)
    args = ap.parse_args()
    a = read(args.a)
    b = read(args.b) if args.b else {}
    tests = sorted({t for t, _ in a} | {t for t, _ in b})
    same = defaultdict(lambda: defaultdict(int))
    within = []
    for key in sorted(set(a) & set(b)):
        kva, kvb = a[key], b[key]
        s = same[key[0]]
        s["seeds"] += 1
        for f in FIELDS:
            s[f] += kva[f] == kvb[f]
        where = parting(kva, kvb)
        s[where.split()[0]] += 1
        if where.startswith("step"):
            within.append((key, where, [f for f in FIELDS if kva[f] != kvb[f]]))
    cols = FIELDS + ("budget", "finish", "step")
    print(f"{'test':50} {'seeds':>5} " + " ".join(f"{f[:10]:>10}" for f in cols) +
          f" {'ms A':>8} {'ms B':>8} {'cpu A':>8} {'cpu B':>8}")
    for t in tests:
        s = same[t]
        print(f"{t:50} {s['seeds']:>5} " + " ".join(f"{s[f]:>10}" for f in cols) +
              f" {median_ms(a, t):>8.2f} {median_ms(b, t):>8.2f}"
              f" {median_ms(a, t, 'cpu_ms'):>8.2f} {median_ms(b, t, 'cpu_ms'):>8.2f}")
    for (test, seed), where, fields in within[: args.show]:
        print(f"parts at {where}: {test} seed {seed} ({', '.join(fields)} differ)")
    if len(within) > args.show:
        print(f"... and {len(within) - args.show} more")
    return 1 if any(parting(a[k], b[k]) != "same" for k in set(a) & set(b)) else 0


if __name__ == "__main__":
    sys.exit(main())
