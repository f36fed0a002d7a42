"""PyTorch MeZO reference for accuracy: MeZO's ZO-SGD (bench/mezo_reference.py's MeZO class)
fine-tuning a Hugging Face causal LM on SST-2 with exactly the examples, prompts and loss of
`distzo train --task sst2`, to compare accuracies at equal steps (see bench/README.md,
"Accuracy on SmolLM2-135M").

    /work/venv/bin/python bench/mezo_sst2.py \
        --gguf /work/shared/assets/smollm2-135m/SmolLM2-135M-Instruct.Q4_1.gguf \
        --tokenizer /work/shared/assets/smollm2-135m/hf-tokenizer \
        --data /work/shared/assets/sst2/train.tsv --test /work/shared/assets/sst2/dev.tsv \
        --lr 1e-6 --steps 2000 --out /work/runs/NAME [--resume] [--threads 1]

What is the same as distzo's (src/run/train_data.c, src/data/sample.c, src/task/classify.c):
  - the draw: --train-examples + --dev-examples rows of the training file without replacement
    by a partial Fisher-Yates on splitmix64 seeded with --data-seed; the first part trains,
    the second selects (best dev); --test (GLUE dev) is what accuracy is reported on;
  - the order: step t uses examples t*batch .. t*batch+batch-1 of endless epochs, epoch e a
    Fisher-Yates shuffle seeded with data_seed ^ (0xd1b54a32d192ed03 * (e + 1));
  - the prompt: the template with the stripped sentence; candidate k is the template plus
    " " + label word k, its scored tokens are those after the common prefix with the prompt's
    tokens, its score the mean log-prob of those tokens; the loss of a step is the batch mean
    of the cross-entropy over the candidates' scores (MeZO's --train_as_classification); the
    prediction is the argmax score;
  - the step: lr, eps, batch; the logged loss is (loss1 + loss2) / 2, as distzo's metrics.
What differs: the perturbations (MeZO's torch.manual_seed + torch.normal per parameter, seeds
from np.random; distzo uses counter-based Philox), so the two trajectories are comparable
statistically, not bitwise; and the weights are transformers' fp32 dequantization of the GGUF.

Run folder (--out): run.json (the settings), drawn.json (the drawn examples' line numbers in
the training file), metrics.jsonl (one row per step: step, loss, g, seconds; rows with
dev_accuracy / test_accuracy at each evaluation, step 0 the zero-shot one), state.pt (the
weights, the step and the numpy RNG state every --checkpoint-every steps, written to a temp
name, fsync'd and renamed). --resume continues from state.pt; with the same thread count the
continuation is the one the uninterrupted run would have made.

--check N evaluates nothing and trains nothing: it prints the unperturbed loss of the batches
of steps 0..N-1 at the initial weights (compare with distzo's metrics.jsonl: its step-1 row's
loss is at the same weights, perturbed by +-eps) and, with --predictions FILE, writes the per-example
scores on --test in the layout of `distzo eval --predictions` to compare example by example.
"""

import argparse
import json
import os
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mezo_reference import MeZO, PhaseTimer  # noqa: E402  (MeZO's zo_step/zo_update, unchanged)

MASK64 = (1 << 64) - 1


# ---------------------------------------------------------------------------------------
# distzo's draw (src/core/rng.h, src/data/sample.c, src/run/train_data.c), bit for bit
# ---------------------------------------------------------------------------------------
class SplitMix64:
    def __init__(self, seed):
        self.state = seed & MASK64

    def next(self):
        self.state = (self.state + 0x9E3779B97F4A7C15) & MASK64
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
        return z ^ (z >> 31)

    def below(self, bound):
        threshold = ((1 << 64) - bound) % bound  # draws below 2^64 mod bound are rejected
        while True:
            r = self.next()
            if r >= threshold:
                return r % bound


def sample_indices(count, n, seed):
    """dz_dataset_sample: the first n of a partial Fisher-Yates over 0..count-1."""
    n = min(n, count)
    order = list(range(count))
    rng = SplitMix64(seed)
    for i in range(n):
        j = i + rng.below(count - i)
        order[i], order[j] = order[j], order[i]
    return order[:n]


