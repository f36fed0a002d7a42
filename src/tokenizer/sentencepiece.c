/* SentencePiece's tokenizer.model: a protobuf ModelProto, read with a small wire-format
 * reader (no protobuf library). Only what the ids depend on is taken: the pieces (text,
 * score, type), trainer_spec's model type and special ids, normalizer_spec's name and
 * whitespace flags. BPE models with byte fallback and the identity normalizer (Llama-2,
 * TinyLlama, Mistral) are supported; anything else is refused naming the field. */
#include <stdlib.h>
#include <string.h>

#include "core/bytes.h"
#include "core/util.h"
#include "tokenizer/build.h"
#include "tokenizer/internal.h"

typedef struct pb {
    const uint8_t *p, *end;
} pb;

typedef struct pb_field {
    uint32_t number;
    int wire;
    uint64_t value;      /* varint, or the raw 32/64 bits */
    const uint8_t *data; /* wire type 2 */
    size_t len;
} pb_field;

static int pb_varint(pb *r, uint64_t *v) {
    *v = 0;
    for (int shift = 0; shift < 64 && r->p < r->end; shift += 7) {
        uint8_t b = *r->p++;
        *v |= (uint64_t)(b & 0x7F) << shift;
        if (!(b & 0x80)) return 0;
    }
    return -1;
}

/* The next field: 1, 0 at the end, -1 when malformed. */
static int pb_next(pb *r, pb_field *f) {
    if (r->p >= r->end) return 0;
    uint64_t key;
    if (pb_varint(r, &key) || (key >> 3) == 0 || (key >> 3) > UINT32_MAX) return -1;
    f->number = (uint32_t)(key >> 3);
    f->wire = (int)(key & 7);
    f->data = NULL;
    f->len = 0;
    size_t left = (size_t)(r->end - r->p);
    switch (f->wire) {
    case 0: return pb_varint(r, &f->value) ? -1 : 1;
    case 1:
    case 5: {
        size_t n = f->wire == 1 ? 8 : 4;
        if (left < n) return -1;
        f->value = 0;
        memcpy(&f->value, r->p, n); /* little-endian, as every host we build on */
        r->p += n;
        return 1;
    }
    case 2:
        if (pb_varint(r, &f->value) || f->value > (uint64_t)(r->end - r->p)) return -1;
        f->data = r->p;
        f->len = (size_t)f->value;
        r->p += f->len;
        return 1;
    default: return -1; /* groups: not in sentencepiece_model.proto */
    }
}

typedef struct spm_model {
    char **text;
    float *score;
    int32_t *type;
    int n, cap;
    int model_type, byte_fallback, unk, bos, eos, pad;
    char norm_name[64];
    int add_dummy_prefix, remove_extra_whitespaces;
} spm_model;

static int add_piece(spm_model *m, const uint8_t *data, size_t len) {
    pb r = {data, data + len};
    pb_field f;
    const uint8_t *text = (const uint8_t *)"";
    size_t text_len = 0;
    float score = 0;
    int type = DZ_TOKEN_NORMAL, rc;
    while ((rc = pb_next(&r, &f)) == 1) {
        if (f.number == 1 && f.wire == 2) text = f.data, text_len = f.len;
        else if (f.number == 2 && f.wire == 5) {
            uint32_t bits = (uint32_t)f.value;
            memcpy(&score, &bits, 4);
        } else if (f.number == 3 && f.wire == 0) type = (int)f.value;
    }
    if (rc < 0) return -1;
    if (m->n == m->cap) {
        int cap = m->cap ? 2 * m->cap : 1024;
        char **t = realloc(m->text, (size_t)cap * sizeof *t);
        if (t) m->text = t;
        float *s = realloc(m->score, (size_t)cap * sizeof *s);
        if (s) m->score = s;
        int32_t *y = realloc(m->type, (size_t)cap * sizeof *y);
        if (y) m->type = y;
        if (!t || !s || !y) return -2;
        m->cap = cap;
    }
    char *copy = malloc(text_len + 1);
    if (!copy) return -2;
    memcpy(copy, text, text_len);
    copy[text_len] = '\0';
    m->text[m->n] = copy;
    m->score[m->n] = score;
    m->type[m->n++] = type;
    return 0;
}

