"""PyTorch reference benchmark of MeZO's own ZO-SGD step, to compare with `distzo bench step`.

Run from the repository root (see bench/README.md):

    build/distzo init --preset opt-125m -o /tmp/opt125m        # once: a random OPT-125m folder
    /work/venv/bin/python bench/mezo_reference.py --model /tmp/opt125m \
        --batch 16 --seq 128 --threads 2 [--steps 5 --forwards 5] [--json] [--device cuda]

Loads the Hugging Face OPT folder (config.json + model.safetensors; other files are ignored)
with OPTForCausalLM in fp32, eval mode, and times on one random batch of token ids:
  - forward: model(input_ids, attention_mask, labels=input_ids) under torch.inference_mode,
    i.e. causal-LM loss over all tokens with the LM head on every position (the same work as
    `distzo bench forward`); mean of --forwards runs after one warm-up;
  - step: one MeZO training iteration, zo_step + zo_update, written as MeZO's trainer does it
    (see the functions below); mean of --steps after one warm-up step.
Prints the ratio step / (2 * forward) (the ideal is 1: a ZO step is two forwards, the rest is
perturbation overhead), a per-phase split of the step, and peak resident memory per phase.
Writes nothing. --json prints one JSON object instead of the text summary.
--device cuda runs the same on the GPU (tools/device_check.sh, issue 33): the model and the batch
on the device, every timed span closed by torch.cuda.synchronize(), and the CUDA allocator's
peaks per phase (torch.cuda.max_memory_allocated / _reserved; "forward" is an inference forward
with the weights resident). The default, cpu, is unchanged.
"""

import argparse
import json
import os
import platform
import resource
import sys
import time

import numpy as np
import torch


# ---------------------------------------------------------------------------------------
# MeZO, following princeton-nlp/MeZO large_models/trainer.py (OurTrainer: zo_perturb_parameters,
# zo_forward, zo_step, zo_update; commit 7b2471e9a684f14f5fc9eb4bce5505bbb123d85d). The
# statements are kept as they are there, the `param.data = param.data + ...` form included: it
# allocates z and a new parameter tensor per parameter (transient), which is part of what we
# compare against. Differences, all outside the arithmetic: a plain object instead of the HF
# Trainer, a constant learning rate (_get_learning_rate() with a constant schedule), no
# lr_scheduler.step(), no print of the two losses, no _prepare_inputs / n_gpu handling.
# ---------------------------------------------------------------------------------------
class MeZO:
    def __init__(self, model, lr, eps, weight_decay, np_seed):
        self.model = model
        self.lr = lr
        self.zo_eps = eps
        self.weight_decay = weight_decay
        self.rng = np.random.RandomState(np_seed)  # MeZO draws from the global np.random
        self.named_parameters_to_optim = []
        self.zo_random_seed = None
        self.projected_grad = None

    def zo_perturb_parameters(self, random_seed=None, scaling_factor=1):
        # Same seed -> same z for the +1, -2, +1 perturbations and for the update.
        torch.manual_seed(random_seed if random_seed is not None else self.zo_random_seed)
        for name, param in self.named_parameters_to_optim:
            z = torch.normal(mean=0, std=1, size=param.data.size(), device=param.data.device,
                             dtype=param.data.dtype)
            param.data = param.data + scaling_factor * z * self.zo_eps

    def zo_forward(self, model, inputs):
        model.eval()
        with torch.inference_mode():
            loss = model(**inputs).loss  # HF Trainer.compute_loss: outputs["loss"]
        return loss.detach()

    def zo_step(self, model, inputs, timer):
        self.named_parameters_to_optim = []
        for name, param in model.named_parameters():  # tied lm_head/embed_tokens: listed once
            if param.requires_grad:
                self.named_parameters_to_optim.append((name, param))

        self.zo_random_seed = self.rng.randint(1000000000)

        with timer("perturb"):
            self.zo_perturb_parameters(scaling_factor=1)
        with timer("forward"):
            loss1 = self.zo_forward(model, inputs)
        with timer("perturb"):
            self.zo_perturb_parameters(scaling_factor=-2)
        with timer("forward"):
            loss2 = self.zo_forward(model, inputs)

        self.projected_grad = ((loss1 - loss2) / (2 * self.zo_eps)).item()

        with timer("perturb"):  # reset to the parameters at the start of the step
            self.zo_perturb_parameters(scaling_factor=1)
        return loss1, loss2

    def zo_update(self, model):
        torch.manual_seed(self.zo_random_seed)
        for name, param in self.named_parameters_to_optim:
            z = torch.normal(mean=0, std=1, size=param.data.size(), device=param.data.device,
                             dtype=param.data.dtype)
            if "bias" not in name and "layer_norm" not in name and "layernorm" not in name:
                param.data = param.data - self.lr * (self.projected_grad * z + self.weight_decay * param.data)
            else:
                param.data = param.data - self.lr * (self.projected_grad * z)


