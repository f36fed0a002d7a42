#!/usr/bin/env python3
"""Summary of bench/estimators_sst2.sh's runs (OUT/ESTIMATOR-lrLR-sSEED/metrics.jsonl).

Per (estimator, lr): the dev (selection) and test accuracy at the last step, mean over
seeds, and the forward passes (2 per step for every estimator here) until the dev accuracy
first reaches MeZO's final dev accuracy of the same seed (MeZO at its best lr by final dev).
usage: estimators_summary.py OUT"""
import json
import os
import re
import sys
from collections import defaultdict


def evals(path):
    """(steps done, dev, test) of each evaluation after training began. metrics.jsonl counts
    steps from 1 with a step-0 row for the evaluation before training (main since the
    trainer-conventions merge), or from 0 with no such row (before)."""
    rows = [json.loads(line) for line in open(path)]
    one_based = any(r["step"] == 0 and r.get("loss") is None for r in rows)
    done = lambda r: r["step"] if one_based else r["step"] + 1
    return [(done(r), r["dev_accuracy"], r["test_accuracy"]) for r in rows
            if r.get("dev_accuracy") is not None and done(r) > 0]


def main(out):
    runs = defaultdict(dict)  # (estimator, lr) -> seed -> evals
    for d in sorted(os.listdir(out)):
        m = re.fullmatch(r"(\w+)-lr([0-9.e-]+)-s(\d+)", d)
        if m and os.path.exists(os.path.join(out, d, "metrics.jsonl")):
            ev = evals(os.path.join(out, d, "metrics.jsonl"))
            if ev:
                runs[(m[1], m[2])][int(m[3])] = ev
    mean = lambda xs: sum(xs) / len(xs) if xs else float("nan")
    final_dev = {k: mean([v[-1][1] for v in s.values()]) for k, s in runs.items()}
    mezo = [k for k in runs if k[0] == "mezo"]
    if not mezo:
        sys.exit("no mezo runs in " + out)
    ref = max(mezo, key=lambda k: final_dev[k])
    target = {seed: ev[-1][1] for seed, ev in runs[ref].items()}
    print(f"reference: mezo lr {ref[1]}, final dev accuracy per seed "
          + ", ".join(f"{s}: {100 * a:.1f}%" for s, a in sorted(target.items())))
    print("| estimator | lr | seeds | steps | dev acc at end | test acc at end | forwards to MeZO's final dev acc (per seed) |")
    print("|---|---|---|---|---|---|---|")
    for k in sorted(runs, key=lambda k: (k[0] != "mezo", k[0], float(k[1]))):
        s = runs[k]
        reach = []
        for seed, ev in sorted(s.items()):
            hit = next((step for step, dev, _ in ev if seed in target and dev >= target[seed]), None)
            reach.append(f"{2 * hit}" if hit else f">{2 * ev[-1][0]}")
        steps = max(ev[-1][0] for ev in s.values())
        print(f"| {k[0]} | {k[1]} | {len(s)} | {steps} | {100 * final_dev[k]:.1f}% | "
              f"{100 * mean([v[-1][2] for v in s.values()]):.1f}% | {', '.join(reach)} |")


if __name__ == "__main__":
    main(sys.argv[1])