static int read_trainer_spec(spm_model *m, const uint8_t *data, size_t len) {
    pb r = {data, data + len};
    pb_field f;
    int rc;
    while ((rc = pb_next(&r, &f)) == 1) {
        if (f.wire != 0) continue;
        int32_t v = (int32_t)(int64_t)f.value; /* int32 fields: negatives are 10-byte varints */
        switch (f.number) {
        case 3: m->model_type = v; break;
        case 35: m->byte_fallback = v != 0; break;
        case 40: m->unk = v; break;
        case 41: m->bos = v; break;
        case 42: m->eos = v; break;
        case 43: m->pad = v; break;
        default: break;
        }
    }
    return rc;
}

static int read_normalizer_spec(spm_model *m, const uint8_t *data, size_t len) {
    pb r = {data, data + len};
    pb_field f;
    int rc;
    while ((rc = pb_next(&r, &f)) == 1) {
        if (f.number == 1 && f.wire == 2) {
            size_t n = f.len < sizeof m->norm_name - 1 ? f.len : sizeof m->norm_name - 1;
            memcpy(m->norm_name, f.data, n);
            m->norm_name[n] = '\0';
        } else if (f.number == 3 && f.wire == 0) m->add_dummy_prefix = f.value != 0;
        else if (f.number == 4 && f.wire == 0) m->remove_extra_whitespaces = f.value != 0;
    }
    return rc;
}

static dz_status parse(spm_model *m, const char *path, const uint8_t *buf, size_t len, dz_error *err) {
    pb r = {buf, buf + len};
    pb_field f;
    int rc;
    while ((rc = pb_next(&r, &f)) == 1) {
        if (f.wire != 2) continue;
        int sub = 0;
        if (f.number == 1) sub = add_piece(m, f.data, f.len);
        else if (f.number == 2) sub = read_trainer_spec(m, f.data, f.len) < 0 ? -1 : 0;
        else if (f.number == 3) sub = read_normalizer_spec(m, f.data, f.len) < 0 ? -1 : 0;
        if (sub == -2) return dz_fail(err, DZ_ERR_NOMEM, "%s: out of memory", path);
        if (sub < 0) return dz_fail(err, DZ_ERR_FORMAT, "%s: malformed protobuf in field %u (pieces %d)", path, f.number, m->n);
    }
    if (rc < 0)
        return dz_fail(err, DZ_ERR_FORMAT, "%s: not a SentencePiece model: malformed protobuf at byte %zu", path,
                       (size_t)(r.p - buf));
    if (m->n == 0) return dz_fail(err, DZ_ERR_FORMAT, "%s: pieces: none (not a SentencePiece model?)", path);
    static const char *const types[] = {"?", "unigram", "BPE", "word", "char"};
    if (m->model_type != 2)
        return dz_fail(err, DZ_ERR_UNSUPPORTED, "%s: trainer_spec.model_type: %s is not supported (BPE only)", path,
                       m->model_type >= 1 && m->model_type <= 4 ? types[m->model_type] : "unknown");
    if (m->norm_name[0] && strcmp(m->norm_name, "identity") != 0)
        return dz_fail(err, DZ_ERR_UNSUPPORTED, "%s: normalizer_spec.name: \"%s\" is not supported (identity only)",
                       path, m->norm_name);
    if (m->remove_extra_whitespaces)
        return dz_fail(err, DZ_ERR_UNSUPPORTED, "%s: normalizer_spec.remove_extra_whitespaces: true is not supported",
                       path);
    return DZ_OK;
}

dz_status dz_sentencepiece_load(const char *path, dz_tokenizer **out, dz_error *err) {
    *out = NULL;
    char *buf;
    size_t len;
    dz_status st = dz_read_file(path, &buf, &len, err);
    if (st != DZ_OK) return st;
    /* proto defaults: unigram, unk 0, bos 1, eos 2, pad -1, dummy prefix and whitespace removal on */
    spm_model m = {.model_type = 1,
                   .unk = 0, .bos = 1, .eos = 2, .pad = -1, .add_dummy_prefix = 1, .remove_extra_whitespaces = 1};
    st = parse(&m, path, (const uint8_t *)buf, len, err);
    free(buf);
    if (st == DZ_OK) {
        dz_vocab_spec spec = dz_vocab_spec_init(path);
        spec.model = "llama";
        spec.tokens = (const char *const *)m.text;
        spec.n_tokens = m.n;
        spec.scores = m.score;
        spec.types = m.type;
        spec.bos = m.bos < m.n ? m.bos : -1;
        spec.eos = m.eos < m.n ? m.eos : -1;
        spec.pad = m.pad < m.n ? m.pad : -1;
        spec.unk = m.unk < m.n ? m.unk : -1;
        spec.add_bos = spec.bos >= 0; /* as Llama's tokenizers add <s> */
        spec.add_dummy_prefix = m.add_dummy_prefix;
        spec.tokens_field = "pieces";
        st = dz_tokenizer_from_vocab(&spec, out, err);
    }
    for (int i = 0; i < m.n; i++) free(m.text[i]);
    free(m.text);
    free(m.score);
    free(m.type);
    return st;
}

