"""Golden ids for distzo's tokenizer.json reader (tests/test_tokenizer_hf.c), from Hugging
Face `tokenizers` itself (the Rust library transformers 5 uses):
  - SmolLM2-135M's tokenizer as transformers 5 saves it (ASSETS/smollm2-135m/hf-tokenizer), and
    with SmolLM2's original pre-tokenizer (Digits + ByteLevel), which the GGUF's "smollm" names;
  - small byte-level BPE tokenizers, one per pre-tokenizer pattern, trained here with the
    tokenizers API on SST-2 text and saved as test data (tests/data/tokenizer/hf_small/NAME/):
      gpt2   ByteLevel (GPT-2's regex), merges as "a b" strings, trained without the full byte
             alphabet (so bytes without a token are dropped, as in SmolLM2's vocabulary);
      llama3 Split(Llama-3's regex) + ByteLevel, merges as [a, b] pairs, ignore_merges, tokens
             unreachable by merges, <|begin_of_text|> added by the post-processor (bos), a
             non-special added token, added tokens with lstrip/rstrip, tokenizer_config.json;
      qwen2  Split(Qwen2's regex) + ByteLevel, normalizer NFC (as Qwen2's files);
      digits Digits(individual_digits) + ByteLevel (SmolLM's original pre-tokenizer);
    and SentencePiece-style BPE (train_sentencepiece_style): llama2 (Prepend + Replace
    normalizer), gemma (Replace only), metaspace (Metaspace pre-tokenizer), with byte fallback;
  - a small SentencePiece BPE tokenizer.model (tests/data/tokenizer/spm_small/), set up as
    Llama-2's, with ids from the sentencepiece library ("ids" with <s>, "ids_nobos").
Each golden row: {"text"} or {"sst2_dev_line"} (as tools/make_tokenizer_golden.py), "ids"
(plain text: special tokens not parsed, encode_special_tokens=True, with the post-processor's
tokens, i.e. distzo's DZ_ENCODE_BOS), and "ids_special" (special tokens parsed, HF's default;
DZ_ENCODE_BOS | DZ_ENCODE_SPECIAL) where it differs and on the special-token strings.

Run:   tools/.venv/bin/python tools/make_hf_tokenizer_golden.py [ASSETS]   (tokenizers==0.23.3)
The trainer's limit_alphabet breaks frequency ties in hash order, so the SentencePiece-style
tokenizers (llama2, metaspace, gemma) come out with their rare characters in another order
on each run: a tokenizer and its golden always change together, and either is valid.
"""
import json
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from make_tokenizer_golden import generated_strings, sst2_dev, write_jsonl  # noqa: E402

OUT = os.path.join(ROOT, "tests", "data", "tokenizer")

SPECIAL_TEXT = [
    "<|im_start|>user\nHello!<|im_end|>\n<|im_start|>assistant\n",
    "<|endoftext|>", "a<|endoftext|>b", "<|endoftext|><|endoftext|>", " <|im_end|> ", "<|im_start", "<|im_start|",
    "<|begin_of_text|>Hi", "x<|eot_id|>", "<tool>call</tool>", "<tool><tool>", " <tool> ", "<repo_name>x<file_sep>",
    "<|begin_of_text|><|begin_of_text|>", "<|im_start|><|im_end|>",
    "a <mask> b", "a  \t<mask>\n\n b", "<mask>", " <mask>", "<mask> ", "x\u3000<mask>\u00a0y", "<mask><mask>  <mask>",
    "a <sep> b", "a  <sep>  b", "<sep> x", "  <sep>", "\u00e9 <sep>",
]

EXTRA = [
    "'S", "'T", "'RE", "'Ve", "'M", "'LL", "'D", "I'M HERE", "DON'T", "'\u017f", "x'\u017fy", "'\u017ft",
    "12345678", "1234567890 123 4567", " 1 22 333 4444 55555", "3.14159265", "\u0661\u0662\u0663\u0664", "x1y22z333",
    "\r\n\r\n  x", "a \n\n b", "a\n \n b", "  \n", "\t\n\t x", "x \r\n", "x\n\n\n", "!!\n\n", "? \n", "a.\r\nb",
    "(hello) [world]", "\thello", "\nhello", " \u00a0hello", "...hello", "\u201chello\u201d", "--x--",
    "a  b   c    d", "end   ", "   start", "\u3000\u4e2d\u6587", "\u4e2d\u6587\u65e5\u672c\u8a9e\ud55c\uad6d\uc5b4",
    "!\x04!", "\x04\x06\x13\x14\x16", "x\x1dy", "a\x04b", "\u00c0\u00c1", "\U00050000\U00090000 \U000f0000",
    "\U0001F600\U0001F600\U0001F600", "e\u0301\u0323", "e\u0323\u0301", "\u1e0b\u0323", "\u212b\u2126\u00c5",
    "\u1100\u1161\u11a8 \u1100\u1161", "\uac00\u11a8", "\u0958\u0959", "\u0344\u0301", "a\u0328\u0301\u0328",
    "\u0f73\u0f75\u0f81", "\u1026\u102e", "\U0001d15e\U0001d160", "\u3099\u304b\u3099", "\u0301a", "caf\u00e9 na\u00efve", "e\u0301e\u0301", "\u0915\u094d\u0937\u093e",
]


