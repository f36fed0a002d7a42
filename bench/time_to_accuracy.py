#!/usr/bin/env python3
"""Summary of bench/time_to_accuracy.sh's runs as markdown (stdlib only).

usage: time_to_accuracy.py OUT [--targets 0.80,0.85] [--mezo-ref ACC] [--mezo-ref-step 2000]
                           [--forwards-per-step fzoo=9 ...] [--curves]

OUT holds distzo run folders zo-ESTIMATOR-lrLR-sSEED/ (metrics.jsonl, run.json) and
bench/first_order_sst2.py's fo-MODE-lrLR-sSEED/, each with NAME.time (/usr/bin/time's
"peak-RSS-KiB elapsed-s"). Accuracy is the one on the --test file (GLUE dev, or its first
rows in a smoke run): metrics.jsonl's test_accuracy on both sides.

- Training time excludes loading and evaluations on both sides. distzo's metrics rows hold
  `seconds` since its start, taken at the end of each step and before that step's
  evaluation, so the row after an evaluation also holds the evaluation: that step's time is
  taken as the median of the run's other steps. first_order_sst2.py writes train_seconds.
- Forward passes: a ZO step of mezo, sparse and lozo is 2 x spsa_samples forwards of a batch,
  hizoo's 3, fzoo's directions + 1 (run.json's fzoo directions); a metrics row's own
  "forwards" (cumulative) wins where distzo writes one. A first-order step is 1 forward +
  1 backward (a backward costs about 2 forwards).
- Each method's lr is its best in the grid by the mean over seeds of the last evaluation's
  accuracy (selected on the reported set itself, as the issue's "best lr from a small grid").
- Targets: --targets, and MeZO's accuracy at --mezo-ref-step (mean over seeds at its best lr;
  at its last evaluation if the runs are shorter, said so) unless --mezo-ref gives it.
"""
import argparse
import json
import os
import re
import statistics
import sys
from collections import defaultdict

RUN_DIR = re.compile(r"(zo|fo)-(\w+)-lr([0-9.e+-]+)-s(\d+)")


def read_rows(path):
    rows = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError:  # a torn last line of a killed run
                    print(f"{path}:{n}: not JSON, ignored", file=sys.stderr)
    return rows


def peak_rss_mib(run_dir, rows):
    """/usr/bin/time's peak (the whole process) where it ran to the end, else the rows' own."""
    try:
        with open(run_dir + ".time") as f:
            last = [l for l in f.read().split("\n") if l.strip()][-1].split()
        return int(last[0]) / 1024.0
    except (OSError, IndexError, ValueError):
        vals = [r["peak_rss_mib"] for r in rows if r.get("peak_rss_mib") is not None]
        return max(vals) if vals else None


def zo_forwards_per_step(run, overrides):
    est = run.get("estimator", "mezo")
    if est in overrides:
        return overrides[est]
    q = int(run.get("spsa_samples", 1))
    if est in ("mezo", "sparse", "lozo"):
        return 2 * q
    if est == "hizoo":
        return 3 * q
    if est == "fzoo":
        n = [v for k, v in run.items() if "fzoo" in k and "direction" in k]
        return int(n[0]) + 1 if n else None
    return None


def zo_evals(run_dir, overrides):
    """[(step, forwards, backwards, train seconds, accuracy)] of a distzo run, and its s/step."""
    rows = sorted(read_rows(os.path.join(run_dir, "metrics.jsonl")), key=lambda r: r["step"])
    with open(os.path.join(run_dir, "run.json")) as f:
        fps = zo_forwards_per_step(json.load(f), overrides)
    steps = [r for r in rows if r["step"] > 0]
    prev = {r["step"]: r for r in rows}
    deltas, dirty = {}, set()
    for r in steps:
        p = prev.get(r["step"] - 1)
        if p is None or p.get("seconds") is None or r.get("seconds") is None:
            dirty.add(r["step"])
            continue
        deltas[r["step"]] = r["seconds"] - p["seconds"]
        if p["step"] > 0 and p.get("test_accuracy") is not None:
            dirty.add(r["step"])  # holds the evaluation after step - 1
    clean = [d for s, d in deltas.items() if s not in dirty]
    typical = statistics.median(clean) if clean else float("nan")
    out, t = [], 0.0
    for r in rows:
        if r["step"] > 0:
            t += typical if r["step"] in dirty else deltas[r["step"]]
        if r.get("test_accuracy") is not None:
            fwd = r["forwards"] if "forwards" in r else (fps * r["step"] if fps else None)
            out.append((r["step"], fwd, 0, t, r["test_accuracy"]))
    return out, typical, rows


