"""distzo.load and the Model it returns: info, tokenizer, logits, generate."""
from __future__ import annotations

import json
import numbers
import operator
import os
from typing import TYPE_CHECKING, Any, Iterable, Optional, Sequence, Union

from . import _distzo

if TYPE_CHECKING:
    import numpy

PathLike = Union[str, "os.PathLike[str]"]
# MeZO's task presets (distzo/data.h): their examples come from their files' own fields.
_PRESETS = {"rte", "cb", "boolq", "wsc", "wic", "multirc", "copa", "record", "squad", "drop"}
_threads = {"set": False, "explicit": False}


def set_threads(threads: int = 0) -> int:
    """Sets the threads distzo computes on (0: $OMP_NUM_THREADS, else every CPU this
    process may use) and returns the count in use."""
    if isinstance(threads, bool) or not isinstance(threads, numbers.Integral) or not 0 <= threads <= 1024:
        raise ValueError(f"set_threads({threads!r}): give a count in 1..1024 (as --threads), or 0 for "
                         "$OMP_NUM_THREADS or every CPU")
    _threads["explicit"] = True
    return _set_threads(threads)


def _set_threads(threads: int) -> int:
    _threads["set"] = True
    return _distzo.runtime_init(int(threads))


def _runtime(ranks_here: int = 1) -> None:
    """The default threads, once: as the command line, under mpirun (ranks_here ranks on
    this machine, no $OMP_NUM_THREADS, no set_threads) the cores are split between them."""
    if _threads["explicit"]:
        return
    if ranks_here > 1 and not os.environ.get("OMP_NUM_THREADS"):
        _set_threads(max(1, (os.cpu_count() or 1) // ranks_here))
    elif not _threads["set"]:
        _set_threads(0)


class Tokenizer:
    """The model's tokenizer (model.tokenizer)."""

    def __init__(self, model: "_distzo.Model") -> None:
        self._c = model

    def encode(self, text: str, bos: bool = True, special: bool = False) -> list[int]:
        """Token ids of text; bos: the model's start id first (where it has one); special:
        special tokens written in the text ("<|im_start|>") become their ids."""
        return self._c.encode(text, bos, special)

    def decode(self, ids: Sequence[int], prev: int = -1) -> str:
        """The text of ids (prev: the id before ids[0], for tokenizers whose pieces depend
        on it); the start id gives no text."""
        return self._c.decode(list(ids), prev)

    @property
    def bos_id(self) -> int:
        """The start id (-1: none)."""
        return self._c.bos_eos()[0]

    @property
    def eos_id(self) -> int:
        """The end id (-1: none)."""
        return self._c.bos_eos()[1]


class Model:
    """A model distzo loads: a Hugging Face folder (safetensors), a llama2.c .bin, a GGUF
    file or a run's checkpoint, as the command line takes them."""

    def __init__(self, path: PathLike, tokenizer: Optional[PathLike] = None, dtype: str = "f32",
                 keep_quantized: bool = False, adapter: Optional[PathLike] = None) -> None:
        _runtime()
        self._c = _distzo.Model(os.fspath(path), None if tokenizer is None else os.fspath(tokenizer), dtype,
                                bool(keep_quantized), None if adapter is None else os.fspath(adapter))
        self.tokenizer: Optional[Tokenizer] = Tokenizer(self._c) if self._c.has_tokenizer else None

    @property
    def info(self) -> dict[str, Any]:
        """The architecture (arch, vocab_size, dim, n_layers, ..., max_seq_len), the parameter
        count and the files (path, format, tokenizer, adapter)."""
        return self._c.info()

    @property
    def path(self) -> str:
        return str(self.info["path"])

    def logits(self, token_ids: Sequence[int]) -> "numpy.ndarray":
        """The logits of every position of one sequence: float32 [len(token_ids), vocab]."""
        import numpy as np

        ids = _token_ids(token_ids)
        flat = np.frombuffer(self._c.logits(ids), dtype=np.float32)
        return flat.reshape(len(ids), self.info["vocab_size"])

    def generate(self, prompt: Union[str, Sequence[int]], max_tokens: int = 256, temperature: float = 1.0,
                 top_p: float = 0.9, seed: int = 0, stop_at_eos: bool = True) -> str:
        """The continuation of prompt (text, or token ids), as `distzo generate` makes it:
        temperature 0 is greedy, otherwise nucleus sampling with top_p, seeded."""
        ids = self._prompt_ids(prompt)
        new = self._c.generate(ids, max_tokens, temperature, top_p, seed, stop_at_eos)
        if self.tokenizer is None:
            raise RuntimeError(f"{self.path}: no tokenizer to decode with; use generate_ids")
        return self.tokenizer.decode(new, prev=ids[-1])

    def generate_ids(self, prompt: Union[str, Sequence[int]], max_tokens: int = 256, temperature: float = 1.0,
                     top_p: float = 0.9, seed: int = 0, stop_at_eos: bool = True) -> list[int]:
        """generate's new token ids."""
        return self._c.generate(self._prompt_ids(prompt), max_tokens, temperature, top_p, seed, stop_at_eos)

    def evaluate(self, task: str = "sst2", data: Any = None, *, template: Optional[str] = None,
                 label_words: Optional[str] = None, text_key: str = "text", label_key: str = "label",
                 batch: int = 16, share_prompts: bool = True, gen_tokens: int = 0,
                 special_tokens: bool = False) -> dict[str, Any]:
        """As `distzo eval`: classification (sst2, classify, a preset) gives accuracy,
        predictions [n] and scores ([n, n_labels] numpy, the candidates' mean log-probs;
        a list of arrays where examples have candidates of their own); lm gives the mean NLL
        and perplexity; squad and drop give the mean f1 and exact_match of the greedy
        answers (at most gen_tokens tokens, 0: 50), each example's answers, f1s and
        exact_matches (numpy). data: a file the command line takes, or examples as held in
        Python: a list of dicts, a pandas DataFrame or a datasets.Dataset (text_key,
        label_key; a SuperGLUE preset: its own fields, as its jsonl file's lines; squad and
        drop: text_key is the whole prompt, or where a row has none MeZO's prompt of its
        fields (squad: title, context, question; drop: passage, question), and label_key,
        default "answers", the gold answers: a list of str, or a dict with them under
        "text", as Hugging Face's squad has). special_tokens: special tokens written in the
        template ("<|im_start|>") are their ids, as Hugging Face's tokenizer reads them
        (`eval --special-tokens`); False: plain text."""
        if self.tokenizer is None:
            raise RuntimeError(f"{self.path}: no tokenizer; load with tokenizer=PATH")
        qa = task in ("squad", "drop")
        if qa and label_key == "label":
            label_key = "answers"
        if isinstance(data, (str, os.PathLike)):
            path, records = os.fspath(data), None
        elif task in _PRESETS and not qa:  # the preset reads its rows' own fields, as in its file
            path, records = None, _json_rows(data)
        elif qa:
            path, records = None, _qa_records(data, task, text_key, label_key)
        else:
            path, records = None, _records(data, text_key, None if task == "lm" else label_key)
        r = self._c.evaluate(task, path, records, template, label_words, text_key, label_key, batch, share_prompts,
                             gen_tokens, special_tokens)
        import numpy as np

        if qa:
            r["f1s"] = np.frombuffer(r["f1s"], dtype=np.float64)
            r["exact_matches"] = np.frombuffer(r["exact_matches"], dtype=np.float64)
            return r
        if "scores" not in r:
            return r

        preds = np.frombuffer(r["predictions"], dtype=np.int32)
        scores = np.frombuffer(r["scores"], dtype=np.float32)
        first = np.frombuffer(r["first"], dtype=np.int32)
        if len(scores) == len(preds) * r["n_labels"]:
            r["scores"] = scores.reshape(len(preds), r["n_labels"])
        else:
            r["scores"] = [scores[first[e]:first[e + 1]] for e in range(len(preds))]
        r["predictions"] = preds
        del r["first"]
        return r

    def _prompt_ids(self, prompt: Union[str, Sequence[int]]) -> list[int]:
        if isinstance(prompt, str):
            if self.tokenizer is None:
                raise RuntimeError(f"{self.path}: no tokenizer for a text prompt; load with tokenizer=PATH")
            ids = self.tokenizer.encode(prompt)
            if not ids:
                raise ValueError(f"{self.path}: the tokenizer has no start token, so an empty prompt cannot start")
            return ids
        return _token_ids(prompt)


def _token_ids(seq: Sequence[Any]) -> list[int]:
    """Token ids as ints (Python's, numpy's, a tensor's elements): an id given as a float (1.5)
    is refused, not truncated."""
    ids = []
    for i, t in enumerate(seq):
        try:
            ids.append(operator.index(t))
        except TypeError:
            raise TypeError(f"token id at position {i} is {t!r}: token ids are integers") from None
    return ids


Record = tuple[str, Optional[int], Optional[list[str]]]


def _answers(value: Any) -> list[str]:
    """Gold answers: a list of str, or a mapping with them under "text" (Hugging Face's squad)."""
    if isinstance(value, str):
        return [value]
    if hasattr(value, "keys") and "text" in value:
        value = value["text"]
    return [str(a) for a in value]


def _records(data: Any, text_key: str, label_key: Optional[str]) -> list[Record]:
    """(text, label, None) of examples held in Python: a DataFrame or a datasets.Dataset
    by its columns, else any sized iterable of mappings (a list of dicts)."""
    if data is None:
        raise ValueError("no data: give a file or examples")

    def record(i: int, text: Any, label: Any) -> Record:
        # checked as the file loaders check a row: a string of text (a classification
        # example's not empty), an integer label >= 0 (the C loaders name file and line)
        if not isinstance(text, str) or (label_key is not None and not text.strip()):
            raise ValueError(f"example {i}: {text_key!r} must be a{'' if label_key is None else ' non-empty'} "
                             f"string, not {text!r}")
        if label_key is None:
            return (text, None, None)
        try:  # an int of any kind (numpy's, a bool, a 0-d tensor), a whole float (pandas' 1.0), digits
            value = int(label.strip()) if isinstance(label, str) and label.strip().isdecimal() else operator.index(label)
        except TypeError:
            whole = isinstance(label, numbers.Real) and float(label).is_integer()
            value = int(label) if whole or getattr(getattr(label, "dtype", None), "kind", "") == "b" else -1
        if not 0 <= value <= 2**31 - 1:  # a C int: never wrapped onto another label
            raise ValueError(f"example {i}: {label_key!r} must be an integer label in 0..2147483647, not {label!r}")
        return (text, value, None)

    if hasattr(data, "columns") or hasattr(data, "column_names"):
        names = list(getattr(data, "column_names", None) or data.columns)
        for key in (text_key, label_key):
            if key is not None and key not in names:
                raise ValueError(f"data: no column {key!r} (text_key={text_key!r}, label_key={label_key!r}; "
                                 f"the columns: {', '.join(map(str, names))})")
        texts = list(data[text_key])
        labels = list(data[label_key]) if label_key is not None else [None] * len(texts)
        return [record(i, t, label) for i, (t, label) in enumerate(zip(texts, labels))]
    out: list[Record] = []
    for i, ex in enumerate(data):
        try:
            out.append(record(i, ex[text_key], None if label_key is None else ex[label_key]))
        except KeyError as e:
            raise ValueError(f"example {i}: no key {e} (text_key={text_key!r}, label_key={label_key!r})") from None
    return out


# MeZO's prompts of the generation presets (large_models/templates.py), as the library's
# file loaders build them (src/data/presets.c): the fields a row gives them from.
_QA_PROMPTS = {"squad": ("Title: {title}\nContext: {context}\nQuestion: {question}\nAnswer:",
                         ("title", "context", "question")),
               "drop": ("Passage: {passage}\nQuestion: {question}\nAnswer:", ("passage", "question"))}
_C_SPACE = " \t\n\v\f\r"  # what the file loaders strip from a question (C's isspace)


def _qa_records(data: Any, task: str, text_key: str, label_key: str) -> list[Record]:
    """(prompt, None, answers) of squad's or drop's rows: the prompt is the row's text_key
    where it has one, else MeZO's template of its fields (squad: title, context, question,
    as Hugging Face's squad; drop: passage, question); the answers are label_key's (a list
    of str, or Hugging Face's {"text": [...]}; drop's answers_spans {"spans": [...]} where
    the row has no label_key)."""
    template, fields = _QA_PROMPTS[task]
    out: list[Record] = []
    for i, row in enumerate(_rows(data)):
        if text_key in row:
            prompt = str(row[text_key])
        else:
            missing = [f for f in fields if f not in row]
            if missing:
                raise ValueError(f"example {i}: no key {text_key!r} (the whole prompt) and no "
                                 f"{', '.join(map(repr, missing))} ({task}'s prompt is built from {', '.join(fields)})")
            values = {f: str(row[f]) for f in fields}
            values["question"] = values["question"].strip(_C_SPACE)
            prompt = template.format(**values)
        key = "answers_spans" if label_key not in row and task == "drop" and "answers_spans" in row else label_key
        if key not in row:
            raise ValueError(f"example {i}: no key {label_key!r} (the gold answers)")
        gold = _answers(row[key]["spans"] if key == "answers_spans" else row[key])
        if not gold:
            raise ValueError(f"example {i}: {key!r} has no gold answers")
        out.append((prompt, None, gold))
    return out


def _rows(data: Any) -> Iterable[Any]:
    """Each example as a mapping: a DataFrame's or a datasets.Dataset's rows by their
    columns, else the items of a sized iterable of mappings."""
    if data is None:
        raise ValueError("no data: give a file or examples")
    if hasattr(data, "columns") or hasattr(data, "column_names"):
        names = list(getattr(data, "column_names", None) or data.columns)
        return (dict(zip(names, values)) for values in zip(*(list(data[n]) for n in names)))
    return data


def _json_rows(data: Any) -> list[str]:
    """Each example (a mapping, or a DataFrame's / datasets.Dataset's row) as JSON text: the
    line a SuperGLUE preset's jsonl file would hold, read with the preset's own fields."""
    return [json.dumps(dict(row), default=_plain) for row in _rows(data)]


def _plain(value: Any) -> Any:
    """numpy's scalars and arrays (a DataFrame's cells) as JSON takes them."""
    if hasattr(value, "tolist"):
        return value.tolist()
    raise TypeError(f"{type(value).__name__} is not JSON")


def load(path: PathLike, tokenizer: Optional[PathLike] = None, dtype: str = "f32",
         keep_quantized: bool = False, adapter: Optional[PathLike] = None) -> Model:
    """Loads a model (and its tokenizer: the one beside it, or tokenizer=PATH). keep_quantized:
    a GGUF's quantized tensors stay as the file stores them and are dequantized a layer at a
    time as the forward reads them (the same logits, bit for bit; `--keep-quantized`).
    adapter: a PEFT adapter folder (LoRA or prefix: `distzo export` of a --peft run, or
    Hugging Face peft's save_pretrained) attached to every forward of path, its base, as
    `distzo eval --adapter`."""
    return Model(path, tokenizer, dtype, keep_quantized, adapter)
