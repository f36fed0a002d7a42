"""distzo.Trainer: a ZO fine-tuning run in a run folder that is the command line's own
(run.json, seeds.log, metrics, checkpoints), so a run started here resumes with
`distzo train --resume --out DIR` and the other way round."""
from __future__ import annotations

import json
import logging
import math
import os
import re
import tempfile
from typing import Any, Callable, Optional, Union

from . import _distzo
from ._distzo import Error, InvalidError
from ._model import _PRESETS, Model, PathLike, Record, _json_rows, _plain, _qa_records, _records, _runtime

log = logging.getLogger("distzo")

# The command line's defaults where they differ from the library's (src/cli/cmd_train.c,
# train_options.c), so that the same options give the same run.
_CLI_DEFAULTS = {"lr": 3e-5, "steps": 4000, "eval_every": 500, "checkpoint_every": 1000}
# Settings that are paths: resolved as the command line resolves them.
_PATHS = ("model", "tokenizer", "train_data", "test_data")

Callback = Callable[[dict[str, Any]], Any]
Records = Union[list[Record], list[str]]  # a preset's rows: JSON text


def _is_path(data: Any) -> bool:
    return isinstance(data, (str, os.PathLike))


def _data_records(settings: dict[str, Any], data: Any) -> Optional[Records]:
    """Examples held in Python (a list of dicts, a DataFrame, a datasets.Dataset) as (text,
    label) pairs by the run's text_key and label_key (squad, drop: prompts and gold
    answers; a SuperGLUE preset: JSON rows); None for a file or no data."""
    if data is None or _is_path(data):
        return None
    task = settings.get("task", "sst2")
    if task in ("squad", "drop"):  # a prompt (or its fields) and the gold answers, as Model.evaluate reads them
        label_key = settings.get("label_key")
        return _qa_records(data, task, settings.get("text_key") or "text",
                           "answers" if label_key in (None, "label") else label_key)
    if task in _PRESETS:  # read with the preset's own fields, as its jsonl file's lines
        return _json_rows(data)
    label_key = None if task == "lm" else settings.get("label_key") or "label"
    return _records(data, settings.get("text_key") or "text", label_key)


def _option_key(name: str) -> str:
    """A keyword's run.json key: data_seed, or the option's long name data-seed."""
    return name.replace("-", "_")


