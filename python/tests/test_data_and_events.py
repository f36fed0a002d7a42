"""Data held in Python: a Trainer fed a list of dicts, a DataFrame or a datasets.Dataset
trains the command line's run on the same rows in a file bitwise, resumes only with the
same data, and the command line refuses to resume it without that data; the generation
presets' evaluation equals `distzo eval`'s; a Python run writes the command line's
TensorBoard events."""
import json
import re
import struct
import subprocess

import numpy as np
import pytest

import distzo
from test_distzo import SETTINGS

N_ROWS = 120


@pytest.fixture(scope="module")
def model(assets):
    return distzo.load(assets / "stories260K" / "stories260K.bin", tokenizer=assets / "stories260K" / "tok512.bin")


def sst2_lines(assets, name, n):
    return (assets / "sst2" / name).read_text().splitlines(keepends=True)[:n + 1]  # the header and n rows


def as_rows(lines):
    return [{"text": s, "label": int(label)} for s, label in (line.rstrip("\n").split("\t") for line in lines[1:])]


@pytest.fixture(scope="module")
def data(assets, tmp_path_factory):
    """The same examples as files (for the command line) and as rows (for Python)."""
    folder = tmp_path_factory.mktemp("data")
    train, test = sst2_lines(assets, "train.tsv", N_ROWS), sst2_lines(assets, "dev.tsv", 24)
    (folder / "train.tsv").write_text("".join(train))
    (folder / "test.tsv").write_text("".join(test))
    return {"train_file": folder / "train.tsv", "test_file": folder / "test.tsv", "train": as_rows(train),
            "test": as_rows(test)}


def cli_run(cli, assets, data, out, steps):
    args = ["--model", str(assets / "stories260K" / "stories260K.bin"), "--tokenizer",
            str(assets / "stories260K" / "tok512.bin"), "--data", str(data["train_file"]), "--test",
            str(data["test_file"]), "--steps", str(steps)]
    for key, value in SETTINGS.items():
        args += ["--" + key.replace("_", "-"), str(value)]
    subprocess.run([cli, "train", *args, "--out", str(out), "--quiet"], check=True, capture_output=True)


def scores(run):
    """metrics.jsonl without its timings."""
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in row.items() if k not in ("seconds", "steps_per_s")} for row in rows]


def same_weights(a, b, step, metrics=True):
    assert (a / "seeds.log").read_bytes() == (b / "seeds.log").read_bytes()
    assert (a / f"checkpoint-{step}" / "model.safetensors").read_bytes() == \
        (b / f"checkpoint-{step}" / "model.safetensors").read_bytes()
    if metrics:  # (a run stopped at step 4 evaluated there, the straight one did not)
        assert scores(a) == scores(b)


class Rows:
    """A sized iterable of mappings, and nothing else."""

    def __init__(self, rows):
        self.rows = rows

    def __len__(self):
        return len(self.rows)

    def __iter__(self):
        return iter(dict(r) for r in self.rows)


class HFDataset(Rows):
    """What distzo uses of a datasets.Dataset: column_names and a column by name."""

    @property
    def column_names(self):
        return list(self.rows[0])

    def __getitem__(self, key):
        return [r[key] for r in self.rows]


def data_forms(rows):
    forms = {"list": rows, "rows": Rows(rows), "hf_dataset": HFDataset(rows)}
    try:
        import pandas
    except ImportError:
        return forms
    forms["dataframe"] = pandas.DataFrame(rows)
    return forms