# ---------------------------------------------------------------------------------------
# Measurement helpers
# ---------------------------------------------------------------------------------------
def proc_status_kib(field):
    """VmHWM / VmRSS from /proc/self/status in KiB, or None off Linux."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def reset_hwm():
    """Resets VmHWM to the current RSS (Linux >= 4.0: "5" > clear_refs) so that each phase's
    peak is its own; ru_maxrss cannot be reset and stays the whole-process peak."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def loadavg():
    """1-minute load average: a contended 2-core machine explains a noisy run."""
    try:
        return float(open("/proc/loadavg").read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def cpu_s():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def mib(kib):
    return None if kib is None else round(kib / 1024.0, 1)


def device_sync(device):
    """Waits for the device's queued work so that a wall-clock span covers it (no-op on CPU)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


class PhaseTimer:
    """Accumulates wall time per named phase of one step (sync: waits for queued device work)."""

    def __init__(self, sync=lambda: None):
        self.t = {}
        self.sync = sync

    def __call__(self, name):
        timer = self

        class _Ctx:
            def __enter__(self):
                self.t0 = time.perf_counter()

            def __exit__(self, *exc):
                timer.sync()
                timer.t[name] = timer.t.get(name, 0.0) + time.perf_counter() - self.t0

        return _Ctx()


def stats(xs):
    a = np.asarray(xs, dtype=np.float64)
    return {"mean": float(a.mean()), "min": float(a.min()), "max": float(a.max()),
            "std": float(a.std(ddof=1)) if len(a) > 1 else 0.0, "n": len(a)}


def device_memory_phase(name, out, device):
    """The CUDA allocator's peaks of the phase that just ended, then a reset for the next one."""
    if device.type != "cuda":
        return
    out[name] = {"max_allocated_mib": round(torch.cuda.max_memory_allocated(device) / 2**20, 1),
                 "max_reserved_mib": round(torch.cuda.max_memory_reserved(device) / 2**20, 1)}
    torch.cuda.reset_peak_memory_stats(device)


def memory_phase(name, out, can_reset):
    """Peak of the phase that just ended, then a reset for the next one. The kernel computes
    ru_maxrss from the same high-water mark that the reset lowers, so both are read here,
    before it; the process's peak is the largest phase peak."""
    out[name] = {"vmhwm_mib": mib(proc_status_kib("VmHWM")), "vmrss_mib": mib(proc_status_kib("VmRSS")),
                 "ru_maxrss_mib": mib(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)}
    if can_reset:
        reset_hwm()


# ---------------------------------------------------------------------------------------
def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="/tmp/opt125m",
                   help="HF OPT folder (default /tmp/opt125m: `distzo init --preset opt-125m -o /tmp/opt125m`)")
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--threads", type=int, default=2, help="torch.set_num_threads (default 2)")
    p.add_argument("--steps", type=int, default=5, help="timed MeZO steps after 1 warm-up (default 5)")
    p.add_argument("--forwards", type=int, default=5, help="timed forwards after 1 warm-up (default 5)")
    p.add_argument("--lr", type=float, default=1e-6, help="MeZO's OPT learning rate (default 1e-6)")
    p.add_argument("--eps", type=float, default=1e-3, help="MeZO's zo_eps (default 1e-3)")
    p.add_argument("--weight-decay", type=float, default=0.0, help="default 0, as MeZO's OPT runs")
    p.add_argument("--seed", type=int, default=0, help="seed of the token ids and of the step seeds")
    p.add_argument("--attn", default="sdpa", choices=["sdpa", "eager"],
                   help="HF attention implementation (default sdpa, the transformers default)")
    p.add_argument("--json", action="store_true", help="print JSON instead of the summary")
    p.add_argument("--device", default="cpu", help="cpu (default) or cuda[:N]: where the model and the step run")
    return p.parse_args()