def epoch_order(n, data_seed, epoch):
    """dz_trainer_draw_batch's shuffle of epoch `epoch`."""
    rng = SplitMix64(data_seed ^ ((0xD1B54A32D192ED03 * (epoch + 1)) & MASK64))
    order = list(range(n))
    for i in range(n - 1, 0, -1):
        j = rng.below(i + 1)
        order[i], order[j] = order[j], order[i]
    return order


class BatchOrder:
    def __init__(self, n, batch, data_seed):
        self.n, self.batch, self.seed = n, batch, data_seed
        self.epoch, self.order = None, None

    def examples(self, step):
        out = []
        for b in range(self.batch):
            k = step * self.batch + b
            epoch, pos = divmod(k, self.n)
            if epoch != self.epoch:
                self.order, self.epoch = epoch_order(self.n, self.seed, epoch), epoch
            out.append(self.order[pos])
        return out


def load_sst2(path):
    """GLUE SST-2 tsv with a "sentence<TAB>label" header: [(sentence, label, line)]."""
    rows = []
    with open(path, encoding="utf-8") as f:
        header = f.readline().rstrip("\r\n")
        if header != "sentence\tlabel":
            sys.exit(f"{path}:1: expected the header 'sentence<TAB>label', got {header[:60]!r}")
        for lineno, line in enumerate(f, start=2):
            line = line.rstrip("\n").rstrip("\r")
            if not line:
                continue
            sentence, _, label = line.rpartition("\t")
            if label not in ("0", "1"):
                sys.exit(f"{path}:{lineno}: label must be 0 or 1, got {label[:20]!r}")
            rows.append((sentence, int(label), lineno))
    return rows


# ---------------------------------------------------------------------------------------
# Prompts and scoring (src/data/prompt.c, src/task/classify.c)
# ---------------------------------------------------------------------------------------
def load_tokenizer(folder, special_tokens=False):
    """tokenizer.json, reading special tokens written in a prompt ("<|im_start|>") as plain
    text, as distzo does by default (dz_tokenizer_encode without DZ_ENCODE_SPECIAL), or with
    special_tokens as their ids, as distzo's --special-tokens does: a template holding one
    is tokenized the same on both sides."""
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(os.path.join(folder, "tokenizer.json"))
    tok.encode_special_tokens = not special_tokens
    return tok


def build_examples(rows, tokenizer, template, words):
    """Per example: the prompt's token ids and, per candidate, (full ids, number scored)."""
    out = []
    for sentence, label, line in rows:
        prompt = template.replace("{text}", sentence.strip())
        ctx = tokenizer.encode(prompt).ids
        cands = []
        for w in words:
            full = tokenizer.encode(prompt + w).ids
            pre = 0
            while pre < len(ctx) and pre < len(full) and ctx[pre] == full[pre]:
                pre += 1
            if pre == len(full) or pre < 1:
                sys.exit(f"label word {w!r} adds no tokens after the prompt")
            cands.append((full, len(full) - pre))
        out.append({"ctx": ctx, "cands": cands, "label": label, "line": line})
    return out