def test_python_data_trains_the_file_run_bitwise(model, cli, assets, data, tmp_path):
    cli_run(cli, assets, data, tmp_path / "cli", 4)
    forms = data_forms(data["train"])
    for name, train in forms.items():
        out = tmp_path / name
        trainer = distzo.Trainer(model, train, data_forms(data["test"])[name], out=out, steps=4, **SETTINGS)
        trainer.train()
        if name == "list":  # the trained weights on the eval rows: the run's own final test score
            assert abs(trainer.evaluate()["accuracy"] - scores(out)[-1]["test_accuracy"]) < 1e-6
            # the run again from its run.json (a restart, as train --config RUN/run.json)
            distzo.Trainer(model, train, data["test"], config=out / "run.json", out=tmp_path / "again").train()
            same_weights(tmp_path / "again", tmp_path / "cli", 4)
        same_weights(out, tmp_path / "cli", 4)
        run = json.loads((out / "run.json").read_text())
        assert "train_data" not in run and "test_data" not in run
        assert len(run["train_data_fingerprint"]) == 16 and run["test_data_fingerprint"] != run["train_data_fingerprint"]
        ref = {k: v for k, v in json.loads((tmp_path / "cli" / "run.json").read_text()).items()
               if k not in ("train_data", "test_data")}
        assert {k: v for k, v in run.items() if not k.endswith("_fingerprint")} == ref
    print("data forms trained:", ", ".join(forms))


def test_python_data_resumes_only_with_the_same_data(model, cli, assets, data, tmp_path):
    cli_run(cli, assets, data, tmp_path / "straight", 8)
    run = tmp_path / "py"
    distzo.Trainer(model, data["train"], data["test"], out=run, steps=4, **SETTINGS).train()
    flipped = [dict(r) for r in data["train"]]
    flipped[7]["label"] = 1 - flipped[7]["label"]
    with pytest.raises(distzo.InvalidError, match="fingerprint"):
        distzo.Trainer.resume(run, train_data=flipped, eval_data=data["test"], steps=8)
    with pytest.raises(distzo.InvalidError, match="in memory"):
        distzo.Trainer.resume(run, steps=8)
    out = subprocess.run([cli, "train", "--resume", "--out", str(run), "--steps", "8"], capture_output=True, text=True)
    assert out.returncode != 0 and "Trainer.resume" in out.stderr and "train_data" in out.stderr
    seen = []
    distzo.Trainer.resume(run, train_data=HFDataset(data["train"]), eval_data=data["test"], steps=8,
                          callback=seen.append)
    assert seen[0]["step"] == 4 and "loss" not in seen[0]  # the report before the first resumed step
    assert [p["step"] for p in seen if "loss" in p] == [5, 6, 7, 8]
    same_weights(run, tmp_path / "straight", 8, metrics=False)