def texts_and_rows(assets):
    rows = [{"text": t} for t in generated_strings() + EXTRA + SPECIAL_TEXT]
    rows += [{"sst2_dev_line": n} for n, _ in sst2_dev(assets)]
    dev = dict(sst2_dev(assets))
    return rows, lambda r: r["text"] if "text" in r else dev[r["sst2_dev_line"]]


def golden(tok, rows, text_of):
    from tokenizers import Tokenizer

    plain = Tokenizer.from_str(tok.to_str())
    plain.encode_special_tokens = True
    out = []
    for r in rows:
        t = text_of(r)
        row = dict(r)
        row["ids"] = plain.encode(t).ids
        special = tok.encode(t).ids
        if special != row["ids"] or t in SPECIAL_TEXT:
            row["ids_special"] = special
        out.append(row)
    return out


def sst2_train(assets, count):
    with open(os.path.join(assets, "sst2", "train.tsv"), encoding="utf-8") as f:
        lines = f.read().split("\n")[1:]
    return [l.split("\t", 1)[0] for l in lines[:count] if l]


def train_small(name, corpus, assets):
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

    pats = {
        "llama3": r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
        "qwen2": r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
    }
    tok = Tokenizer(models.BPE())
    if name in pats:
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(pats[name]), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    elif name == "digits":
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    else:
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    if name == "qwen2":  # as Qwen2's own tokenizer.json
        tok.normalizer = normalizers.NFC()
    tok.decoder = decoders.ByteLevel()
    alphabet = [] if name == "gpt2" else pre_tokenizers.ByteLevel.alphabet()
    trainer = trainers.BpeTrainer(vocab_size=1200, initial_alphabet=alphabet, special_tokens=["<|endoftext|>"],
                                  show_progress=False)
    tok.train_from_iterator(corpus, trainer)
    d = json.loads(tok.to_str())
    if name == "gpt2":  # the older "a b" string form of merges
        d["model"]["merges"] = [" ".join(m) if isinstance(m, list) else m for m in d["model"]["merges"]]
    if name == "llama3":  # whole words with no merge path: only ignore_merges yields them
        d["model"]["ignore_merges"] = True
        vocab = d["model"]["vocab"]
        for w in ["\u0120charming", "\u0120the\u0120film", "movie", "\u0120journey", "\u0120xyzzy"]:
            if w not in vocab:
                vocab[w] = len(vocab)
    tok = Tokenizer.from_str(json.dumps(d))
    if name == "llama3":
        tok.add_special_tokens(["<|begin_of_text|>", "<|eot_id|>", AddedToken("<mask>", lstrip=True, rstrip=True)])
        tok.add_tokens(["<tool>", AddedToken("<sep>", lstrip=True)])
        bos = tok.token_to_id("<|begin_of_text|>")
        tok.post_processor = processors.TemplateProcessing(single="<|begin_of_text|> $A", pair="<|begin_of_text|> $A $B",
                                                           special_tokens=[("<|begin_of_text|>", bos)])
    folder = os.path.join(OUT, "hf_small", name)
    os.makedirs(folder, exist_ok=True)
    tok.save(os.path.join(folder, "tokenizer.json"))
    if name == "llama3":
        with open(os.path.join(folder, "tokenizer_config.json"), "w") as f:
            json.dump({"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>", "tokenizer_class": "TokenizersBackend"},
                      f, indent=2)
    return Tokenizer.from_file(os.path.join(folder, "tokenizer.json"))


