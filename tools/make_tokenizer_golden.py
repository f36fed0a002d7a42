"""Golden ids for distzo's tokenizer tests, from independent references:
  - GPT-2 ids: HF transformers GPT2TokenizerFast (Rust `tokenizers`) built from the asset
    files encoder.json + vocab.bpe, cross-checked against a bare `tokenizers` BPE pipeline;
  - OPT ids: 2 (</s>, OPT's start token), then fairseq's mapping of each GPT-2 id through
    dict.txt (4 + the line, from 0, of the id's decimal string; 3 = <unk> when absent);
  - llama2.c ids: tools/ref_llama2c_tokenizer.py (a port of upstream run.c) on tok512.bin.

Run:   /work/venv/bin/python tools/make_tokenizer_golden.py [ASSETS]   (default ../shared/assets,
       or $DISTZO_ASSETS)
Writes tests/data/tokenizer/gpt2_golden.jsonl and tests/data/tokenizer/llama2c_golden.jsonl.

Each line is one case: {"text": ...} for the ~430 strings generated here deterministically
(scripts, emoji and ZWJ sequences, combining marks, whitespace runs, digits, contractions,
punctuation, code points new in Unicode 15/16, the empty string, ...), or {"sst2_dev_line": N}
for line N (1-based, the header is line 1) of sst2/dev.tsv, whose text is everything before
the tab. GPT-2 file: "gpt2" (no special tokens) and "opt" (with the leading 2). llama2.c file:
"ids" (with BOS, as run.c encodes prompts) and, for the hand-written strings, "ids_nobos".
Texts never contain "<|endoftext|>" or "</s>": HF would read those as special tokens, distzo
encodes text as plain text.
"""
import json
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import ref_llama2c_tokenizer as llama_ref  # noqa: E402