class Scorer:
    """Mean log-prob of each candidate's tokens. When every candidate is one token that
    continues the whole prompt (SmolLM2 with " terrible"/" great"), all candidates of an
    example are scored from one forward of the prompt: the same numbers as one sequence per
    candidate (MeZO's way; --no-share-prompt), since a causal model's last prompt row does not
    see the candidate."""

    def __init__(self, model, share_prompt):
        self.model, self.share = model, share_prompt

    def scores(self, examples):
        share = self.share and all(n == 1 and full[:-1] == ex["ctx"]
                                   for ex in examples for full, n in ex["cands"])
        if share:
            seqs = [ex["ctx"] for ex in examples]
        else:
            seqs = [full for ex in examples for full, _ in ex["cands"]]
        T = max(len(s) for s in seqs)
        ids = torch.zeros((len(seqs), T), dtype=torch.long)
        mask = torch.zeros((len(seqs), T), dtype=torch.long)
        for i, s in enumerate(seqs):
            ids[i, :len(s)] = torch.tensor(s)
            mask[i, :len(s)] = 1
        hidden = self.model.model(input_ids=ids, attention_mask=mask).last_hidden_state
        rows, targets, owner = [], [], []  # (sequence, position) rows scored, their token, their candidate
        K = len(examples[0]["cands"])
        for e, ex in enumerate(examples):
            for k, (full, n) in enumerate(ex["cands"]):
                seq = e if share else e * K + k
                for p in range(len(full) - n, len(full)):
                    rows.append((seq, p - 1))
                    targets.append(full[p])
                    owner.append(e * K + k)
        r = torch.tensor(rows)
        logits = self.model.lm_head(hidden[r[:, 0], r[:, 1]])
        lp = torch.log_softmax(logits.float(), dim=-1).gather(1, torch.tensor(targets)[:, None])[:, 0]
        sums = torch.zeros(len(examples) * K, dtype=torch.float64).index_add_(0, torch.tensor(owner), lp.double())
        counts = torch.zeros(len(examples) * K, dtype=torch.float64).index_add_(
            0, torch.tensor(owner), torch.ones(len(owner), dtype=torch.float64))
        return (sums / counts).float().view(len(examples), K)

    def loss(self, examples):
        s = self.scores(examples)
        labels = torch.tensor([ex["label"] for ex in examples])
        return torch.nn.functional.cross_entropy(s.double(), labels).float()

    def evaluate(self, examples, batch):
        """(accuracy, per-example scores)."""
        all_scores = []
        with torch.inference_mode():
            for i in range(0, len(examples), batch):
                all_scores.append(self.scores(examples[i:i + batch]))
        s = torch.cat(all_scores)
        preds = s.argmax(dim=1)
        labels = torch.tensor([ex["label"] for ex in examples])
        return float((preds == labels).double().mean()), s


class ClassificationMeZO(MeZO):
    """MeZO with the classification loss in place of model(**inputs).loss; zo_step,
    zo_perturb_parameters and zo_update are MeZO's own (bench/mezo_reference.py)."""

    def __init__(self, scorer, *a, **kw):
        super().__init__(*a, **kw)
        self.scorer = scorer

    def zo_forward(self, model, inputs):
        model.eval()
        with torch.inference_mode():
            loss = self.scorer.loss(inputs)
        return loss.detach()


