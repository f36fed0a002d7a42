#!/usr/bin/env python3
"""The Python path's overhead on SmolLM2-135M: the same few-step run from the command line
(`distzo train`) and from Python (`distzo.Trainer`), alternated round by round (CLI, Python,
CLI, Python, ...) so that both meet the same machine load. Each run is timed whole, from
the outside (the command line's process; Python's Trainer(...).train() call, the package
already imported): the model's load, the steps and the run folder. Prints every round and
the median ratio Python / CLI.

    PYTHONPATH=build/python python3 bench/python_overhead.py [--steps 4] [--rounds 3]

(or with the package installed: pip install .). Both sides run on --threads threads
(default 1: on a shared machine one thread each is the least noisy) and write no
checkpoint (a 135M model's is 540 MB; its writing is the same code on both sides)."""
import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parents[1]


def settings(args, assets):
    return {"model": str(assets / "smollm2-135m" / "SmolLM2-135M-Instruct.Q4_1.gguf"),
            "train_data": str(assets / "sst2" / "train.tsv"), "steps": args.steps, "batch": args.batch,
            "train_examples": 4 * args.batch, "dev_examples": 0, "eval_every": 0, "checkpoint_every": 0,
            "lr": 1e-6, "eps": 1e-3, "seed": 1}


def cli_run(cli, run, out, threads):
    args = []
    for key, value in run.items():
        option = {"train_data": "data"}.get(key, key).replace("_", "-")
        args += [f"--{option}", str(value)]
    t0 = time.perf_counter()
    done = subprocess.run([cli, "train", *args, "--threads", str(threads), "--out", str(out), "--json", "--quiet"],
                          check=True, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    return wall, summary["steps_run"] / summary["steps_per_s"] if summary.get("steps_per_s") else float("nan")


def py_run(distzo, run, out):
    run = dict(run)
    model, data = run.pop("model"), run.pop("train_data")
    t0 = time.perf_counter()
    r = distzo.Trainer(model, data, out=str(out), **run).train(progress=False)
    wall = time.perf_counter() - t0
    return wall, r["step_seconds"]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--cli", default=os.environ.get("DISTZO_CLI", str(REPO / "build" / "distzo")))
    p.add_argument("--assets", default=os.environ.get("DISTZO_ASSETS", str(REPO.parent / "shared" / "assets")))
    args = p.parse_args()
    import distzo

    distzo.set_threads(args.threads)
    run = settings(args, pathlib.Path(args.assets))
    rows = []
    with tempfile.TemporaryDirectory(prefix="distzo-bench-") as tmp:
        for k in range(args.rounds):
            cli_wall, cli_steps = cli_run(args.cli, run, pathlib.Path(tmp) / f"cli{k}", args.threads)
            py_wall, py_steps = py_run(distzo, run, pathlib.Path(tmp) / f"py{k}")
            rows.append((cli_wall, py_wall, cli_steps, py_steps))
            print(f"round {k + 1}: CLI {cli_wall:7.2f} s (steps {cli_steps:6.2f} s)   Python {py_wall:7.2f} s "
                  f"(steps {py_steps:6.2f} s)   ratio {py_wall / cli_wall:.4f}", flush=True)
    ratios = [py / cli for cli, py, _, _ in rows]
    step = statistics.median(r[2] for r in rows) / args.steps
    print(json.dumps({"model": "SmolLM2-135M-Instruct.Q4_1.gguf", "steps": args.steps, "batch": args.batch,
                      "threads": args.threads, "rounds": args.rounds, "cli_median_s": statistics.median(r[0] for r in rows),
                      "python_median_s": statistics.median(r[1] for r in rows), "step_s": step,
                      "ratio_median": statistics.median(ratios), "ratio_min": min(ratios), "ratio_max": max(ratios),
                      "load_1min": os.getloadavg()[0], "python": sys.version.split()[0]}))


if __name__ == "__main__":
    main()