def fo_evals(run_dir):
    rows = read_rows(os.path.join(run_dir, "metrics.jsonl"))
    ev = [(r["step"], r["forwards"], r["backwards"], r["train_seconds"], r["test_accuracy"])
          for r in rows if r.get("test_accuracy") is not None]
    st = [r["step_seconds"] for r in rows if r.get("step_seconds") is not None]
    return ev, (statistics.median(st) if st else float("nan")), rows


def load(out, overrides):
    runs = defaultdict(dict)  # (kind, name, lr) -> seed -> {evals, s_step, rss}
    for d in sorted(os.listdir(out)):
        m = RUN_DIR.fullmatch(d)
        path = os.path.join(out, d)
        if not m or not os.path.exists(os.path.join(path, "metrics.jsonl")):
            continue
        ev, s_step, rows = zo_evals(path, overrides) if m[1] == "zo" else fo_evals(path)
        if ev:
            runs[(m[1], m[2], m[3])][int(m[4])] = {"evals": ev, "s_step": s_step, "rss": peak_rss_mib(path, rows)}
    return runs


def label(key):
    kind, name = key[0], key[1]
    return name if kind == "zo" else {"full": "AdamW full", "lora": "AdamW LoRA r8"}.get(name, "AdamW " + name)


def mean_sd(xs):
    if not xs:
        return "-"
    m = 100 * statistics.mean(xs)
    return f"{m:.1f}%" if len(xs) < 2 else f"{m:.1f} +- {100 * statistics.stdev(xs):.1f}%"


def fmt_time(s):
    return f"{s:.0f} s" if s < 120 else (f"{s / 60:.1f} min" if s < 7200 else f"{s / 3600:.2f} h")


def spread(vals, fmt):
    if len(vals) == 1:
        return fmt(vals[0])
    return f"{fmt(statistics.median(vals))} ({fmt(min(vals))}-{fmt(max(vals))})"


def best_lr(runs):
    """(kind, name) -> the key of its best lr: mean last accuracy, then mean best accuracy."""
    by = defaultdict(list)
    for k in runs:
        by[k[:2]].append(k)

    def score(k):
        s = runs[k].values()
        return (statistics.mean(r["evals"][-1][4] for r in s), statistics.mean(max(e[4] for e in r["evals"]) for r in s))
    return {m: max(ks, key=score) for m, ks in by.items()}


def reach(run, target):
    return next((e for e in run["evals"] if e[4] >= target - 1e-12), None)


def overview(runs, best):
    print("| method | lr | seeds | steps | accuracy at step 0 | at the end | best | s/step (median) | peak RSS MiB |")
    print("|---|---|---|---|---|---|---|---|---|")
    for k in sorted(runs, key=lambda k: (k[0] != "zo", k[1] != "mezo", k[1], float(k[2]))):
        s = runs[k].values()
        steps = max(r["evals"][-1][0] for r in s)
        rss = [r["rss"] for r in s if r["rss"] is not None]
        mark = " **(best)**" if best[k[:2]] == k else ""
        print(f"| {label(k)} | {k[2]}{mark} | {len(s)} | {steps} | {mean_sd([r['evals'][0][4] for r in s])} | "
              f"{mean_sd([r['evals'][-1][4] for r in s])} | {mean_sd([max(e[4] for e in r['evals']) for r in s])} | "
              f"{statistics.median(r['s_step'] for r in s):.2f} | {f'{max(rss):.0f}' if rss else '-'} |")


def passes(e, kind):
    if e[1] is None:
        return "?"
    return f"{e[1]}" if kind == "zo" else f"{e[1]} + {e[2]} bwd"