# ---------------------------------------------------------------------------------------
# Run folder
# ---------------------------------------------------------------------------------------
def write_atomic(path, write):
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        write(f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    dfd = os.open(os.path.dirname(os.path.abspath(path)), os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def write_json(path, obj):
    write_atomic(path, lambda f: f.write((json.dumps(obj, indent=2) + "\n").encode()))


class Metrics:
    def __init__(self, path, keep_below_step):
        """Appends to metrics.jsonl, first dropping rows of steps a resume will redo."""
        rows = []
        if os.path.exists(path) and keep_below_step is not None:
            with open(path) as f:
                rows = [json.loads(l) for l in f if l.strip()]
            rows = [r for r in rows if r["step"] < keep_below_step or (r["step"] == keep_below_step and r.get("eval"))]
        write_atomic(path, lambda f: f.write("".join(json.dumps(r) + "\n" for r in rows).encode()))
        self.f = open(path, "a")

    def append(self, row):
        self.f.write(json.dumps(row) + "\n")
        self.f.flush()
        os.fsync(self.f.fileno())


SETTINGS = ("gguf", "tokenizer", "data", "test", "template", "label_words", "train_examples", "dev_examples",
            "data_seed", "seed", "lr", "eps", "weight_decay", "batch", "share_prompt")


def add_setup_args(p):
    """The model, data and prompt options (also bench/first_order_sst2.py's)."""
    p.add_argument("--gguf", required=True, help="GGUF model file (transformers dequantizes it to fp32)")
    p.add_argument("--tokenizer", required=True, help="folder with the HF tokenizer.json")
    p.add_argument("--data", required=True, help="SST-2 train.tsv (the pool the examples are drawn from)")
    p.add_argument("--test", required=True, help="SST-2 dev.tsv (GLUE dev: the reported accuracy)")
    p.add_argument("--template", default="{text} It was")
    p.add_argument("--label-words", default="terrible,great")
    p.add_argument("--special-tokens", action="store_true",
                   help="special tokens in --template are their ids (distzo's --special-tokens); default: text")
    p.add_argument("--train-examples", type=int, default=1000)


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_setup_args(p)
    p.add_argument("--dev-examples", type=int, default=500)
    p.add_argument("--data-seed", type=int, default=42)
    p.add_argument("--seed", type=int, default=0, help="np.random seed of MeZO's step seeds")
    p.add_argument("--lr", type=float, default=1e-6)
    p.add_argument("--eps", type=float, default=1e-3)
    p.add_argument("--weight-decay", type=float, default=0.0)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--steps", type=int, default=2000)
    p.add_argument("--eval-every", type=int, default=500)
    p.add_argument("--eval-batch", type=int, default=16, help="examples per evaluation forward")
    p.add_argument("--checkpoint-every", type=int, default=100)
    p.add_argument("--no-share-prompt", dest="share_prompt", action="store_false",
                   help="one sequence per candidate (MeZO's way) even for one-token candidates")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", help="run folder")
    p.add_argument("--resume", action="store_true", help="continue the run in --out (--steps may extend it)")
    p.add_argument("--check", type=int, default=0, metavar="N",
                   help="print the initial-weight loss of the first N batches and stop (no --out needed)")
    p.add_argument("--predictions", help="with --check: write per-example scores on --test (tsv)")
    return p.parse_args()


def main():
    args = parse_args()
    torch.set_num_threads(args.threads)
    import transformers
    from transformers import AutoModelForCausalLM

    transformers.utils.logging.disable_progress_bar()
    if not args.check and not args.out:
        sys.exit("--out is needed (or --check N)")
    state_path = os.path.join(args.out, "state.pt") if args.out else None
    if args.resume:
        with open(os.path.join(args.out, "run.json")) as f:
            saved = json.load(f)
        for k in SETTINGS:  # a resumed run keeps its settings; only --steps may change
            setattr(args, k, saved[k])
    words = [w if w.startswith(" ") else " " + w for w in args.label_words.split(",")]

    tok = load_tokenizer(args.tokenizer, args.special_tokens)
    pool = load_sst2(args.data)
    drawn = sample_indices(len(pool), args.train_examples + args.dev_examples, args.data_seed)
    train = build_examples([pool[i] for i in drawn[:args.train_examples]], tok, args.template, words)
    dev = build_examples([pool[i] for i in drawn[args.train_examples:]], tok, args.template, words)
    test = build_examples(load_sst2(args.test), tok, args.template, words)
    order = BatchOrder(len(train), args.batch, args.data_seed)

    t0 = time.perf_counter()
    model = AutoModelForCausalLM.from_pretrained(os.path.dirname(os.path.abspath(args.gguf)),
                                                 gguf_file=os.path.basename(args.gguf), dtype=torch.float32)
    model.eval()
    for p in model.parameters():
        p.requires_grad_(True)  # MeZO perturbs what requires grad (all, for full-parameter MeZO)
    print(f"loaded {args.gguf} in {time.perf_counter() - t0:.1f} s: "
          f"{sum(p.numel() for p in model.parameters()) / 1e6:.1f}M params, {args.threads} threads", flush=True)
    scorer = Scorer(model, args.share_prompt)

    if args.check:
        with torch.inference_mode():
            for step in range(args.check):
                ex = order.examples(step)
                print(f"step {step}: examples {ex[:4]}... loss at the initial weights "
                      f"{float(scorer.loss([train[i] for i in ex])):.6f}", flush=True)
        if args.predictions:
            acc, s = scorer.evaluate(test, args.eval_batch)
            with open(args.predictions, "w") as f:
                f.write("index\tlabel\tprediction\t" + "\t".join(f"score{k}" for k in range(len(words))) + "\n")
                for i, ex in enumerate(test):
                    f.write(f"{i}\t{ex['label']}\t{int(s[i].argmax())}\t" +
                            "\t".join(f"{float(v):.9g}" for v in s[i]) + "\n")
            print(f"test accuracy {acc:.4f} ({len(test)} examples); scores in {args.predictions}")
        return

    mezo = ClassificationMeZO(scorer, model, args.lr, args.eps, args.weight_decay, args.seed)
    start, best, loaded = 0, {"dev": -1.0, "test": None, "step": 0}, False
    if args.resume and os.path.exists(state_path):
        st = torch.load(state_path, weights_only=False)
        model.load_state_dict(st["weights"])
        mezo.rng.set_state(st["np_rng"])
        start, best, loaded = st["step"], st["best"], True
        print(f"resumed at step {start} from {state_path}", flush=True)
    elif not args.resume:
        os.makedirs(args.out, exist_ok=True)
        if os.path.exists(os.path.join(args.out, "run.json")):
            sys.exit(f"{args.out} already has a run (use --resume)")
        write_json(os.path.join(args.out, "run.json"), {k: getattr(args, k) for k in SETTINGS} | {
            "tool": "bench/mezo_sst2.py", "torch": torch.__version__, "transformers": transformers.__version__})
        write_json(os.path.join(args.out, "drawn.json"), {
            "train_lines": [pool[i][2] for i in drawn[:args.train_examples]],
            "dev_lines": [pool[i][2] for i in drawn[args.train_examples:]]})
    # a resume keeps the rows up to its checkpoint; one killed before the first checkpoint starts over
    metrics = Metrics(os.path.join(args.out, "metrics.jsonl"), (start if loaded else -1) if args.resume else None)

    def evaluate(step):
        te = time.perf_counter()
        dev_acc = scorer.evaluate(dev, args.eval_batch)[0] if dev else None  # --dev-examples 0: no selection set
        test_acc, _ = scorer.evaluate(test, args.eval_batch)
        if dev_acc is not None and dev_acc > best["dev"]:
            best.update(dev=dev_acc, test=test_acc, step=step)
        metrics.append({"step": step, "eval": True, "dev_accuracy": dev_acc, "test_accuracy": test_acc,
                        "best_dev_accuracy": best["dev"], "best_test_accuracy": best["test"],
                        "best_step": best["step"], "eval_seconds": time.perf_counter() - te})
        chosen = "no dev set" if dev_acc is None else (
            f"dev accuracy {dev_acc:.4f}, best dev {best['dev']:.4f} at step {best['step']}, its test {best['test']:.4f}")
        print(f"step {step}: test accuracy {test_acc:.4f} ({chosen}) [{time.perf_counter() - te:.0f} s]", flush=True)

    def checkpoint(step):
        st = {"step": step, "np_rng": mezo.rng.get_state(), "best": dict(best), "weights": model.state_dict()}
        write_atomic(state_path, lambda f: torch.save(st, f))

    if start == 0:
        evaluate(0)  # zero-shot: distzo's "before"
    t_run = time.perf_counter()
    for step in range(start, args.steps):
        ts = time.perf_counter()
        batch = [train[i] for i in order.examples(step)]
        loss1, loss2 = mezo.zo_step(model, batch, PhaseTimer())
        mezo.zo_update(model)
        done = step + 1
        metrics.append({"step": step, "loss": 0.5 * (float(loss1) + float(loss2)), "g": mezo.projected_grad,
                        "lr": args.lr, "step_seconds": time.perf_counter() - ts})
        if done % 10 == 0:
            print(f"step {done}/{args.steps}: loss {0.5 * (float(loss1) + float(loss2)):.4f} "
                  f"g {mezo.projected_grad:.4g} ({(time.perf_counter() - t_run) / (done - start):.1f} s/step)",
                  flush=True)
        if args.eval_every > 0 and (done % args.eval_every == 0 or done == args.steps):
            evaluate(done)
        if args.checkpoint_every > 0 and (done % args.checkpoint_every == 0 or done == args.steps):
            checkpoint(done)
    print(f"done: {args.steps} steps; " + ("no dev set (--dev-examples 0)" if not dev else
          f"best dev {best['dev']:.4f} at step {best['step']}, its test {best['test']}"))


if __name__ == "__main__":
    main()
