"""First-order fine-tuning (PyTorch AdamW, full or LoRA) on SST-2 in distzo's setup: the
yardstick of issue 30's time to accuracy (bench/README.md, "Time to accuracy (issue 30)").

    /work/venv-ref/bin/python bench/first_order_sst2.py \
        --gguf /work/shared/assets/smollm2-135m/SmolLM2-135M-Instruct.Q4_1.gguf \
        --tokenizer /work/shared/assets/smollm2-135m/hf-tokenizer \
        --data /work/shared/assets/sst2/train.tsv --test /work/shared/assets/sst2/dev.tsv \
        --mode lora --lr 1e-3 --steps 200 --eval-every 20 --threads 2 --out /tmp/fo-lora

The same as `distzo train --task sst2` (bench/mezo_sst2.py's functions, which replay distzo's
draw bit for bit): the --train-examples training examples drawn from --data with --data-seed
(splitmix64, partial Fisher-Yates), step t's batch from distzo's per-epoch shuffle, the prompt
template and label words (distzo's defaults "{text} It was" and " terrible"/" great"), a
candidate's score the mean log-prob of its tokens, the loss the batch mean of the
cross-entropy over the candidates' scores, the prediction the argmax, accuracy on --test
(GLUE dev). What differs is the optimizer: a forward and a backward per step, then
torch.optim.AdamW, on every parameter (--mode full) or on a peft LoRA adapter (--mode lora:
r 8, alpha 16, q_proj and v_proj, no dropout: distzo's --peft lora defaults).

The run folder (--out) gets run.json (the settings and versions) and metrics.jsonl, one row
per step and one per evaluation, with the keys distzo's metrics.jsonl uses where they mean the
same (step: steps done, loss, test_accuracy: accuracy on --test) and:
  train_seconds  wall seconds spent in training steps so far (load and evaluations left out);
  wall_seconds   wall seconds since the process started (load and evaluations included);
  forwards, backwards  passes over a batch so far (one each per step);
  peak_rss_mib   the process's peak resident set so far (ru_maxrss: Python, torch, the model,
                 the optimizer's state and the activations, all that a user pays for).
Step 0 is the evaluation before training. --test-limit N keeps the first N rows of --test
(smoke runs; `distzo eval --limit N` scores the same rows).
"""

import argparse
import json
import os
import resource
import sys
import time

T_START = time.perf_counter()
os.environ.setdefault("TQDM_DISABLE", "1")  # transformers' GGUF loader draws a progress bar

import torch  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mezo_sst2 import (BatchOrder, Scorer, add_setup_args, build_examples, load_sst2,  # noqa: E402
                       load_tokenizer, sample_indices, write_json)


def peak_rss_mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # KiB on Linux


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_setup_args(p)
    p.add_argument("--test-limit", type=int, default=0, help="only the first N rows of --test (0: all)")
    p.add_argument("--data-seed", type=int, default=42)
    p.add_argument("--seed", type=int, default=0, help="torch seed (LoRA's A initialization)")
    p.add_argument("--mode", choices=("full", "lora"), default="lora")
    p.add_argument("--lora-rank", type=int, default=8)
    p.add_argument("--lora-alpha", type=float, default=16.0)
    p.add_argument("--lora-targets", default="q_proj,v_proj")
    p.add_argument("--lr", type=float, required=True)
    p.add_argument("--weight-decay", type=float, default=0.0)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--eval-every", type=int, default=20, help="steps between evaluations (0: at the end only)")
    p.add_argument("--eval-batch", type=int, default=16, help="examples per evaluation forward")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--out", required=True, help="run folder (must not hold a run)")
    return p.parse_args()


def load_model(args):
    import transformers
    from transformers import AutoModelForCausalLM

    transformers.utils.logging.disable_progress_bar()
    model = AutoModelForCausalLM.from_pretrained(os.path.dirname(os.path.abspath(args.gguf)),
                                                 gguf_file=os.path.basename(args.gguf), dtype=torch.float32)
    if args.mode == "full":
        return model, model, list(model.parameters())
    from peft import LoraConfig, get_peft_model

    cfg = LoraConfig(r=args.lora_rank, lora_alpha=args.lora_alpha, lora_dropout=0.0,
                     target_modules=args.lora_targets.split(","), task_type="CAUSAL_LM")
    wrapped = get_peft_model(model, cfg)
    # the LoRA layers are injected into the base model's modules: the scorer runs the base
    return wrapped, wrapped.get_base_model(), [p for p in wrapped.parameters() if p.requires_grad]