def test_python_data_errors(model, data, tmp_path):
    with pytest.raises(ValueError, match="no key 'label'"):
        distzo.Trainer(model, [{"text": "a"}], out=tmp_path / "r1", steps=1)
    with pytest.raises(ValueError, match="no column 'sentence'"):
        distzo.Trainer(model, HFDataset(data["train"]), out=tmp_path / "r2", steps=1, text_key="sentence")
    with pytest.raises(ValueError, match="example 0: no key 'answers'"):  # an sst2 row has no gold answers
        distzo.Trainer(model, data["train"], out=tmp_path / "r3", steps=1, task="squad")
    with pytest.raises(distzo.FormatError, match="<python data>:1"):  # an sst2 row is no RTE row
        model.evaluate("rte", data["test"])
    # no rows at all: an error, not the interpreter killed (a division by zero examples)
    for task in ("sst2", "classify"):
        with pytest.raises(distzo.InvalidError, match="no examples"):
            model.evaluate(task, [])
    with pytest.raises(distzo.InvalidError, match="no texts"):
        model.evaluate("lm", [])
    with pytest.raises(distzo.InvalidError, match="no token to predict"):
        model.evaluate("lm", [{"text": ""}])
    with pytest.raises(distzo.InvalidError, match="no examples"):
        distzo.Trainer(model, [], data["test"], out=tmp_path / "r4", steps=1, batch=2).train()
    assert not (tmp_path / "r4").exists()  # a refused start leaves no run folder
    # rows checked as the file loaders check them, naming the example and key
    for row, what in (({"text": "good", "label": -1}, "'label' must be an integer label in 0..2147483647, not -1"),
                      ({"text": "good", "label": 1.7}, "not 1.7"), ({"text": "good", "label": "x"}, "not 'x'"),
                      ({"text": None, "label": 1}, "'text' must be a non-empty string, not None"),
                      ({"text": "  ", "label": 1}, "non-empty string")):
        with pytest.raises(ValueError, match="example 1: .*" + re.escape(what)):
            model.evaluate("sst2", [{"text": "fine", "label": 0}, row])
    assert model.evaluate("sst2", [{"text": "fine", "label": "1"}, {"text": "bad", "label": 0.0}])["examples"] == 2
    # a setting the library refuses is named as the Trainer's option, not as a temporary file
    with pytest.raises(distzo.Error, match="Trainer: option 'lr'") as e:
        distzo.Trainer(model, data["train"], out=tmp_path / "r5", steps=1, lr="1e-5").train()
    assert "trainer-options.json" not in str(e.value)
    with pytest.raises(distzo.InvalidError, match="Trainer: option 'lr' is nan"):
        distzo.Trainer(model, data["train"], out=tmp_path / "r6", steps=1, lr=float("nan")).train()
    # generation's own checks, their values written out
    with pytest.raises(ValueError, match=r"temperature -1: expected a finite number >= 0"):
        model.generate("Once", max_tokens=2, temperature=-1)
    with pytest.raises(ValueError, match=r"top_p 2 is outside \(0, 1\]"):
        model.generate("Once", max_tokens=2, top_p=2)
    with pytest.raises(ValueError, match="seed -1 is outside 0..2\\^64-1"):
        model.generate("Once", max_tokens=2, seed=-1)
    with pytest.raises(TypeError, match="token id at position 0 is 1.5"):  # not truncated to 1
        model.logits([1.5])
    with pytest.raises(ValueError, match=r"set_threads\(-1\)"):
        distzo.set_threads(-1)
    with pytest.raises(TypeError, match="callback 5 is not callable"):
        distzo.Trainer(model, data["train"], out=tmp_path / "r7", steps=1, callback=5)
    assert not (tmp_path / "r7").exists()


def events(run):
    """(step, tag, value) of every scalar in the run's TensorBoard event files, read here
    from the TFRecord framing and the Event protobuf (wall times left out)."""
    found = []
    for path in sorted(run.glob("events.out.tfevents.*")):
        blob, at = path.read_bytes(), 0
        while at + 12 <= len(blob):
            (n,) = struct.unpack_from("<Q", blob, at)
            found += event_scalars(blob[at + 12:at + 12 + n])
            at += 12 + n + 4
        assert at == len(blob), f"{path}: a torn record"
    return found


def varint(b, i):
    v = shift = 0
    while True:
        v |= (b[i] & 0x7F) << shift
        shift += 7
        i += 1
        if b[i - 1] < 0x80:
            return v, i


def fields(b):
    i = 0
    while i < len(b):
        key, i = varint(b, i)
        kind = key & 7
        if kind == 0:
            v, i = varint(b, i)
        elif kind == 1:
            v, i = b[i:i + 8], i + 8
        elif kind == 5:
            v, i = b[i:i + 4], i + 4
        else:
            n, i = varint(b, i)
            v, i = b[i:i + n], i + n
        yield key >> 3, v


def event_scalars(event):
    step, out = 0, []
    for num, v in fields(event):
        if num == 2:
            step = v
        if num == 5:
            for _, value in fields(v):
                f = dict(fields(value))
                out.append((step, f[1].decode(), struct.unpack("<f", f[2])[0]))
    return out


def test_python_run_writes_the_cli_tensorboard_events(model, cli, assets, data, tmp_path):
    cli_run(cli, assets, data, tmp_path / "cli", 4)
    distzo.Trainer(model, data["train_file"], data["test_file"], out=tmp_path / "py", steps=4, **SETTINGS).train()
    timing = {"train/steps_per_s"}  # the clock's, not the run's
    py, ref = ([e for e in events(tmp_path / run) if e[1] not in timing] for run in ("py", "cli"))
    assert len(list((tmp_path / "py").glob("events.out.tfevents.*"))) == 1
    assert py == ref and {"train/loss", "eval/test_accuracy"} <= {tag for _, tag, _ in py}
    losses = [row["loss"] for row in scores(tmp_path / "py") if row["loss"] is not None]
    assert np.allclose([v for _, tag, v in py if tag == "train/loss"], losses, rtol=1e-6, atol=0)