def main():
    args = parse_args()
    if not os.path.isfile(os.path.join(args.model, "config.json")):
        sys.exit(f"{args.model}: no config.json (make one: build/distzo init --preset opt-125m -o {args.model})")
    torch.set_num_threads(args.threads)
    import transformers
    from transformers import OPTForCausalLM

    transformers.utils.logging.disable_progress_bar()
    device = torch.device(args.device)
    sync = lambda: device_sync(device)  # noqa: E731
    dev_mem = {}
    can_reset = reset_hwm()
    mem = {}
    memory_phase("start", mem, can_reset)  # the baseline: interpreter + torch + transformers

    t0 = time.perf_counter()
    model = OPTForCausalLM.from_pretrained(args.model, dtype=torch.float32, attn_implementation=args.attn)
    model.eval()
    if device.type != "cpu":
        model.to(device)
        device_sync(device)
    load_s = time.perf_counter() - t0
    n_params = sum(p.numel() for p in model.parameters())  # tied weights counted once
    memory_phase("load", mem, can_reset)
    device_memory_phase("load", dev_mem, device)

    gen = torch.Generator().manual_seed(args.seed)
    ids = torch.randint(0, model.config.vocab_size, (args.batch, args.seq), generator=gen).to(device)
    inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": ids}

    mezo = MeZO(model, args.lr, args.eps, args.weight_decay, args.seed)
    load_start = loadavg()
    wall0, cpu0 = time.perf_counter(), cpu_s()

    fwd_times, fwd_loss = [], None
    for i in range(args.forwards + 1):
        t = time.perf_counter()
        loss = mezo.zo_forward(model, inputs)
        sync()
        if i > 0:  # first is the warm-up
            fwd_times.append(time.perf_counter() - t)
        fwd_loss = float(loss)
    memory_phase("forward", mem, can_reset)
    device_memory_phase("forward", dev_mem, device)

    step_times, phases, losses = [], [], []
    for i in range(args.steps + 1):
        timer = PhaseTimer(sync)
        t = time.perf_counter()
        loss1, loss2 = mezo.zo_step(model, inputs, timer)
        with timer("update"):
            mezo.zo_update(model)
        sync()
        dt = time.perf_counter() - t
        if i > 0:
            step_times.append(dt)
            phases.append(timer.t)
        losses.append({"loss1": float(loss1), "loss2": float(loss2), "projected_grad": mezo.projected_grad})
    memory_phase("step", mem, can_reset)
    device_memory_phase("step", dev_mem, device)

    # CPU seconds per wall second over the timed part: near --threads when the cores were ours
    busy = (cpu_s() - cpu0) / (time.perf_counter() - wall0)
    fwd = stats(fwd_times)
    stp = stats(step_times)
    split = {k: float(np.mean([p[k] for p in phases])) for k in ("forward", "perturb", "update")}
    tokens = args.batch * args.seq
    result = {
        "tool": "bench/mezo_reference.py",
        "model": os.path.abspath(args.model),
        "params": n_params,
        "batch": args.batch, "seq": args.seq, "threads": args.threads,
        "attn": args.attn, "lr": args.lr, "eps": args.eps, "weight_decay": args.weight_decay,
        "seed": args.seed,
        "torch": torch.__version__, "python": platform.python_version(),
        "loadavg_start": load_start, "loadavg_end": loadavg(), "cpu_per_wall": busy,
        "load_s": load_s,
        "forward_s": fwd, "forward_tokens_per_s": tokens / fwd["mean"], "forward_loss": fwd_loss,
        "step_s": stp,
        "step_split_s": split,  # mean per step: 2 forwards, 3 perturbations, 1 update
        "step_over_2forward": stp["mean"] / (2.0 * fwd["mean"]),
        "losses": losses,  # first entry is the warm-up step
        # Per phase (start = after importing torch and transformers, before the model): VmHWM
        # and ru_maxrss of that phase alone when /proc/self/clear_refs allows resetting them, else cumulative.
        "memory_mib": mem, "hwm_reset_per_phase": can_reset,
        "peak_rss_mib": max(max(v["vmhwm_mib"] or 0, v["ru_maxrss_mib"] or 0) for v in mem.values()),
    }

    if device.type == "cuda":  # the CPU's output stays as it was
        result.update({"device": str(device), "device_name": torch.cuda.get_device_name(device),
                       # CUDA allocator peaks per phase (load, forward = an inference forward, step)
                       "device_memory_mib": dev_mem})
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"model {result['model']}: {n_params / 1e6:.1f}M params, fp32, attn {args.attn}, "
          f"torch {torch.__version__}, {args.threads} threads")
    print(f"batch {args.batch} x seq {args.seq} = {tokens} tokens, loss over all positions "
          f"(forward loss {fwd_loss:.4f}); load {load_s:.1f} s")
    print(f"forward  {fwd['mean']:.3f} s mean of {fwd['n']} (min {fwd['min']:.3f}, max {fwd['max']:.3f}), "
          f"{result['forward_tokens_per_s']:.0f} tokens/s")
    print(f"step     {stp['mean']:.3f} s mean of {stp['n']} (min {stp['min']:.3f}, max {stp['max']:.3f}): "
          f"2 forwards {split['forward']:.3f} s, 3 perturbations {split['perturb']:.3f} s, "
          f"update {split['update']:.3f} s")
    print(f"step / (2 * forward) = {result['step_over_2forward']:.3f}")
    print(f"CPU use {busy:.2f} cores of {args.threads}; load average {load_start} -> {result['loadavg_end']}")
    scope = "per phase" if can_reset else "cumulative"
    print(f"peak RSS {scope} (VmHWM / ru_maxrss): " + ", ".join(
        f"{k} {v['vmhwm_mib']} / {v['ru_maxrss_mib']} MiB" for k, v in mem.items() if k != "start")
        + f"; process peak {result['peak_rss_mib']} MiB, RSS before loading "
        f"{mem['start']['vmrss_mib']} MiB")
    if dev_mem:
        print(f"{device} ({result['device_name']}) allocator peaks, allocated / reserved: " + ", ".join(
            f"{k} {v['max_allocated_mib']} / {v['max_reserved_mib']} MiB" for k, v in dev_mem.items()))
    last = losses[-1]
    print(f"last step: loss1 {last['loss1']:.5f} loss2 {last['loss2']:.5f} "
          f"projected_grad {last['projected_grad']:.5g}")


if __name__ == "__main__":
    main()