FIXED = [
    "", " ", "  ", "   ", "\t", "\n", "\n\n", "\r\n", " \n ", "\t \t", " \t\n\r\x0b\x0c",
    "Hello", "Hello world", "Hello  world", "Hello   world", "Hello world ", "Hello world   ",
    " Hello", "  Hello", "\tHello", "\nHello\n", "Hello\n\nworld", "Hello \n world", "a\tb\tc",
    "trailing tab\t", "trailing newlines\n\n\n", "line1\r\nline2\r\n", "    indented code()",
    "I'm", "you're", "they've", "we'll", "he'd", "it's", "can't", "IT'S", "I'M", "'s", "'t", "'re",
    "'", "''", "'''s", "' s", " 's", "don't stop", "rock'n'roll", "x's y'd z'll", "'ll'll've",
    "\u2019s", "don\u2019t",
    "12345", "3.14159", "1,000,000", "-42", "+1e-9", "0x1F", "2024-06-01", "A1B2C3", "abc123def",
    "123abc", " 123", "  123", "\uff11\uff12\uff13", "\u0663\u0664\u0665", "\u216b", "\u00bd \u00b2",
    "\u0967\u0968\u0969",
    "!!!???", "...", "\u2014", "\u00abquotes\u00bb", "\u201csmart quotes\u201d", "(a) [b] {c}",
    "<html><body></body></html>", "C++ & C#", "user@example.com", "http://x.y/z?q=1&r=2",
    "#hashtag @mention", "$100.00", "50%", "a--b__c", "~`^|\\", "  !!  ", " ! ", "!?!? ",
    "\U0001F600", "\U0001F44D\U0001F3FD", "\U0001F468\u200d\U0001F469\u200d\U0001F467\u200d\U0001F466",
    "\U0001F3F3\ufe0f\u200d\U0001F308", "\U0001F1FA\U0001F1F8", "\u2764\ufe0f", "I \u2764\ufe0f NY",
    "\U0001F9D1\U0001F3FF\u200d\U0001F680", "emoji\U0001F600text", "\U0001F600 \U0001F600  \U0001F600",
    "e\u0301", "Ange\u0301lique", "A\u030angstro\u0308m", "a\u0308\u0304", "Z\u0351\u0352\u0353a\u0354l\u0355g\u0356o",
    " \u0301", "\u0301\u0301\u0301",
    "\u4f60\u597d\uff0c\u4e16\u754c", "\u3053\u3093\u306b\u3061\u306f\u4e16\u754c", "\u30ab\u30bf\u30ab\u30ca",
    "\uc548\ub155\ud558\uc138\uc694", "\u0645\u0631\u062d\u0628\u0627 \u0628\u0627\u0644\u0639\u0627\u0644\u0645",
    "\u05e9\u05dc\u05d5\u05dd \u05e2\u05d5\u05dc\u05dd", "\u0928\u092e\u0938\u094d\u0924\u0947 \u0926\u0941\u0928\u093f\u092f\u093e",
    "\u0e2a\u0e27\u0e31\u0e2a\u0e14\u0e35\u0e0a\u0e32\u0e27\u0e42\u0e25\u0e01", "\u041f\u0440\u0438\u0432\u0435\u0442, \u043c\u0438\u0440!",
    "\u0393\u03b5\u03b9\u03ac \u03c3\u03bf\u03c5 \u039a\u03cc\u03c3\u03bc\u03b5", "\u10d2\u10d0\u10db\u10d0\u10e0\u10ef\u10dd\u10d1\u10d0",
    "\u0532\u0561\u0580\u0565\u0582", "\u1230\u120b\u121d", "\u0bb5\u0ba3\u0b95\u0bcd\u0b95\u0bae\u0bcd",
    "\u09a8\u09ae\u09b8\u09cd\u0995\u09be\u09b0", "\u0f56\u0f40\u0fb2\u0f0b\u0f64\u0f72\u0f66\u0f0b",
    "\u182e\u1823\u1829\u182d\u1823\u182f", "\u13a3\u13b3\u13a9", "\u2200x\u2208\u211d: x\u00b2\u22650",
    "\U0001D518\U0001D52B\U0001D526\U0001D520\U0001D52C\U0001D521\U0001D522", "\U0001D7D8\U0001D7D9\U0001D7DA",
    "\U00010348\U00010349", "\U00020000\U0002A6D6",
    "\x01\x02\x03", "a\x1cb\x1dc\x1ed\x1ff", " \x1c ", "\x1c\x1c a", "\x7f", "a\x1bb",
    "\u0085", "a\u0085b", "\u00a0", "a\u00a0b", "a \u00a0 b", "\u00a0\u00a0x", "\u2028", "x\u2029y",
    "\u3000", "\u3000\u3000\u6f22", "\u200b", "a\u200bb", "\ufeffBOM", "\u180e", "a\u202fb\u205fc\u1680d",
    "\u2000\u2001\u2002\u2003x", "\ue000\uf8ff", "\uffff\ufffe", "\ufffd",
    "\u1c89\u1c8a", "\U000105c0\U000105c1", "\U00011f00\U00011f01", "\U0001e4f0\U0001e4f1", "x\U0001e4f0",
    "\ua7cb\ua7cc", "\u0560\u0588", "a\u1c89 \u1c8a!", "1\U0001e4f0x", "\U000105c0.", "!\U00011f00",
    "a" * 300, "ab" * 150, "hello" * 60, " " * 64, "\n" * 40, "1" * 200, "!" * 100, "\u00e9" * 80,
    "!lll", "(ooo)", "-pppp-", "\"lllll\"", "1lll1ooo1ppp",  # equal-score pairs overlapping: leftmost first
    "The quick brown fox jumps over the lazy dog.",
    "it 's a charming and often affecting journey . ",
    "Once upon a time, there was a little girl named Lily. She loved to play outside in the park.",
    "Don't you think it's 10:30 already? Yes! 100% sure...",
]