/* ---- writing: the same fields back, so a checkpoint's tokenizer.model loads in distzo
 * and in sentencepiece / transformers with the same ids ---- */

static void w_varint(dz_bytes *w, uint64_t v) {
    uint8_t b[10];
    int n = 0;
    do {
        b[n] = (uint8_t)(v & 0x7F);
        v >>= 7;
        if (v) b[n] |= 0x80;
        n++;
    } while (v);
    dz_bytes_put(w, b, (size_t)n);
}

static void w_key(dz_bytes *w, uint32_t field, int wire) { w_varint(w, (uint64_t)field << 3 | (uint64_t)wire); }
static void w_int(dz_bytes *w, uint32_t field, int64_t v) { w_key(w, field, 0), w_varint(w, (uint64_t)v); }
static void w_sub(dz_bytes *w, uint32_t field, const dz_bytes *sub) {
    w_key(w, field, 2);
    w_varint(w, sub->len);
    dz_bytes_put(w, sub->p, sub->len);
    w->oom |= sub->oom;
}

static int piece_type(const dz_tokenizer *tok, int id) {
    if (id >= tok->byte_base && id < tok->byte_base + 256) return DZ_TOKEN_BYTE;
    if (dz_pieces_get(&tok->mergeable, id, NULL)) return DZ_TOKEN_NORMAL;
    return id == tok->special[DZ_SPECIAL_UNK] ? DZ_TOKEN_UNKNOWN : DZ_TOKEN_CONTROL;
}

dz_status dz_save_sentencepiece(const dz_tokenizer *tok, const char *dir, dz_error *err) {
    dz_bytes model = {0}, piece = {0}, text = {0};
    for (int id = 0; id < tok->vocab_size; id++) {
        int len;
        const char *s = dz_pieces_get(&tok->pieces, id, &len);
        text.len = piece.len = 0;
        for (int i = 0; s && i < len; i++) dz_bytes_put(&text, s[i] == ' ' ? "\xE2\x96\x81" : &s[i], s[i] == ' ' ? 3 : 1);
        w_sub(&piece, 1, &text);
        uint32_t bits;
        memcpy(&bits, &tok->scores[id], 4);
        w_key(&piece, 2, 5);
        dz_bytes_put(&piece, &bits, 4);
        w_int(&piece, 3, piece_type(tok, id));
        w_sub(&model, 1, &piece);
    }
    dz_bytes trainer = {0}, norm = {0};
    w_int(&trainer, 3, 2); /* BPE */
    w_int(&trainer, 35, 1); /* byte_fallback */
    static const uint32_t id_fields[DZ_SPECIAL_COUNT] = {41, 42, 43, 40};
    for (int k = 0; k < DZ_SPECIAL_COUNT; k++) w_int(&trainer, id_fields[k], tok->special[k]);
    w_sub(&model, 2, &trainer);
    w_key(&norm, 1, 2);
    w_varint(&norm, 8);
    dz_bytes_put(&norm, "identity", 8);
    w_int(&norm, 3, tok->dummy_prefix);
    w_int(&norm, 4, 0); /* remove_extra_whitespaces: off, as read */
    w_int(&norm, 5, 1);
    w_sub(&model, 3, &norm);
    char path[4096];
    dz_status st = model.oom ? dz_fail(err, DZ_ERR_NOMEM, "%s: out of memory", dir)
                   : dz_path_join(path, sizeof path, dir, "tokenizer.model") != 0
                       ? dz_fail(err, DZ_ERR_INVALID, "%s: path too long", dir)
                       : dz_write_file_atomic(path, model.p, model.len, err);
    free(model.p), free(piece.p), free(text.p), free(trainer.p), free(norm.p);
    return st;
}
