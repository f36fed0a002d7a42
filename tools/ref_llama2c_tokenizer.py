"""Reference llama2.c tokenizer: a direct Python port of upstream llama2.c run.c's
build_tokenizer(), encode() and decode(), written independently of distzo's C code.

Use as a module (tools/ref_llama2c.py and tools/make_tokenizer_golden.py import it):
    import ref_llama2c_tokenizer as rt
    tok = rt.load("/work/shared/assets/stories260K/tok512.bin")
    ids = rt.encode(tok, "Once upon a time", bos=True)      # -> list[int]
    text = rt.decode_ids(tok, ids)                          # -> bytes
or run it to print ids:  /work/venv/bin/python tools/ref_llama2c_tokenizer.py TOKENIZER.bin "text"
It writes nothing.

Kept as upstream on purpose (quadratic merge loop, byte-wise UTF-8 grouping with at most
4 bytes per code point, BOS taking part in merges). One deviation, shared with distzo:
when the vocabulary has no " " token the dummy prefix falls back to byte id 0x20 + 3
(upstream would emit -1).
"""
import re
import struct
import sys

BOS, EOS, FIRST_BYTE_ID = 1, 2, 3
_BYTE_PIECE = re.compile(rb"<0x([0-9A-Fa-f]{2})>")


class Tokenizer:
    def __init__(self, vocab, scores, max_token_length):
        self.vocab = vocab  # list[bytes]
        self.scores = scores  # list[float], float32 values
        self.max_token_length = max_token_length
        self.lookup = {}
        for i, piece in enumerate(vocab):
            self.lookup.setdefault(piece, i)

    @property
    def vocab_size(self):
        return len(self.vocab)


def load(path, vocab_size=0):
    """Reads a tokenizer.bin: int32 max_token_length, then per token float32 score,
    int32 length, bytes. vocab_size 0 reads to the end of the file."""
    with open(path, "rb") as f:
        data = f.read()
    (max_len,) = struct.unpack_from("<i", data, 0)
    pos, vocab, scores = 4, [], []
    while (len(vocab) < vocab_size) if vocab_size > 0 else (pos < len(data)):
        score, n = struct.unpack_from("<fi", data, pos)
        if n < 0 or pos + 8 + n > len(data):
            raise ValueError("%s: token %d: bad length %d" % (path, len(vocab), n))
        vocab.append(data[pos + 8 : pos + 8 + n])
        scores.append(score)
        pos += 8 + n
    return Tokenizer(vocab, scores, max_len)


def encode(tok, text, bos=True, eos=False):
    """run.c encode(): text is str (encoded as UTF-8) or bytes; returns a list of ids."""
    data = text.encode("utf-8") if isinstance(text, str) else bytes(text)
    tokens = []
    if bos:
        tokens.append(BOS)
    if data:  # add_dummy_prefix
        tokens.append(tok.lookup.get(b" ", ord(" ") + FIRST_BYTE_ID))

    buf = bytearray()
    for i, c in enumerate(data):
        if (c & 0xC0) != 0x80:  # not a continuation byte: a new code point starts
            buf = bytearray()
        buf.append(c)
        nxt = data[i + 1] if i + 1 < len(data) else 0
        if (nxt & 0xC0) == 0x80 and len(buf) < 4:
            continue
        tid = tok.lookup.get(bytes(buf), -1)
        if tid != -1:
            tokens.append(tid)
        else:  # byte fallback
            tokens.extend(b + FIRST_BYTE_ID for b in buf)
        buf = bytearray()

    while True:  # merge the best-scoring adjacent pair until none merges
        best_score, best_id, best_idx = -1e10, -1, -1
        for i in range(len(tokens) - 1):
            tid = tok.lookup.get(tok.vocab[tokens[i]] + tok.vocab[tokens[i + 1]], -1)
            if tid != -1 and tok.scores[tid] > best_score:
                best_score, best_id, best_idx = tok.scores[tid], tid, i
        if best_idx == -1:
            break
        tokens[best_idx] = best_id
        del tokens[best_idx + 1]

    if eos:
        tokens.append(EOS)
    return tokens


def decode(tok, prev_token, token):
    """run.c decode(): the bytes of one token given the previous one."""
    piece = tok.vocab[token]
    if prev_token == BOS and piece[:1] == b" ":  # sentencepiece strips the dummy prefix after BOS
        piece = piece[1:]
    m = _BYTE_PIECE.fullmatch(piece)
    if m:
        return bytes([int(m.group(1), 16)])
    return piece


def decode_ids(tok, ids):
    """Concatenated decode of a sequence (each token decoded after its predecessor)."""
    out, prev = bytearray(), -1
    for t in ids:
        out += decode(tok, prev, t)
        prev = t
    return bytes(out)


if __name__ == "__main__":
    t = load(sys.argv[1])
    print(encode(t, sys.argv[2], bos=True))