class Trainer:
    """Trainer(model, train_data, eval_data=None, out="runs/default", callback=None,
    config=None, **options): train_data and eval_data are files the command line takes,
    or examples held in Python (a list of dicts, a pandas DataFrame, a datasets.Dataset:
    read by text_key and label_key, default "text" and "label", or for a SuperGLUE preset
    by its own fields; for squad and drop a prompt (text_key, or MeZO's template of the
    row's title, context and question, drop's passage and question) and gold answers
    (label_key, default "answers": a list, or Hugging Face's {"text": [...]}), the first
    the training target; never written to a file: run.json then keeps their fingerprints,
    and Trainer.resume needs the same data). options are the command line's long names
    with "_" for "-"
    (lr, eps, steps, batch, seed, data_seed, train_examples, dev_examples, task,
    label_words, template, estimator, perturbation, store, eval_every, checkpoint_every,
    ...), or run.json's keys; config: a JSON file of them (a run's run.json restarts it),
    under the keywords. Under mpirun the run spans the job's ranks as `distzo train` does;
    pertp, dp, verify_every and node_size choose the layout (never saved: a run resumes
    under any layout)."""

    def __init__(self, model: Union[Model, PathLike], train_data: Any = None, eval_data: Any = None, *, out: PathLike = "runs/default",
                 callback: Optional[Callback] = None, config: Optional[PathLike] = None, **options: Any) -> None:
        if callback is not None and not callable(callback):
            raise TypeError(f"Trainer: callback {callback!r} is not callable (a function of one dict, each step's report)")
        self.out = os.fspath(out)
        self.callback = callback
        self.layout = _layout(options)
        settings: dict[str, Any] = dict(_CLI_DEFAULTS)  # under a config too, as `distzo train --config`
        if config is not None:
            settings.update({_option_key(k): v for k, v in _config_file(config).items()})
            for key in ("train_data_fingerprint", "test_data_fingerprint"):  # a new run's rows give their own
                settings.pop(key, None)
        if isinstance(model, Model):
            settings["model"] = model.path
            if model.info.get("tokenizer"):
                settings.setdefault("tokenizer", model.info["tokenizer"])
        else:
            settings["model"] = os.fspath(model)
        if _is_path(train_data):
            settings["train_data"] = os.fspath(train_data)
        if _is_path(eval_data):
            settings["test_data"] = os.fspath(eval_data)
        settings.update({_option_key(k): v for k, v in options.items()})
        if _is_path(train_data) and os.path.isdir(train_data):  # a folder: its files, as `--data DIR` takes them
            settings["train_data"], test = _distzo.data_folder(str(settings.get("task", "sst2")), os.fspath(train_data))
            if eval_data is None and test is not None:
                settings["test_data"] = test
        _check_keys(settings)
        task = settings.get("task", "sst2")
        if "label_words" not in settings and task != "lm" and task not in _PRESETS:
            settings["label_words"] = _distzo.DEFAULT_LABEL_WORDS
        for key in _PATHS:
            if settings.get(key) is not None:
                settings[key] = os.path.realpath(settings[key])
        self.settings = settings
        self.eval_data = eval_data
        self._records = (_data_records(settings, train_data),
                         _data_records(settings, eval_data))

    def train(self, progress: Optional[bool] = None) -> dict[str, Any]:
        """Runs the steps (Ctrl-C stops at a step boundary, leaving the run resumable, and
        raises KeyboardInterrupt); returns the summary: steps_done, final_dev, best_dev, ...
        progress: a tqdm bar (None: where tqdm is installed)."""
        return _run(self.settings, self.out, False, self.callback, progress, self.layout, self._records)

    def evaluate(self, data: Any = None, **options: Any) -> dict[str, Any]:
        """Model.evaluate of the run's trained weights (its seed log replayed, as export)
        with the run's task, template and label words; data: eval_data unless given (a
        file, or examples held in Python); options override the run's (batch, ...)."""
        from ._model import load

        s = self.settings
        data = (s.get("test_data") or self.eval_data) if data is None else data
        if data is None:
            raise ValueError("Trainer.evaluate: no data (the Trainer has no eval_data)")
        args = {"task": s.get("task", "sst2"), "template": s.get("template"), "label_words": s.get("label_words"),
                "text_key": s.get("text_key") or "text", "label_key": s.get("label_key") or "label",
                "special_tokens": bool(s.get("special_tokens"))}
        args.update(options)
        with tempfile.TemporaryDirectory(prefix="distzo-") as tmp:
            exported = os.path.join(tmp, "model")
            export(self.out, exported)
            if os.path.exists(os.path.join(exported, "adapter_config.json")):  # --peft: the adapter on its base
                model = load(s["model"], tokenizer=s.get("tokenizer"), adapter=exported)
            else:
                model = load(exported, tokenizer=s.get("tokenizer"))
            return model.evaluate(data=data, **args)

    def export(self, path: PathLike, format: Optional[str] = None, gguf_type: Optional[str] = None,
               merge: bool = False) -> None:
        """The run's trained weights (its seed log replayed on the base model) as a Hugging
        Face folder or a GGUF file (format None: gguf when path ends in .gguf), as
        `distzo export --run OUT`; a LoRA run (peft="lora") gives its PEFT adapter folder,
        or with merge=True the base with the adapter merged in."""
        export(self.out, path, format=format, gguf_type=gguf_type, merge=merge)

    @classmethod
    def resume(cls, run_dir: PathLike, callback: Optional[Callback] = None, progress: Optional[bool] = None,
               train_data: Any = None, eval_data: Any = None, **options: Any) -> dict[str, Any]:
        """Continues the run in run_dir with its run.json's settings (steps may be raised;
        placement and cadence may change), bitwise as if never stopped. A run trained on
        data held in Python needs that data again (train_data, eval_data): data whose
        fingerprint is not run.json's is refused."""
        if callback is not None and not callable(callback):  # before the log is replayed
            raise TypeError(f"Trainer.resume: callback {callback!r} is not callable (a function of one dict)")
        layout = _layout(options)
        settings = {_option_key(k): v for k, v in options.items()}
        _check_keys(settings)
        records = (None, None)
        if train_data is not None or eval_data is not None:
            with open(os.path.join(os.fspath(run_dir), "run.json"), encoding="utf-8") as f:
                run = {**json.load(f), **settings}
            records = (_data_records(run, train_data), _data_records(run, eval_data))
            return _run(settings, os.fspath(run_dir), True, callback, progress, layout, records, run)
        return _run(settings, os.fspath(run_dir), True, callback, progress, layout)


# The parallel layout under mpirun, never part of a run's settings (a run resumes under
# any layout): train's --pertp, --dp, --verify-every and --node-size.
_LAYOUT = ("pertp", "dp", "verify_every", "node_size")


def _config_file(path: PathLike) -> dict[str, Any]:
    """A config file's settings: a JSON object, or an error naming the file."""
    try:
        with open(path, encoding="utf-8") as f:
            settings = json.load(f)
    except json.JSONDecodeError as e:
        raise InvalidError(f"{os.fspath(path)}: not valid JSON (line {e.lineno}, column {e.colno}: {e.msg})") from None
    if not isinstance(settings, dict):
        raise InvalidError(f"{os.fspath(path)}: a config is a JSON object of settings, not {type(settings).__name__}")
    return settings


