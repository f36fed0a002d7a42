#!/usr/bin/env python3
"""Summary of bench/adapters_sst2.sh's runs (OUT/METHOD-lrLR-sSEED/metrics.jsonl, beside
it METHOD-lrLR-sSEED.summary.json and .time).

Per (method, lr): test (GLUE dev) accuracy at each evaluation, mean +- sd over seeds, with
the steps and the training seconds to it (the step rows' differences, evaluations left
out); the median step time, peak RSS (the run's own report and /usr/bin/time's). The best
lr of each method is the one with the highest final selection (--dev-examples) accuracy,
so the test set does not pick it.
usage: adapters_summary.py OUT"""
import json
import os
import re
import statistics
import sys
from collections import defaultdict

NAME = re.compile(r"(mezo|lora|prefix)-lr([0-9.e+-]+)-s(\d+)")


def evals(path):
    """[(step, train seconds, wall seconds, dev, test)] of each evaluation, and the median step
    time. A row's seconds are taken before its evaluation, so the evaluation's time lands in
    the next step's difference: a difference over 3x the median counts as the median."""
    rows = [json.loads(line) for line in open(path)]
    deltas, prev = [], None
    for r in rows:
        if prev is not None and r.get("loss") is not None:
            deltas.append(r["seconds"] - prev)
        prev = r["seconds"]
    med = statistics.median(deltas) if deltas else float("nan")
    out, train, prev = [], 0.0, None
    for r in rows:
        if r.get("loss") is not None:  # a step
            d = r["seconds"] - prev if prev is not None else med
            train += d if d <= 3 * med else med
        prev = r["seconds"]
        if r.get("dev_accuracy") is not None:
            out.append((r["step"], train, r["seconds"], r["dev_accuracy"], r["test_accuracy"]))
    return out, med


def rss_mb(base):
    """(the run's own peak RSS, /usr/bin/time's maximum resident set size) in MB, or None."""
    own = tv = None
    try:
        own = max(json.load(open(base + ".summary.json"))["peak_rss_bytes"]) / 1e6
    except (OSError, ValueError, KeyError):
        pass
    try:
        m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", open(base + ".time").read())
        tv = int(m[1]) * 1024 / 1e6 if m else None
    except OSError:
        pass
    return own, tv


def fmt(xs, scale=100.0):
    xs = [x for x in xs if x is not None]
    if not xs:
        return "-"
    m = statistics.mean(xs) * scale
    return f"{m:.1f}" if len(xs) == 1 else f"{m:.1f} +- {statistics.stdev(xs) * scale:.1f}"


def main(out):
    runs = defaultdict(dict)  # (method, lr) -> seed -> (evals, median step, rss)
    for d in sorted(os.listdir(out)):
        m = NAME.fullmatch(d)
        path = os.path.join(out, d, "metrics.jsonl")
        if m and os.path.exists(path):
            ev, med = evals(path)
            if ev:
                runs[(m[1], m[2])][int(m[3])] = (ev, med, rss_mb(os.path.join(out, d)))
    if not runs:
        sys.exit("no runs in " + out)
    order = sorted(runs, key=lambda k: (["mezo", "lora", "prefix"].index(k[0]), -float(k[1])))
    print("| method | lr | seeds | steps | test acc at end | selection acc at end | best test acc | s/step (median) "
          "| training s | wall s | peak RSS MB (own / time -v) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for k in order:
        s = runs[k].values()
        last = [ev[-1] for ev, _, _ in s]
        own = [r[0] for _, _, r in s if r[0]] or [float("nan")]
        tv = [r[1] for _, _, r in s if r[1]] or [float("nan")]
        print(f"| {k[0]} | {k[1]} | {len(last)} | {max(e[0] for e in last)} | {fmt([e[4] for e in last])} | "
              f"{fmt([e[3] for e in last])} | {fmt([max(e[4] for e in ev) for ev, _, _ in s])} | "
              f"{statistics.median(med for _, med, _ in s):.2f} | {statistics.mean(e[1] for e in last):.0f} | "
              f"{statistics.mean(e[2] for e in last):.0f} | "
              f"{max(own):.0f} / {max(tv):.0f} |".replace("nan", "-"))
    best = {}
    for k in order:
        final_sel = statistics.mean(ev[-1][3] for ev, _, _ in runs[k].values())
        if k[0] not in best or final_sel > best[k[0]][1]:
            best[k[0]] = (k, final_sel)
    print("\nTest (GLUE dev) accuracy against steps and training seconds (mean over seeds), each method at its best lr"
          " by final selection accuracy:\n")
    keys = [best[m][0] for m in ["mezo", "lora", "prefix"] if m in best]
    print("| step | " + " | ".join(f"{k[0]} lr {k[1]}: acc (s)" for k in keys) + " |")
    print("|---|" + "---|" * len(keys))
    steps = sorted({e[0] for k in keys for ev, _, _ in runs[k].values() for e in ev})
    for step in steps:
        cells = []
        for k in keys:
            at = [e for ev, _, _ in runs[k].values() for e in ev if e[0] == step]
            cells.append(f"{fmt([e[4] for e in at])} ({statistics.mean(e[1] for e in at):.0f} s)" if at else "")
        print(f"| {step} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else sys.exit(__doc__))