def read_data(args, tok):
    words = [w if w.startswith(" ") else " " + w for w in args.label_words.split(",")]
    pool = load_sst2(args.data)
    drawn = sample_indices(len(pool), args.train_examples, args.data_seed)
    train = build_examples([pool[i] for i in drawn], tok, args.template, words)
    rows = load_sst2(args.test)
    test = build_examples(rows[:args.test_limit] if args.test_limit > 0 else rows, tok, args.template, words)
    return train, test


class Run:
    """The metrics file and the clocks: training time only grows inside steps."""

    def __init__(self, path):
        if os.path.exists(path):
            sys.exit(f"{path}: already exists (a new run needs a new --out)")
        self.f = open(path, "w")
        self.train_seconds, self.steps = 0.0, 0

    def row(self, **kw):
        base = {"step": self.steps, "train_seconds": round(self.train_seconds, 3),
                "wall_seconds": round(time.perf_counter() - T_START, 3), "forwards": self.steps,
                "backwards": self.steps, "peak_rss_mib": round(peak_rss_mib(), 1)}
        self.f.write(json.dumps(base | kw) + "\n")
        self.f.flush()
        os.fsync(self.f.fileno())


def train(args, wrapped, scorer, params, train_ex, test_ex, run):
    opt = torch.optim.AdamW(params, lr=args.lr, weight_decay=args.weight_decay)
    order = BatchOrder(len(train_ex), args.batch, args.data_seed)

    def evaluate():
        te = time.perf_counter()
        wrapped.eval()
        acc, _ = scorer.evaluate(test_ex, args.eval_batch)
        run.row(test_accuracy=acc, eval_seconds=round(time.perf_counter() - te, 3))
        print(f"step {run.steps}: test accuracy {acc:.4f} ({len(test_ex)} examples), "
              f"{run.train_seconds:.1f} s of training, peak RSS {peak_rss_mib():.0f} MiB", flush=True)

    evaluate()
    for step in range(args.steps):
        ts = time.perf_counter()
        wrapped.train()
        loss = scorer.loss([train_ex[i] for i in order.examples(step)])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        run.train_seconds += time.perf_counter() - ts
        run.steps, value = step + 1, float(loss.detach())
        if value != value or abs(value) == float("inf"):
            sys.exit(f"step {run.steps}: non-finite loss {value} (lr {args.lr} too large?)")
        run.row(loss=value, step_seconds=round(time.perf_counter() - ts, 3))
        if run.steps % 10 == 0:
            print(f"step {run.steps}/{args.steps}: loss {value:.4f} "
                  f"({run.train_seconds / run.steps:.2f} s/step)", flush=True)
        if run.steps == args.steps or (args.eval_every > 0 and run.steps % args.eval_every == 0):
            evaluate()


def main():
    args = parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    import peft
    import transformers

    os.makedirs(args.out, exist_ok=True)
    run = Run(os.path.join(args.out, "metrics.jsonl"))
    write_json(os.path.join(args.out, "run.json"), vars(args) | {
        "tool": "bench/first_order_sst2.py", "optimizer": "torch.optim.AdamW", "torch": torch.__version__,
        "transformers": transformers.__version__, "peft": peft.__version__})
    tok = load_tokenizer(args.tokenizer, args.special_tokens)
    train_ex, test_ex = read_data(args, tok)
    t0 = time.perf_counter()
    wrapped, base, params = load_model(args)
    print(f"loaded {args.gguf} in {time.perf_counter() - t0:.1f} s: {args.mode}, "
          f"{sum(p.numel() for p in params) / 1e6:.3f}M trainable parameters, {args.threads} threads", flush=True)
    train(args, wrapped, Scorer(base, share_prompt=True), params, train_ex, test_ex, run)
    print(f"done: {args.steps} steps, {run.train_seconds:.1f} s of training, peak RSS {peak_rss_mib():.0f} MiB")


if __name__ == "__main__":
    main()