def _layout(options: dict[str, Any]) -> dict[str, int]:
    return {key: int(options.pop(key)) for key in _LAYOUT if key in options}


def _preset(settings: dict[str, Any]) -> Optional[str]:
    """The SuperGLUE preset whose rows are JSON text (None: rows are (text, label) records)."""
    task = settings.get("task")
    return task if task in _PRESETS and task not in ("squad", "drop") else None


def _check_keys(settings: dict[str, Any]) -> None:
    for key in settings:
        if not _distzo.train_option_known(key):
            raise InvalidError(f"Trainer: unknown option '{key}' (the options are train's long names with _ for -, "
                               "e.g. lr, steps, data_seed, or run.json's keys)")


def _progress_bar(wanted: Optional[bool]) -> Any:
    """A tqdm bar class, or None (not wanted, or tqdm not installed and not asked for)."""
    if wanted is False:
        return None
    try:
        from tqdm.auto import tqdm  # type: ignore[import-untyped]
    except ImportError:
        if wanted:
            raise
        return None
    return tqdm


def _run(settings: dict[str, Any], out: str, resume: bool, callback: Optional[Callback],
         progress: Optional[bool] = None, layout: Optional[dict[str, int]] = None,
         records: tuple[Optional[Records], Optional[Records]] = (None, None),
         run_settings: Optional[dict[str, Any]] = None) -> dict[str, Any]:
    """run_settings: the run's (the task the records are for; default settings)."""
    run_settings = settings if run_settings is None else run_settings
    layout = dict(layout or {})
    group = _distzo.comm_init(layout.pop("node_size", 0))
    _runtime(group["machine_ranks"] if group["size"] > 1 else 1)
    if group["rank"] != 0:  # rank 0 speaks for the job
        progress = False
    tqdm = _progress_bar(progress)
    bar = None

    def on_step(p: dict[str, Any]) -> None:
        nonlocal bar
        if p["step"] > 0 and "loss" in p:
            log.info("step %d/%d  loss %.4f", p["step"], p["steps"], p["loss"])
        if p.get("has_eval"):
            log.info("step %d/%d  dev %.4f  test %.4f", p["step"], p["steps"], p["dev_accuracy"], p["test_accuracy"])
        if tqdm is not None:
            if bar is None:
                bar = tqdm(total=p["steps"], initial=p["step"], desc="distzo train", unit="step")
            bar.update(p["step"] - bar.n)
            if "loss" in p:
                bar.set_postfix(loss=f"{p['loss']:.4f}", refresh=False)
        if callback is not None:
            callback(p)

    # The settings reach the library as train --config's JSON file (its messages name it).
    with tempfile.TemporaryDirectory(prefix="distzo-") as tmp:
        path = None
        if settings or not resume:
            for key, value in settings.items():
                if isinstance(value, float) and not math.isfinite(value):
                    raise InvalidError(f"Trainer: option '{key}' is {value}: expected a finite number")
            path = os.path.join(tmp, "trainer-options.json")
            with open(path, "w", encoding="utf-8") as f:
                json.dump(settings, f, default=_plain)  # numpy's scalars as their values
        try:
            return _distzo.train(path, out, resume, on_step, records[0], records[1], _preset(run_settings), **layout)
        except Error as e:  # a setting the library refuses: named as the Trainer's option, not the file or flag
            flag = re.match(r"--([a-z][a-z0-9-]*) ", str(e))  # the library's checks start "--steps -5: ..."
            if flag:
                msg = f"Trainer: option '{_option_key(flag.group(1))}' " + str(e)[flag.end():]
            elif path is not None and path in str(e):
                msg = str(e).replace(f"{path}: field ", "Trainer: option ").replace(path, "the Trainer's options")
            else:
                raise
            renamed = type(e)(msg)
            renamed.status = getattr(e, "status", None)
            raise renamed from None
        finally:
            if bar is not None:
                bar.close()


def export(run_dir: Optional[PathLike], out: PathLike, model: Optional[PathLike] = None,
           format: Optional[str] = None, gguf_type: Optional[str] = None, store: Optional[str] = None,
           merge: bool = False) -> None:
    """A run's trained weights (its seed log replayed on its base model, or on model), or
    a model as it is (run_dir None), written as a Hugging Face folder or a GGUF file
    (format None: gguf when out ends in .gguf), as `distzo export`. A LoRA run gives its
    PEFT adapter folder (adapter_config.json + adapter_model.safetensors), or with
    merge=True the base with the adapter merged in (`distzo export --merge`)."""
    if format is None:
        format = "gguf" if os.fspath(out).endswith(".gguf") else "hf"
    _distzo.export(None if run_dir is None else os.fspath(run_dir), None if model is None else os.fspath(model),
                   os.fspath(out), format, gguf_type, store, merge)
