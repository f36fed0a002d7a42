#!/usr/bin/env python3
"""Golden values for tests/test_tasks.c: each preset's prompts, candidates and labels for the
fixtures in tests/data/tasks/, built the way MeZO's large_models/templates.py and tasks.py
build them (from the fields Hugging Face's super_glue / squad / drop loaders give), and
F1 / exact match of crafted (prediction, gold) cases by the official SQuAD v1.1
evaluate-v1.1.py definitions. Run: python3 tools/task_golden.py > tests/data/tasks/golden.json
"""
import json, os, re, string, sys
from collections import Counter

D = os.path.join(os.path.dirname(__file__), "..", "tests", "data", "tasks")

# ---- evaluate-v1.1.py ----
def normalize_answer(s):
    def remove_articles(text): return re.sub(r'\b(a|an|the)\b', ' ', text)
    def white_space_fix(text): return ' '.join(text.split())
    def remove_punc(text):
        exclude = set(string.punctuation)
        return ''.join(ch for ch in text if ch not in exclude)
    return white_space_fix(remove_articles(remove_punc(s.lower())))

def f1_score(prediction, ground_truth):
    p = normalize_answer(prediction).split(); g = normalize_answer(ground_truth).split()
    common = Counter(p) & Counter(g); num_same = sum(common.values())
    if num_same == 0: return 0
    precision = 1.0 * num_same / len(p); recall = 1.0 * num_same / len(g)
    return (2 * precision * recall) / (precision + recall)

def exact_match_score(prediction, ground_truth):
    return normalize_answer(prediction) == normalize_answer(ground_truth)

def rows(path): return [json.loads(l) for l in open(path, encoding="utf-8") if l.strip()]

# ---- MeZO's templates, on the fields of the public jsonl ----
def rte(r):
    return [(f"{r['premise']}\nDoes this mean that \"{r['hypothesis']}\" is true? Yes or No?\n", ["Yes", "No"],
             ["entailment", "not_entailment"].index(r["label"]))]
def cb(r):
    return [(f"Suppose {r['premise']} Can we infer that \"{r['hypothesis']}\"? Yes, No, or Maybe?\n", ["Yes", "No", "Maybe"],
             ["entailment", "contradiction", "neutral"].index(r["label"]))]
def boolq(r):  # BoolQTemplateV3 (MeZO's default, template_version 2)
    q = r["question"]
    if not q.endswith("?"): q = q + "?"
    q = q[0].upper() + q[1:]
    return [(f"{r['passage']} {q}\n", ["Yes", "No"], 0 if r["label"] else 1)]
def wic(r):
    return [(f"Does the word \"{r['word']}\" have the same meaning in these two sentences? Yes, No?\n{r['sentence1']}\n{r['sentence2']}\n",
             ["No", "Yes"], int(r["label"]))]
def wsc(r):
    t = r["target"]
    return [(f"{r['text']}\nIn the previous sentence, does the pronoun \"{t['span2_text'].lower()}\" refer to {t['span1_text']}? Yes or No?\n",
             ["No", "Yes"], int(r["label"]))]
def multirc(r):
    out = []
    for q in r["passage"]["questions"]:
        for a in q["answers"]:
            out.append((f"{r['passage']['text']}\nQuestion: {q['question']}\nI found this answer \"{a['text']}\". Is that correct? Yes or No?\n",
                        ["No", "Yes"], int(a["label"])))
    return out
def copa(r):
    premise = r["premise"].rstrip()
    if premise.endswith("."): premise = premise[:-1]
    prompt = premise + {"effect": " so ", "cause": " because "}[r["question"]]
    def cap(c):
        w = c.split(" ")
        if w[0] != "I": w[0] = w[0].lower()
        return " ".join(w)
    return [(prompt, [cap(r["choice1"]), cap(r["choice2"])], r["label"])]
def record(r):
    p = r["passage"]; text = p["text"]
    ents = sorted(set(text[e["start"]:e["end"] + 1] for e in p["entities"]))
    out = []
    for qa in r["qas"]:
        answers = sorted(set(a["text"] for a in qa["answers"]))
        prompt = text.replace("@highlight\n", "- ") + "\n-"
        cands = [" " + qa["query"].replace("@placeholder", e) for e in ents]
        label = next(i for i, e in enumerate(ents) if e in answers)
        out.append((prompt, cands, label))
    return out
def squad(doc):
    out = []
    for art in doc["data"]:
        for p in art["paragraphs"]:
            for qa in p["qas"]:
                ans = [a["text"] for a in qa["answers"]]
                out.append((f"Title: {art['title']}\nContext: {p['context']}\nQuestion: {qa['question'].strip()}\nAnswer:", ans))
    return out
def drop_answers(a):
    if a["number"]: return [a["number"]]
    if a["spans"]: return list(a["spans"])
    d = " ".join(x for x in (a["date"]["day"], a["date"]["month"], a["date"]["year"]) if x)
    return [d] if d else []
def drop(doc):
    out = []
    for sec in doc.values():
        for qa in sec["qa_pairs"]:
            ans = drop_answers(qa["answer"]) if "answer" in qa else []
            for v in qa.get("validated_answers", []): ans += drop_answers(v)
            if ans: out.append((f"Passage: {sec['passage']}\nQuestion: {qa['question'].strip()}\nAnswer:", ans))
    return out

def main():
    g = {"presets": {}, "qa": []}
    for name, folder, fn in [("rte", "RTE", rte), ("cb", "CB", cb), ("boolq", "BoolQ", boolq), ("wic", "WiC", wic),
                             ("wsc", "WSC", wsc), ("multirc", "MultiRC", multirc), ("copa", "COPA", copa),
                             ("record", "ReCoRD", record)]:
        ex = [e for r in rows(os.path.join(D, folder, "train.jsonl")) for e in fn(r)]
        g["presets"][name] = {"file": f"{folder}/train.jsonl",
                              "examples": [{"prompt": p, "cands": c, "label": l} for p, c, l in ex]}
    for name, path, fn in [("squad", "SQuAD/train-v1.1.json", squad), ("drop", "DROP/drop_dataset_train.json", drop)]:
        ex = fn(json.load(open(os.path.join(D, path), encoding="utf-8")))
        g["presets"][name] = {"file": path, "examples": [{"prompt": p, "answers": a} for p, a in ex]}
    cases = [("the Cat sat", "cat sat"), ("A cat, sat!", "the cat sat on"), ("Paris", "paris."),
             ("an apple a day", "apple day"), ("the_the cat", "the cat"), ("  New   York ", "new york city"),
             ("", ""), ("the", "a"), ("dog dog cat", "dog cat cat"), ("theatre", "the atre"),
             ("Zoë's café", "zoës café"), ("1,000 km", "1000 km"), ("banana", "apple")]
    for p, t in cases:
        g["qa"].append({"pred": p, "gold": t, "norm_pred": normalize_answer(p), "f1": f1_score(p, t),
                        "em": bool(exact_match_score(p, t))})
    json.dump(g, sys.stdout, indent=1, ensure_ascii=False)
    sys.stdout.write("\n")

main()