POOLS = {
    "latin": ["the", "The", "cat", "D\u00fcsseldorf", "na\u00efve", "caf\u00e9", "\u00c6sir", "stra\u00dfe",
              "fran\u00e7ais", "HELLO", "mIxEd", "x"],
    "scripts": ["\u4e2d\u6587", "\u65e5\u672c\u8a9e", "\ud55c\uad6d\uc5b4", "\u0627\u0644\u0639\u0631\u0628\u064a\u0629",
                "\u05e2\u05d1\u05e8\u05d9\u05ea", "\u0939\u093f\u0928\u094d\u0926\u0940", "\u0e44\u0e17\u0e22",
                "\u0440\u0443\u0441\u0441\u043a\u0438\u0439", "\u03b5\u03bb\u03bb\u03b7\u03bd\u03b9\u03ba\u03ac",
                "\u10e5\u10d0\u10e0\u10d7\u10e3\u10da\u10d8", "\u1275\u130d\u122d\u129b", "\u0ba4\u0bae\u0bbf\u0bb4\u0bcd"],
    "digits": ["0", "7", "42", "2024", "3.5", "1,234", "\u0661\u0662", "\uff19", "\u2167", "\u00be"],
    "punct": [".", ",", "!", "?", "...", "--", "'", "\"", "(", ")", "[]", "{}", ";", ":", "@", "#", "&",
              "\u2014", "\u2026", "\u00bf", "\u3002", "\u300c", "\u00b7", "*", "/", "\\", "%", "$", "\u20ac"],
    "space": [" ", " ", " ", "  ", "   ", "\t", "\n", "\r\n", " \n", "\n ", "\u00a0", "\u3000", "\t\t", "\n\n"],
    "contraction": ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'x", "\u2019s"],
    "emoji": ["\U0001F600", "\U0001F680", "\U0001F44B\U0001F3FB", "\U0001F469\u200d\U0001F4BB",
              "\U0001F1EF\U0001F1F5", "\u2728", "\u263a\ufe0f", "\U0001F9D1\u200d\U0001F91D\u200d\U0001F9D1"],
    "combining": ["e\u0301", "n\u0303", "a\u030a", "\u0915\u094d\u0937", "o\u0308\u0332", "\u0301"],
}


def random_strings(rng, count):
    names = sorted(POOLS)
    out = []
    for _ in range(count):
        parts = [rng.choice(POOLS[rng.choice(names)]) for _ in range(rng.randint(1, 24))]
        out.append("".join(parts))
    return out


def random_codepoint_strings(rng, count):
    """Random scalar values (no surrogates, no NUL) from the BMP and the whole range,
    mixed with spaces, so every part of the class tables gets exercised."""
    out = []
    for i in range(count):
        hi = 0xFFFF if i % 2 == 0 else 0x10FFFF
        chars = []
        for _ in range(rng.randint(1, 20)):
            cp = rng.randint(1, hi)
            while 0xD800 <= cp <= 0xDFFF:
                cp = rng.randint(1, hi)
            chars.append(chr(cp))
            if rng.random() < 0.2:
                chars.append(rng.choice([" ", "  ", "\n", "a", "1", "!"]))
        out.append("".join(chars))
    return out


# Letters and digits that Python 3.11's own unicodedata (Unicode 14) does not know yet.
NEW_IN_UNICODE_15_16 = [0x1C89, 0x1C8A, 0xA7CB, 0xA7DC, 0x105C0, 0x11F04, 0x1E4F0, 0x1E4F9, 0x1E030, 0x2EBF0]