def squad_rows(path):
    """The questions of a SQuAD v1.1 file as Python rows: MeZO's prompt, built here, and
    the gold answers as Hugging Face's squad holds them."""
    rows = []
    for article in json.loads(path.read_text())["data"]:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                prompt = f"Title: {article['title']}\nContext: {paragraph['context']}\n" \
                         f"Question: {qa['question'].strip()}\nAnswer:"
                rows.append({"text": prompt, "answers": {"text": [a["text"] for a in qa["answers"]]}})
    return rows


@pytest.mark.parametrize("task,name", [("squad", "story_qa/dev-v1.1.json"), ("drop", "DROP/drop_dataset_dev.json")])
def test_evaluate_generation_equals_cli_eval(model, cli, task, name, tmp_path):
    from conftest import REPO

    path = REPO / "tests" / "data" / "tasks" / name
    out = subprocess.run([cli, "eval", model.path, "--tokenizer",
                          model.info["tokenizer"], "--task", task, "--data", str(path), "--gen-tokens", "8", "--json",
                          "--predictions", str(tmp_path / "p.tsv")], check=True, capture_output=True, text=True)
    ref = json.loads(out.stdout)
    rows = [line.split("\t") for line in (tmp_path / "p.tsv").read_text().splitlines()[1:]]
    r = model.evaluate(task, path, gen_tokens=8)
    assert r["examples"] == ref["examples"] == len(rows) > 0
    assert abs(r["f1"] - ref["f1"]) < 1e-6 and abs(r["exact_match"] - ref["exact_match"]) < 1e-6
    assert r["answers"] == [row[3].replace("\\t", "\t").replace("\\n", "\n") for row in rows]
    assert np.allclose(r["f1s"], [float(row[1]) for row in rows], rtol=1e-8, atol=0)
    if task == "squad":
        same = model.evaluate("squad", squad_rows(path), gen_tokens=8)
        assert same["answers"] == r["answers"] and np.array_equal(same["f1s"], r["f1s"])


def test_preset_rows_train_and_evaluate_as_the_file(model, cli, tmp_path):
    """A SuperGLUE preset's rows held in Python (each read with the preset's own fields, as
    its jsonl file's lines) give the run and the scores of the file."""
    from conftest import REPO

    folder = REPO / "tests" / "data" / "tasks" / "RTE"
    train = [json.loads(line) for line in (folder / "train.jsonl").read_text().splitlines() if line.strip()]
    val = [json.loads(line) for line in (folder / "val.jsonl").read_text().splitlines() if line.strip()]
    few = dict(task="rte", train_examples=3, dev_examples=1, batch=2, steps=2, lr=1e-3, seed=3, eval_every=0,
               checkpoint_every=2)
    args = [f"--{k.replace('_', '-')}={v}" for k, v in few.items()]
    subprocess.run([cli, "train", "--model", model.path, "--tokenizer", model.info["tokenizer"], "--data",
                    str(folder / "train.jsonl"), "--test", str(folder / "val.jsonl"), *args, "--out",
                    str(tmp_path / "cli"), "--quiet"], check=True, capture_output=True)
    distzo.Trainer(model, HFDataset(train), val, out=tmp_path / "py", **few).train()
    same_weights(tmp_path / "py", tmp_path / "cli", 2)
    distzo.Trainer.resume(tmp_path / "py", train_data=train, eval_data=val, steps=3)
    r, ref = model.evaluate("rte", val), model.evaluate("rte", folder / "val.jsonl")
    assert r["examples"] == 2 and np.array_equal(r["scores"], ref["scores"])