def train_sentencepiece_style(name, corpus):
    """SentencePiece-style BPE as tokenizer.json writes it: "llama2" with the normalizer
    Prepend("▁") + Replace(" ", "▁") (Llama-2, TinyLlama), "gemma" with Replace alone, "metaspace" with the Metaspace
    pre-tokenizer, prepend_scheme first (Mistral, newer files); byte fallback with
    <0x00>..<0xFF> in the vocabulary, a limited alphabet (so it is used), <s> added by the
    post-processor, fuse_unk."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE(unk_token="<unk>", fuse_unk=True, byte_fallback=True))
    if name == "llama2":
        tok.normalizer = normalizers.Sequence([normalizers.Prepend("\u2581"), normalizers.Replace(" ", "\u2581")])
    elif name == "gemma":
        tok.normalizer = normalizers.Replace(" ", "\u2581")
    else:
        tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="first", split=False)
    tok.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse(),
                                     decoders.Strip(" ", 1, 0)])
    trainer = trainers.BpeTrainer(vocab_size=700, limit_alphabet=70, special_tokens=["<unk>", "<s>", "</s>"],
                                  show_progress=False)
    tok.train_from_iterator(corpus, trainer)
    d = json.loads(tok.to_str())
    vocab = d["model"]["vocab"]
    for b in range(256):
        vocab.setdefault("<0x%02X>" % b, len(vocab))
    tok = Tokenizer.from_str(json.dumps(d))
    bos = tok.token_to_id("<s>")
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", bos)])
    folder = os.path.join(OUT, "hf_small", name)
    os.makedirs(folder, exist_ok=True)
    tok.save(os.path.join(folder, "tokenizer.json"))
    return Tokenizer.from_file(os.path.join(folder, "tokenizer.json"))


def make_sentencepiece(assets, rows, text_of):
    """A small SentencePiece BPE model as Llama-2's is set up (byte fallback, identity
    normalizer, whitespace kept, dummy prefix), and its ids from the sentencepiece library."""
    import io
    import sentencepiece as spm

    folder = os.path.join(OUT, "spm_small")
    os.makedirs(folder, exist_ok=True)
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(sst2_train(assets, 4000) + generated_strings()[:200]), model_writer=model,
        model_type="bpe", vocab_size=800, byte_fallback=True, normalization_rule_name="identity",
        remove_extra_whitespaces=False, add_dummy_prefix=True, character_coverage=0.9995,
        unk_id=0, bos_id=1, eos_id=2, pad_id=-1, allow_whitespace_only_pieces=True, split_digits=True,
        minloglevel=2)
    with open(os.path.join(folder, "tokenizer.model"), "wb") as f:
        f.write(model.getvalue())
    sp = spm.SentencePieceProcessor(model_proto=model.getvalue())
    out = []
    for r in rows:
        t = text_of(r)
        row = dict(r)
        row["ids"] = sp.encode(t, add_bos=True)
        row["ids_nobos"] = sp.encode(t)
        out.append(row)
    write_jsonl(os.path.join(OUT, "spm_small_golden.jsonl"), out)


def main():
    from tokenizers import Tokenizer

    assets = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("DISTZO_ASSETS", os.path.join(ROOT, "..", "shared", "assets"))
    rows, text_of = texts_and_rows(assets)
    smol = Tokenizer.from_file(os.path.join(assets, "smollm2-135m", "hf-tokenizer", "tokenizer.json"))
    assert smol.encode("Hello world").ids == [19556, 905], smol.encode("Hello world").ids
    write_jsonl(os.path.join(OUT, "hf_smollm2_golden.jsonl"), golden(smol, rows, text_of))
    # The GGUF's pre-tokenizer "smollm" is SmolLM2's original one, Digits(individual_digits)
    # then ByteLevel, which the asset's transformers-5 tokenizer.json lost: "  123" differs.
    from tokenizers import pre_tokenizers
    smol.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                                  pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    write_jsonl(os.path.join(OUT, "hf_smollm2_gguf_golden.jsonl"), golden(smol, rows, text_of))
    corpus = sst2_train(assets, 4000) + generated_strings()[:200]
    random.Random(7).shuffle(corpus)
    for name in ["gpt2", "llama3", "qwen2", "digits"]:
        tok = train_small(name, corpus if name != "gpt2" else sst2_train(assets, 4000), assets)
        write_jsonl(os.path.join(OUT, "hf_%s_golden.jsonl" % name), golden(tok, rows, text_of))
    for name in ["llama2", "metaspace", "gemma"]:
        tok = train_sentencepiece_style(name, corpus)
        write_jsonl(os.path.join(OUT, "hf_%s_golden.jsonl" % name), golden(tok, rows, text_of))
    make_sentencepiece(assets, rows, text_of)


if __name__ == "__main__":
    main()