def class_probe_strings(rng, count, per_string=5):
    """Code points at (and just outside) the edges of randomly chosen ranges of the committed
    class table, in contexts where HF's ids depend on the code point's class. The table only
    picks the inputs; the expected ids come from HF."""
    import re

    path = os.path.join(ROOT, "src", "tokenizer", "unicode_tables.c")
    with open(path, encoding="utf-8") as f:
        ranges = [(int(a, 16), int(b, 16)) for a, b in re.findall(r"\{0x([0-9A-F]+), 0x([0-9A-F]+), DZ_UNI", f.read())]
    cps = list(NEW_IN_UNICODE_15_16)
    for lo, hi in rng.sample([r for r in ranges if r[1] >= 0x80], count * per_string // 4):
        cps += [lo - 1, lo, hi, hi + 1]
    cps = [c for c in cps if 0 < c <= 0x10FFFF and not 0xD800 <= c <= 0xDFFF]
    # Ids only see a class where it moves a pre-token boundary across a merge: "\n\n" + space
    # merges to one token only as one run; "'s" is one token unless an "other" run takes the
    # quote; a leading space merges with the code point's first byte only when they share a
    # pre-token. (tools/gen_unicode_tables.py --verify-hf checks every code point directly.)
    return ["".join("\n\n%sx %s's a%s1 " % (chr(c), chr(c), chr(c)) for c in cps[i:i + per_string])
            for i in range(0, len(cps), per_string)]


def generated_strings():
    rng = random.Random(20240601)
    texts = FIXED + random_strings(rng, 150) + random_codepoint_strings(rng, 60) + class_probe_strings(rng, 40)
    for t in texts:
        assert "\x00" not in t and "<|endoftext|>" not in t and "</s>" not in t
    return texts


def sst2_dev(assets):
    path = os.path.join(assets, "sst2", "dev.tsv")
    with open(path, encoding="utf-8", newline="") as f:
        lines = f.read().split("\n")
    out = []
    for n, line in enumerate(lines, start=1):
        if n == 1 or not line:
            continue
        out.append((n, line.split("\t", 1)[0]))
    return out


class Gpt2Reference:
    def __init__(self, assets):
        from tokenizers import Tokenizer, decoders, models, pre_tokenizers
        from transformers import GPT2TokenizerFast

        d = os.path.join(assets, "gpt2-bpe")
        with open(os.path.join(d, "encoder.json"), encoding="utf-8") as f:
            vocab = json.load(f)
        with open(os.path.join(d, "vocab.bpe"), encoding="utf-8") as f:
            merges = [tuple(l.split(" ")) for l in f.read().split("\n") if l and not l.startswith("#version")]
        self.hf = GPT2TokenizerFast(vocab=vocab, merges=merges)
        self.bare = Tokenizer(models.BPE.from_file(os.path.join(d, "encoder.json"), os.path.join(d, "vocab.bpe")))
        self.bare.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
        self.bare.decoder = decoders.ByteLevel()
        self.opt_of = {}
        with open(os.path.join(d, "dict.txt"), encoding="utf-8") as f:
            for line_no, line in enumerate(f):
                sym = line.rstrip("\n").rsplit(" ", 1)[0]
                self.opt_of.setdefault(sym, 4 + line_no)
        assert self.gpt2("Hello") == [15496] and self.opt("Hello", [15496]) == [2, 31414]

    def gpt2(self, text):
        ids = self.hf(text, add_special_tokens=False)["input_ids"]
        assert ids == self.bare.encode(text, add_special_tokens=False).ids, repr(text)
        assert self.hf.decode(ids) == text, repr(text)  # byte-level BPE is lossless
        return ids

    def opt(self, text, gpt2_ids):
        return [2] + [self.opt_of.get(str(i), 3) for i in gpt2_ids]


def write_jsonl(path, rows):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False, separators=(",", ":")) + "\n")
    print("wrote %s: %d cases, %d bytes" % (path, len(rows), os.path.getsize(path)))


def main():
    assets = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("DISTZO_ASSETS", os.path.join(ROOT, "..", "shared", "assets"))
    texts = generated_strings()
    dev = sst2_dev(assets)
    g = Gpt2Reference(assets)
    tok = llama_ref.load(os.path.join(assets, "stories260K", "tok512.bin"))

    gpt2_rows, llama_rows = [], []
    for i, t in enumerate(texts):
        ids = g.gpt2(t)
        gpt2_rows.append({"text": t, "gpt2": ids, "opt": g.opt(t, ids)})
        llama_rows.append({"text": t, "ids": llama_ref.encode(tok, t, bos=True)})
        if i < len(FIXED):  # the no-BOS path, on a subset to keep the file small
            llama_rows[-1]["ids_nobos"] = llama_ref.encode(tok, t, bos=False)
    for n, t in dev:
        ids = g.gpt2(t)
        gpt2_rows.append({"sst2_dev_line": n, "gpt2": ids, "opt": g.opt(t, ids)})
        llama_rows.append({"sst2_dev_line": n, "ids": llama_ref.encode(tok, t, bos=True)})

    out = os.path.join(ROOT, "tests", "data", "tokenizer")
    write_jsonl(os.path.join(out, "gpt2_golden.jsonl"), gpt2_rows)
    write_jsonl(os.path.join(out, "llama2c_golden.jsonl"), llama_rows)
    print("%d generated strings + %d SST-2 dev sentences" % (len(texts), len(dev)))


if __name__ == "__main__":
    main()
