"""The Python package against the command line: the same prompts give the same tokens,
the same settings the same run folders (seed log, weights, run.json) bitwise, runs resume
across the two, Ctrl-C leaves a run that resumes to the uninterrupted bits, and the
library's errors raise distzo.Error with its message."""
import json
import signal
import subprocess

import numpy as np
import pytest

import distzo

PROMPT = "Once upon a time"


@pytest.fixture(scope="module")
def model(assets):
    return distzo.load(assets / "stories260K" / "stories260K.bin", tokenizer=assets / "stories260K" / "tok512.bin")


def cli_generate(cli, assets, n):
    out = subprocess.run([cli, "generate", str(assets / "stories260K" / "stories260K.bin"), "--tokenizer",
                          str(assets / "stories260K" / "tok512.bin"), "--prompt", PROMPT, "-n", str(n),
                          "--temperature", "0", "--json"], check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def test_info(model):
    info = model.info
    assert (info["arch"], info["vocab_size"], info["n_layers"], info["params"]) == ("llama", 512, 5, 260032)
    assert info["format"] == "llama2c" and info["tokenizer"].endswith("tok512.bin")


def test_tokens_and_greedy_text_equal_the_cli(model, cli, assets):
    ref = cli_generate(cli, assets, 20)
    assert model.tokenizer.encode(PROMPT) == ref["prompt_tokens"]
    assert model.tokenizer.decode(ref["prompt_tokens"]) == PROMPT
    assert model.generate_ids(PROMPT, max_tokens=20, temperature=0) == ref["tokens"]
    assert model.generate(PROMPT, max_tokens=20, temperature=0) == ref["text"]


def test_logits_agree_with_greedy_generation(model, cli, assets):
    """The full forward's argmax at each position is the token the KV-cache generation chose."""
    ref = cli_generate(cli, assets, 12)
    ids = ref["prompt_tokens"] + ref["tokens"]
    logits = model.logits(ids)
    assert logits.shape == (len(ids), 512) and logits.dtype == np.float32 and np.isfinite(logits).all()
    n = len(ref["prompt_tokens"])
    assert list(logits[n - 1:-1].argmax(axis=1)) == ref["tokens"]


def test_evaluate_equals_the_cli(model, cli, assets, tmp_path):
    """Scores and accuracy of `distzo eval --predictions`, from the file and from the same
    examples held in Python (a list of dicts, a DataFrame-like object of columns)."""
    dev = tmp_path / "dev.tsv"
    dev.write_text("".join((assets / "sst2" / "dev.tsv").read_text().splitlines(keepends=True)[:41]))
    out = subprocess.run([cli, "eval", str(assets / "stories260K" / "stories260K.bin"), "--data", str(dev), "--json",
                          "--predictions", str(tmp_path / "p.tsv")], check=True, capture_output=True, text=True)
    ref = json.loads(out.stdout)
    rows = [line.split("\t") for line in (tmp_path / "p.tsv").read_text().splitlines()[1:]]
    ref_scores = np.array([[float(r[3]), float(r[4])] for r in rows], dtype=np.float32)
    ref_preds = [int(r[2]) for r in rows]
    examples = [{"text": line.split("\t")[0], "label": int(line.split("\t")[1])}
                for line in dev.read_text().splitlines()[1:]]

    class Columns:  # what Model.evaluate uses of a pandas DataFrame
        columns = ["text", "label"]

        def __getitem__(self, key):
            return [ex[key] for ex in examples]

    for data in (dev, examples, Columns()):
        r = model.evaluate("sst2", data)
        assert r["examples"] == ref["examples"] == 40 and abs(r["accuracy"] - ref["accuracy"]) < 1e-6
        assert np.array_equal(r["scores"], ref_scores) and list(r["predictions"]) == ref_preds
    text = tmp_path / "story.txt"
    text.write_text("Once upon a time there was a little girl. She liked to play in the park.")
    out = subprocess.run([cli, "eval", str(assets / "stories260K" / "stories260K.bin"), "--task", "lm", "--data",
                          str(text), "--json"], check=True, capture_output=True, text=True)
    ref = json.loads(out.stdout)
    r = model.evaluate("lm", [{"text": text.read_text()}])
    assert r["tokens"] == ref["tokens"] and abs(r["nll"] - ref["nll"]) < 1e-6


SETTINGS = dict(train_examples=32, dev_examples=8, data_seed=42, batch=4, lr=1e-3, eps=1e-3, seed=7, eval_every=0,
                checkpoint_every=4)


def cli_train(cli, assets, out, steps, resume=False, extra=()):
    if resume:
        args = ["--resume", "--steps", str(steps)]
    else:
        args = ["--model", str(assets / "stories260K" / "stories260K.bin"), "--tokenizer",
                str(assets / "stories260K" / "tok512.bin"), "--data", str(assets / "sst2" / "train.tsv"),
                "--steps", str(steps)]
        for key, value in SETTINGS.items():
            args += ["--" + key.replace("_", "-"), str(value)]
    subprocess.run([cli, "train", *args, *extra, "--out", str(out), "--quiet"], check=True, capture_output=True)


def py_trainer(model, assets, out, steps, **extra):
    return distzo.Trainer(model, assets / "sst2" / "train.tsv", out=out, steps=steps, **{**SETTINGS, **extra})


def same_run(a, b, step):
    assert (a / "seeds.log").read_bytes() == (b / "seeds.log").read_bytes()
    assert (a / f"checkpoint-{step}" / "model.safetensors").read_bytes() == \
        (b / f"checkpoint-{step}" / "model.safetensors").read_bytes()
    assert json.loads((a / "run.json").read_text()) == json.loads((b / "run.json").read_text())


def test_train_equals_the_cli(model, cli, assets, tmp_path):
    steps = []
    result = py_trainer(model, assets, tmp_path / "py", 4, callback=lambda p: steps.append(p["step"])).train()
    cli_train(cli, assets, tmp_path / "cli", 4)
    assert result["steps_done"] == 4 and steps[-1] == 4
    same_run(tmp_path / "py", tmp_path / "cli", 4)
    distzo.Trainer(model, config=tmp_path / "cli" / "run.json", out=tmp_path / "from_run_json").train()
    same_run(tmp_path / "from_run_json", tmp_path / "cli", 4)
    base = distzo.load(assets / "stories260K" / "stories260K.bin")
    trained = distzo.load(tmp_path / "py" / "checkpoint-4")
    assert not np.array_equal(base.logits([1, 403, 407]), trained.logits([1, 403, 407]))


def test_trainer_evaluate_equals_cli_eval_of_the_checkpoint(model, cli, assets, tmp_path):
    test = tmp_path / "test.tsv"
    test.write_text("".join((assets / "sst2" / "dev.tsv").read_text().splitlines(keepends=True)[:21]))
    trainer = py_trainer(model, assets, tmp_path / "run", 4)
    trainer.settings["test_data"] = str(test)
    trainer.train()
    r = trainer.evaluate()
    out = subprocess.run([cli, "eval", str(tmp_path / "run" / "checkpoint-4"), "--data", str(test), "--json",
                          "--predictions", str(tmp_path / "p.tsv")], check=True, capture_output=True, text=True)
    rows = [line.split("\t") for line in (tmp_path / "p.tsv").read_text().splitlines()[1:]]
    assert abs(r["accuracy"] - json.loads(out.stdout)["accuracy"]) < 1e-6 and r["examples"] == 20
    assert np.array_equal(r["scores"], np.array([[float(x[3]), float(x[4])] for x in rows], dtype=np.float32))


def test_defaults_are_the_cli_defaults(model, cli, assets, tmp_path):
    """Settings left out are the command line's: the two run.json files are equal."""
    few = dict(steps=1, train_examples=8, dev_examples=4, batch=4)
    distzo.Trainer(model, assets / "sst2" / "train.tsv", out=tmp_path / "py", **few).train()
    args = [f"--{k.replace('_', '-')}={v}" for k, v in few.items()]
    subprocess.run([cli, "train", "--model", model.path, "--tokenizer", model.info["tokenizer"], "--data",
                    str(assets / "sst2" / "train.tsv"), *args, "--out", str(tmp_path / "cli"), "--quiet"],
                   check=True, capture_output=True)
    assert json.loads((tmp_path / "py" / "run.json").read_text()) == \
        json.loads((tmp_path / "cli" / "run.json").read_text())


def base_logits(assets):
    return distzo.load(assets / "stories260K" / "stories260K.bin").logits([1, 403, 407])


def test_config_file_defaults_are_the_cli_defaults(model, cli, assets, tmp_path):
    """Under a config file too, settings it leaves out are the command line's (lr was the
    library's 1e-5 under Trainer(config=...), 3e-5 under train --config); a --no-X option
    by its Python name."""
    config = tmp_path / "exp.json"
    config.write_text(json.dumps(dict(steps=1, train_examples=8, dev_examples=4, batch=4)))
    distzo.Trainer(model, assets / "sst2" / "train.tsv", out=tmp_path / "py", config=config, no_fuse=True).train()
    subprocess.run([cli, "train", "--config", str(config), "--model", model.path, "--tokenizer", model.info["tokenizer"],
                    "--data", str(assets / "sst2" / "train.tsv"), "--no-fuse", "--out", str(tmp_path / "cli"), "--quiet"],
                   check=True, capture_output=True)
    py = json.loads((tmp_path / "py" / "run.json").read_text())
    assert py == json.loads((tmp_path / "cli" / "run.json").read_text()) and py["lr"] == 3e-5 and py["fuse"] == "unfused"
    for text, match in [("{lr: 1", "exp.json: not valid JSON"), ("[1, 2]", "exp.json: a config is a JSON object")]:
        config.write_text(text)
        with pytest.raises(distzo.InvalidError, match=match):
            distzo.Trainer(model, assets / "sst2" / "train.tsv", out=tmp_path / "bad", config=config)
    with pytest.raises(distzo.Error, match="'steps' must be an integer, not true"):
        distzo.Trainer(model, assets / "sst2" / "train.tsv", out=tmp_path / "bad", steps=True).train()


def test_a_data_folder_is_read_as_the_cli_reads_it(model, cli, assets, tmp_path):
    """train_data a folder: its train.tsv, and dev.tsv as the test file (it was refused)."""
    few = dict(steps=1, train_examples=8, dev_examples=4, batch=4, eval_every=0)
    distzo.Trainer(model, assets / "sst2", out=tmp_path / "py", **few).train()
    args = [f"--{k.replace('_', '-')}={v}" for k, v in few.items()]
    subprocess.run([cli, "train", "--model", model.path, "--tokenizer", model.info["tokenizer"], "--data",
                    str(assets / "sst2"), *args, "--out", str(tmp_path / "cli"), "--quiet"], check=True, capture_output=True)
    py = json.loads((tmp_path / "py" / "run.json").read_text())
    assert py == json.loads((tmp_path / "cli" / "run.json").read_text())
    assert py["train_data"].endswith("sst2/train.tsv") and py["test_data"].endswith("sst2/dev.tsv")


def test_runs_resume_across_python_and_the_cli(model, cli, assets, tmp_path):
    cli_train(cli, assets, tmp_path / "straight", 8)
    py_trainer(model, assets, tmp_path / "py_then_cli", 4).train()
    cli_train(cli, assets, tmp_path / "py_then_cli", 8, resume=True)
    cli_train(cli, assets, tmp_path / "cli_then_py", 4)
    distzo.Trainer.resume(tmp_path / "cli_then_py", steps=8)
    same_run(tmp_path / "py_then_cli", tmp_path / "straight", 8)
    same_run(tmp_path / "cli_then_py", tmp_path / "straight", 8)
    # the summaries' scores are the metrics file's (float32), so a resumed run's equal a straight one's
    tenths = dict(dev_examples=10)  # scores k / 10, which a float32 does not hold exactly
    straight = py_trainer(model, assets, tmp_path / "py_straight", 8, **tenths).train()
    py_trainer(model, assets, tmp_path / "py_resumed", 4, **tenths).train()
    resumed = distzo.Trainer.resume(tmp_path / "py_resumed", steps=8)
    for key in ("zero_shot_dev", "final_dev", "best_dev", "best_step"):
        assert straight[key] == resumed[key] and float(np.float32(straight[key])) == straight[key], key


def test_ctrl_c_stops_at_a_step_and_resumes_to_the_same_bits(model, cli, assets, tmp_path):
    def interrupt(p):
        if p["step"] == 3:
            signal.raise_signal(signal.SIGINT)

    with pytest.raises(KeyboardInterrupt):
        py_trainer(model, assets, tmp_path / "cut", 8, callback=interrupt).train()
    assert not (tmp_path / "cut" / "checkpoint-8").exists()
    assert distzo.Trainer.resume(tmp_path / "cut")["steps_done"] == 8
    cli_train(cli, assets, tmp_path / "straight", 8)
    same_run(tmp_path / "cut", tmp_path / "straight", 8)


def test_export_equals_the_cli(model, cli, assets, tmp_path):
    trainer = py_trainer(model, assets, tmp_path / "run", 4)
    trainer.train()
    distzo.export(tmp_path / "run", tmp_path / "py_hf")
    trainer.export(tmp_path / "method_hf")
    subprocess.run([cli, "export", "--run", str(tmp_path / "run"), "--out", str(tmp_path / "cli_hf")], check=True,
                   capture_output=True)
    assert (tmp_path / "py_hf" / "model.safetensors").read_bytes() == \
        (tmp_path / "cli_hf" / "model.safetensors").read_bytes()
    assert (tmp_path / "method_hf" / "model.safetensors").read_bytes() == \
        (tmp_path / "cli_hf" / "model.safetensors").read_bytes()
    assert distzo.load(tmp_path / "py_hf").info["params"] == 260032


def test_lora_run_and_its_exports_equal_the_cli(model, cli, assets, tmp_path):
    lora = {"peft": "lora", "lora_rank": 4, "lora_targets": "q,v"}
    trainer = py_trainer(model, assets, tmp_path / "py", 3, **lora)
    trainer.train()
    cli_train(cli, assets, tmp_path / "cli", 3, extra=["--peft", "lora", "--lora-rank", "4", "--lora-targets", "q,v"])
    assert (tmp_path / "py" / "seeds.log").read_bytes() == (tmp_path / "cli" / "seeds.log").read_bytes()
    distzo.export(tmp_path / "py", tmp_path / "py_fn_adapter")
    assert (tmp_path / "py_fn_adapter" / "adapter_config.json").exists()
    for merge, name, out in [(False, "adapter_model.safetensors", "adapter"), (True, "model.safetensors", "merged")]:
        trainer.export(tmp_path / f"py_{out}", merge=merge)
        cli_args = ["--merge"] if merge else []
        subprocess.run([cli, "export", "--run", str(tmp_path / "cli"), "--out", str(tmp_path / f"cli_{out}"),
                        *cli_args], check=True, capture_output=True)
        assert (tmp_path / f"py_{out}" / name).read_bytes() == (tmp_path / f"cli_{out}" / name).read_bytes()
    config = json.loads((tmp_path / "py_adapter" / "adapter_config.json").read_text())
    assert config["peft_type"] == "LORA" and config["r"] == 4
    # the run's evaluation: its adapter on its base, as `distzo eval BASE --adapter` scores them
    test = tmp_path / "test.tsv"
    test.write_text("".join((assets / "sst2" / "dev.tsv").read_text().splitlines(keepends=True)[:13]))
    r = trainer.evaluate(data=test)
    out = subprocess.run([cli, "eval", str(assets / "stories260K" / "stories260K.bin"), "--tokenizer",
                          str(assets / "stories260K" / "tok512.bin"), "--adapter", str(tmp_path / "cli_adapter"),
                          "--data", str(test), "--json", "--predictions", str(tmp_path / "p.tsv")],
                         check=True, capture_output=True, text=True)
    rows = [line.split("\t") for line in (tmp_path / "p.tsv").read_text().splitlines()[1:]]
    assert abs(r["accuracy"] - json.loads(out.stdout)["accuracy"]) < 1e-6 and r["examples"] == 12
    assert np.array_equal(r["scores"], np.array([[float(x[3]), float(x[4])] for x in rows], dtype=np.float32))
    with_adapter = distzo.load(assets / "stories260K" / "stories260K.bin", adapter=tmp_path / "py_adapter")
    assert with_adapter.info["adapter"] == str(tmp_path / "py_adapter")
    assert not np.array_equal(with_adapter.logits([1, 403, 407]), base_logits(assets))
    with pytest.raises(distzo.Error, match="not a PEFT adapter folder"):
        distzo.load(assets / "stories260K" / "stories260K.bin", adapter=tmp_path)
    base = distzo.load(assets / "stories260K" / "stories260K.bin")
    merged = distzo.load(tmp_path / "py_merged")
    assert merged.info["params"] == base.info["params"]


def test_errors_carry_the_library_message(model, cli, assets, tmp_path):
    with pytest.raises(distzo.Error, match="no-such-model") as e:
        distzo.load(tmp_path / "no-such-model")
    assert isinstance(e.value, OSError) and e.value.status
    bad = tmp_path / "config.json"
    bad.write_text("{ not json")
    with pytest.raises(distzo.Error, match="config.json"):
        distzo.load(assets / "stories260K" / "stories260K.bin", tokenizer=bad)
    with pytest.raises(ValueError, match="Trainer: option 'lr' -1: must be finite"):
        py_trainer(model, assets, tmp_path / "r1", 4, lr=-1).train()
    with pytest.raises(distzo.InvalidError, match="no_such_option"):
        py_trainer(model, assets, tmp_path / "r2", 4, no_such_option=1)
    with pytest.raises(distzo.Error, match="'batch'"):
        py_trainer(model, assets, tmp_path / "r4", 4, batch="four").train()
    with pytest.raises(ValueError, match="outside the vocabulary"):
        model.logits([1, 100000])
    with pytest.raises(ValueError, match="no key"):
        model.evaluate("sst2", [{"sentence": "a", "label": 0}])
    with pytest.raises(ZeroDivisionError):
        py_trainer(model, assets, tmp_path / "r3", 4, callback=lambda p: 1 / 0).train()
    # values a C int, a C string or a token id cannot hold are refused, never wrapped or cut
    with pytest.raises(ValueError, match="label in 0..2147483647"):
        model.evaluate("sst2", [{"text": "good movie", "label": 2**33}])
    with pytest.raises(ValueError, match="NUL character"):
        model.tokenizer.encode("Once\0 upon a time")
    with pytest.raises(ValueError, match="prev 1000000 is outside the vocabulary"):
        model.tokenizer.decode([400], prev=10**6)
    with pytest.raises(ValueError, match="seed -1 is outside"):
        model.generate("Once", max_tokens=2, seed=-1)
    cli_sampled = subprocess.run([cli, "generate", str(assets / "stories260K" / "stories260K.bin"), "--tokenizer",
                                  str(assets / "stories260K" / "tok512.bin"), "--prompt", PROMPT, "-n", "5", "--seed",
                                  str(2**33 + 5), "--json"], check=True, capture_output=True, text=True).stdout
    assert model.generate_ids(PROMPT, max_tokens=5, seed=2**33 + 5) == json.loads(cli_sampled)["tokens"]  # not wrapped
    with pytest.raises(ValueError, match="give a count in 1..1024"):
        distzo.set_threads(10**6)
    with pytest.raises(RuntimeError, match="already loaded"):  # freed under a generating thread, it crashed
        model._c.__init__(str(assets / "stories260K" / "stories260K.bin"))
    with pytest.raises(TypeError, match="callback 5 is not callable"):
        distzo.Trainer.resume(tmp_path / "r3", callback=5)
    np_run = py_trainer(model, assets, tmp_path / "r5", np.int64(1), lr=np.float32(1e-4))  # numpy's scalars
    assert np_run.train()["steps_done"] == 1


def test_gil_is_released_during_a_run(model, assets, tmp_path):
    import threading

    ticks = []
    stop = threading.Event()

    def count():
        while not stop.is_set():
            ticks.append(1)
            stop.wait(0.001)

    t = threading.Thread(target=count)
    t.start()
    try:
        model.generate(PROMPT, max_tokens=200, temperature=0)
        py_trainer(model, assets, tmp_path / "run", 8).train()
    finally:
        stop.set()
        t.join()
    assert len(ticks) > 5


def test_progress_bar_and_logging(model, assets, tmp_path, capsys, caplog):
    pytest.importorskip("tqdm")
    with caplog.at_level("INFO", logger="distzo"):
        py_trainer(model, assets, tmp_path / "run", 4).train(progress=True)
    err = capsys.readouterr().err
    assert "distzo train" in err and "4/4" in err and "step 4/4  loss" in caplog.text
    py_trainer(model, assets, tmp_path / "quiet", 4).train(progress=False)
    assert "distzo train" not in capsys.readouterr().err


MPI_SCRIPT = """
import json, sys, distzo
settings = json.loads(sys.argv[1])
r = distzo.Trainer(settings.pop("model"), settings.pop("train_data"), out=settings.pop("out"), **settings).train()
print(json.dumps({**distzo._distzo.comm_init(), "step_bytes": r["step_bytes"]}))
"""


@pytest.mark.parametrize("layout", [{}, {"pertp": 2}])
def test_mpirun_python_gives_the_single_process_bits(cli, assets, tmp_path, layout):
    import os
    import shutil
    import sys

    mpirun = shutil.which("mpirun")
    if not mpirun:
        pytest.skip("mpirun not found")
    settings = dict(SETTINGS, model=str(assets / "stories260K" / "stories260K.bin"), steps=4,
                    tokenizer=str(assets / "stories260K" / "tok512.bin"),
                    train_data=str(assets / "sst2" / "train.tsv"), out=str(tmp_path / "mpi"), **layout)
    env = dict(os.environ, OMP_NUM_THREADS="1", OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1")
    out = subprocess.run([mpirun, "-np", "2", sys.executable, "-c", MPI_SCRIPT, json.dumps(settings)], env=env,
                         check=True, capture_output=True, text=True, timeout=120).stdout
    ranks = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    assert sorted(r["rank"] for r in ranks) == [0, 1] and all(r["size"] == 2 and r["step_bytes"] > 0 for r in ranks)
    cli_train(cli, assets, tmp_path / "cli", 4)
    same_run(tmp_path / "mpi", tmp_path / "cli", 4)


def test_gguf_model_generates_as_the_cli(cli, assets):
    gguf = assets / "smollm2-135m" / "SmolLM2-135M-Instruct.Q4_1.gguf"
    model = distzo.load(gguf)
    assert model.info["format"] == "gguf" and model.info["params"] == 134515008
    out = subprocess.run([cli, "generate", str(gguf), "--prompt", "The capital of France is", "-n", "6",
                          "--temperature", "0", "--json"], check=True, capture_output=True, text=True).stdout
    ref = json.loads(out)
    assert model.tokenizer.encode("The capital of France is") == ref["prompt_tokens"]
    assert model.generate_ids("The capital of France is", max_tokens=6, temperature=0) == ref["tokens"]


def test_gguf_kept_quantized_same_logits(cli, assets):
    """keep_quantized: the GGUF's blocks held as stored, dequantized as read: the same logits, bit for bit."""
    import numpy as np

    gguf = assets / "smollm2-135m" / "SmolLM2-135M-Instruct.Q4_1.gguf"
    ids = distzo.load(gguf).tokenizer.encode("The capital of France is")
    at_load = distzo.load(gguf).logits(ids)
    kept = distzo.load(gguf, keep_quantized=True)
    assert np.array_equal(kept.logits(ids).view(np.uint32), at_load.view(np.uint32))
    assert kept.generate_ids(ids, max_tokens=6, temperature=0) == distzo.load(gguf).generate_ids(ids, max_tokens=6,
                                                                                                  temperature=0)


def test_special_tokens_in_a_template_as_the_cli(cli, assets, tmp_path):
    """special_tokens=True reads "<|im_start|>" in a template as its id, as `eval --special-tokens`
    does (the same scores); without it the characters are encoded, other scores."""
    import numpy as np

    gguf = assets / "smollm2-135m" / "SmolLM2-135M-Instruct.Q4_1.gguf"
    dev = tmp_path / "dev.tsv"
    dev.write_text("".join((assets / "sst2" / "dev.tsv").read_text().splitlines(keepends=True)[:9]))
    chat = "<|im_start|>user\nReview: {text}\nSentiment:"
    model = distzo.load(gguf)
    scores = {}
    for special in (False, True):
        r = model.evaluate("sst2", dev, template=chat, label_words="negative,positive", special_tokens=special)
        pred = tmp_path / f"pred{int(special)}.tsv"
        subprocess.run([cli, "eval", str(gguf), "--data", str(dev), "--template", chat, "--label-words",
                        "negative,positive", "--threads", "1", "--predictions", str(pred)]
                       + (["--special-tokens"] if special else []), check=True, capture_output=True)
        ref = np.loadtxt(pred, skiprows=1, usecols=(3, 4))
        assert np.allclose(r["scores"], ref, rtol=0, atol=1e-6)
        scores[special] = r["scores"]
    assert not np.allclose(scores[False], scores[True], rtol=0, atol=1e-3)