def to_targets(runs, best, targets):
    print("| target | method | lr | seeds reached | passes (forwards) | training time | peak RSS MiB |")
    print("|---|---|---|---|---|---|---|")
    times = {}
    for name, t in targets:
        for m, k in sorted(best.items(), key=lambda x: (x[0][0] != "zo", x[0][1] != "mezo", x[0][1])):
            s = runs[k]
            hits = [reach(r, t) for r in s.values()]
            got = [h for h in hits if h]
            rss = [r["rss"] for r in s.values() if r["rss"] is not None]
            rss_s = f"{max(rss):.0f}" if rss else "-"
            if not got:
                top = max(max(e[4] for e in r["evals"]) for r in s.values())
                print(f"| {name} | {label(k)} | {k[2]} | 0/{len(s)} | not reached (best {100 * top:.1f}%) | - | {rss_s} |")
                continue
            fw = [h[1] for h in got if h[1] is not None]
            fw_s = "?" if not fw else spread(fw, lambda v: f"{v:.0f}") + ("" if m[0] == "zo" else " + as many bwd")
            ts = [h[3] for h in got]
            times[(name, m)] = (statistics.median(ts), max(rss) if rss else None, len(got) == len(s))
            print(f"| {name} | {label(k)} | {k[2]} | {len(got)}/{len(s)} | {fw_s} | {spread(ts, fmt_time)} | {rss_s} |")
    return times


def ratios(times, targets):
    for name, _ in targets:
        zo = {m: v for (n, m), v in times.items() if n == name and m[0] == "zo"}
        fo = {m: v for (n, m), v in times.items() if n == name and m[0] == "fo"}
        if not zo or not fo:
            if zo or fo:
                m, v = min((zo or fo).items(), key=lambda x: x[1][0])
                print(f"- {name}: only {'ZO' if zo else 'first-order'} runs reached it, the fastest "
                      f"{label(m)} in {fmt_time(v[0])}")
            continue
        zm, zv = min(zo.items(), key=lambda x: x[1][0])
        fm, fv = min(fo.items(), key=lambda x: x[1][0])
        rss = f", peak RSS {zv[1] / fv[1]:.2f}x" if zv[1] and fv[1] else ""
        if fv[0] <= 0 or zv[0] <= 0:
            print(f"- {name}: reached before training (step 0) by {zm[1] if zv[0] <= 0 else label(fm)}")
            continue
        print(f"- {name}: the fastest ZO ({zm[1]}, median {fmt_time(zv[0])}) takes {zv[0] / fv[0]:.1f}x the "
              f"training time of the fastest first-order run ({label(fm)}, {fmt_time(fv[0])}){rss}"
              + ("" if zv[2] and fv[2] else " (not every seed reached it)"))


def curves(runs, best):
    for m, k in sorted(best.items()):
        s = list(runs[k].values())
        print(f"\n{label(k)}, lr {k[2]}, seeds: {len(s)}; step, passes, training time (mean), accuracy (mean)")
        for i, e in enumerate(s[0]["evals"]):
            at = [r["evals"][i] for r in s if len(r["evals"]) > i and r["evals"][i][0] == e[0]]
            print(f"  {e[0]}\t{passes(e, m[0])}\t{fmt_time(statistics.mean(a[3] for a in at))}\t"
                  f"{100 * statistics.mean(a[4] for a in at):.1f}%")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("out")
    p.add_argument("--targets", default="0.80,0.85")
    p.add_argument("--mezo-ref", type=float, help="MeZO's reference accuracy (default: from the runs)")
    p.add_argument("--mezo-ref-step", type=int, default=2000)
    p.add_argument("--forwards-per-step", action="append", default=[], metavar="EST=N")
    p.add_argument("--curves", action="store_true", help="also each method's accuracy at every evaluation")
    a = p.parse_args()
    overrides = {kv.split("=")[0]: int(kv.split("=")[1]) for kv in a.forwards_per_step}
    runs = load(a.out, overrides)
    if not runs:
        sys.exit(f"no runs in {a.out}")
    best = best_lr(runs)
    targets = [(f"{100 * float(t):.0f}%", float(t)) for t in a.targets.split(",")]
    if a.mezo_ref is not None:
        targets.append((f"MeZO ref {100 * a.mezo_ref:.1f}%", a.mezo_ref))
    elif ("zo", "mezo") in best:
        s = runs[best[("zo", "mezo")]].values()
        at = [next((e for e in r["evals"] if e[0] == a.mezo_ref_step), r["evals"][-1]) for r in s]
        step = min(e[0] for e in at)
        what = f"{a.mezo_ref_step}-step" if step == a.mezo_ref_step else f"final ({step}-step)"
        ref = statistics.mean(e[4] for e in at)
        targets.append((f"MeZO's {what} {100 * ref:.1f}%", ref))
    overview(runs, best)
    print()
    times = to_targets(runs, best, targets)
    print()
    ratios(times, targets)
    if a.curves:
        curves(runs, best)


if __name__ == "__main__":
    main()