def hf_squad(path):
    """The questions of a SQuAD v1.1 file as Hugging Face's squad rows (title, context,
    question, answers {"text", "answer_start"}): no prompt, the Trainer builds MeZO's."""
    return [{"id": qa["id"], "title": article["title"], "context": paragraph["context"], "question": qa["question"],
             "answers": {"text": [a["text"] for a in qa["answers"]],
                         "answer_start": [a["answer_start"] for a in qa["answers"]]}}
            for article in json.loads(path.read_text())["data"] for paragraph in article["paragraphs"]
            for qa in paragraph["qas"]]


def drop_golds(answer):
    """A DROP answer object's gold strings: its number, else its spans, else its date."""
    if answer["number"]:
        return [answer["number"]]
    if any(answer["spans"]):
        return [s for s in answer["spans"] if s]
    date = " ".join(answer["date"][k] for k in ("day", "month", "year") if answer["date"][k])
    return [date] if date else []


def hf_drop(path):
    """The questions of a DROP file as Hugging Face's drop rows (passage, question,
    answers_spans {"spans"}): the first answer's golds, then the validated answers'."""
    rows = []
    for section in json.loads(path.read_text()).values():
        for qa in section["qa_pairs"]:
            golds = drop_golds(qa["answer"])
            for answer in qa.get("validated_answers", [])[:3]:
                golds += drop_golds(answer)
            rows.append({"passage": section["passage"], "question": qa["question"],
                         "answers_spans": {"spans": golds, "types": ["span"] * len(golds)}})
    return rows


@pytest.mark.parametrize("task,folder,files", [
    ("squad", "story_qa", ("train-v1.1.json", "dev-v1.1.json")),
    ("drop", "DROP", ("drop_dataset_train.json", "drop_dataset_dev.json"))])
def test_generation_rows_train_as_the_file(model, cli, task, folder, files, tmp_path):
    """squad's and drop's rows held in Python (Hugging Face's shapes, or a whole prompt)
    train the run of their files bitwise, and resume with the same rows to its bits."""
    from conftest import REPO

    train_file, test_file = (REPO / "tests" / "data" / "tasks" / folder / name for name in files)
    rows = hf_squad if task == "squad" else hf_drop
    train, test = rows(train_file), rows(test_file)
    if task == "squad":  # the eval rows as whole prompts, the way Model.evaluate's test gives them
        test = squad_rows(test_file)
    few = dict(task=task, train_examples=2, dev_examples=1, batch=2, steps=4, lr=1e-3, seed=3, eval_every=2,
               checkpoint_every=2, gen_tokens=4)
    args = [f"--{k.replace('_', '-')}={v}" for k, v in few.items()]
    subprocess.run([cli, "train", "--model", model.path, "--tokenizer", model.info["tokenizer"], "--data",
                    str(train_file), "--test", str(test_file), *args, "--out", str(tmp_path / "cli"), "--quiet"],
                   check=True, capture_output=True)
    distzo.Trainer(model, HFDataset(train), test, out=tmp_path / "py", **few).train()
    same_weights(tmp_path / "py", tmp_path / "cli", 4)
    run = json.loads((tmp_path / "py" / "run.json").read_text())
    assert len(run["train_data_fingerprint"]) == 16 and "train_data" not in run
    distzo.Trainer(model, train, test, out=tmp_path / "part", **{**few, "steps": 2}).train()
    distzo.Trainer.resume(tmp_path / "part", train_data=train, eval_data=test, steps=4)
    same_weights(tmp_path / "part", tmp_path / "cli", 4)
    other = [dict(r) for r in train]
    other[0]["question"] += " Really?"
    with pytest.raises(distzo.InvalidError, match="fingerprint"):
        distzo.Trainer.resume(tmp_path / "part", train_data=other, eval_data=test, steps=6)
    with pytest.raises(ValueError, match="question"):
        distzo.Trainer(model, [{k: v for k, v in r.items() if k != "question"} for r in train], out=tmp_path / "x",
                       **few)
