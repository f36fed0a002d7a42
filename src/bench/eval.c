/* bench eval: SST-2 prompt classification on a real model, eval forwards and ZO steps
 * against the GEMM work they cannot avoid. The ideal of a batch is the GEMMs timed in the
 * same run on exactly its Linear shapes, the faster of OpenBLAS sgemm and distzo's GEMM
 * shape by shape: M = the rows the batch needs (no padding; each example's context once,
 * each candidate's tokens but the last) for the layers, M = the scored rows for the head
 * over the whole vocabulary. */
#include "distzo/benchmarks.h"

#include <stdlib.h>

#include "bench/adapter.h"
#include "bench/losses.h"
#include "bench/passes.h"
#include "bench/shapes.h"
#include "run/peft.h"

enum { K = 2 }; /* the label words scored */

typedef struct eval_batch_work {
    dz_class_batch bb;
    int ex0, real_tokens, padded_tokens, head_rows;
    double t_eval, t_step, t_ideal[3]; /* best seconds seen; the ideal: OpenBLAS, distzo's GEMM, the faster per shape */
    dz_zo_step_time step_time;         /* the phases of the fastest step */
} eval_batch_work;

/* The run's state: the batches, the forward and engine, the scratch of one batch. */
typedef struct eval_bench {
    const dz_bench_eval_spec *s;
    dz_model *m;
    dz_dataset ds;
    dz_class_set cs;
    dz_backend *be;
    dz_forward *f;  /* the steps' */
    dz_zo_engine *e;
    dz_model *adapter; /* under --peft: the adapter the steps train over m, else NULL */
    dz_forward *fa;    /* under --peft: the eval forwards', the adapter attached; else NULL (f serves) */
    eval_batch_work *bw;
    float *lp, *plp, *scores;
    int *ex, *lab;
    double g_sum;
} eval_bench;

/* The averages over the batches. */
typedef struct eval_summary {
    double te, ts, ti[3], ceiling;
    dz_zo_step_time ph;
    long real, padded, head;
} eval_summary;

/* Seconds of one forward's GEMMs at the speed measured now: out[impl] per implementation,
 * out[2] the faster of the two shape by shape (the ideal the ratios use). */
static void ideal_seconds(const dz_config *c, const eval_batch_work *b, double out[3]) {
    dz_gemm_shape s[DZ_BENCH_MAX_SHAPES];
    const int n = dz_bench_batch_shapes(c, b->real_tokens, b->head_rows, s);
    out[0] = out[1] = out[2] = 0.0;
    for (int i = 0; i < n; i++) {
        double t[2];
        for (int impl = DZ_BENCH_GEMM_OPENBLAS; impl <= DZ_BENCH_GEMM_DISTZO; impl++) {
            const double gf = dz_bench_gemm_gflops((dz_bench_gemm)impl, s[i].M, s[i].N, s[i].K, 0.05);
            t[impl] = 2.0 * s[i].M * s[i].N * s[i].K * s[i].count / (gf * 1e9);
            out[impl] += t[impl];
        }
        out[2] += t[0] < t[1] ? t[0] : t[1];
    }
}

/* The rows a forward of the batch cannot do without: each example's context once (its
 * candidates share it), then each candidate's tokens but the last (which predicts
 * nothing); and the padded rows the layout has. */
static void eval_batch_tokens(eval_batch_work *b, const dz_class_set *cs, int n) {
    const dz_class_batch *bb = &b->bb;
    b->real_tokens = 0;
    for (int e = b->ex0; e < b->ex0 + n; e++) {
        const dz_cand_seq *q = &cs->seqs[(size_t)e * cs->n_labels];
        int ctx = q[0].len - q[0].cand_len;
        for (int k = 1; k < cs->n_labels; k++) ctx = q[k].len - q[k].cand_len < ctx ? q[k].len - q[k].cand_len : ctx;
        b->real_tokens += ctx;
        for (int k = 0; k < cs->n_labels; k++) b->real_tokens += q[k].len - 1 - ctx;
    }
    b->padded_tokens = bb->n_seqs * bb->T + (bb->tree ? bb->n_prompts * bb->PT : 0);
    b->head_rows = bb->n_rows + bb->n_p_rows;
}

/* The first batch x batches examples, in file order (as eval reads them), as candidates. */
static dz_status load_examples(eval_bench *b, const dz_tokenizer *tok, dz_error *err) {
    const dz_bench_eval_spec *s = b->s;
    dz_prompt_spec ps;
    dz_prompt_spec_default_sst2(&ps);
    /* the steps update m in place; under an adapter m is the read-only base, kept as loaded */
    dz_status st = b->adapter ? DZ_OK : dz_model_make_owned(b->m, err);
    if (st == DZ_OK && s->label_words) st = dz_prompt_spec_set_labels(&ps, s->label_words, err);
    if (st == DZ_OK) st = dz_dataset_load_sst2(s->data, &b->ds, err);
    if (st == DZ_OK && b->ds.count < s->batch * s->batches)
        st = dz_fail(err, DZ_ERR_INVALID, "%s: %d examples, fewer than --batch %d x --batches %d", s->data, b->ds.count,
                     s->batch, s->batches);
    dz_dataset first = b->ds;
    first.count = s->batch * s->batches;
    if (st == DZ_OK) st = dz_class_set_build(&first, &ps, tok, dz_model_config(b->m)->max_seq_len, &b->cs, err);
    if (st == DZ_OK && b->cs.n_labels != K)
        st = dz_fail(err, DZ_ERR_INVALID, "bench eval scores %d label words, not %d", K, b->cs.n_labels);
    return st;
}

/* Under --peft: the adapter over the read-only base (adapter.h); else none. */
static dz_status eval_adapter(eval_bench *b, dz_error *err) {
    const dz_bench_eval_spec *s = b->s;
    dz_train_config c;
    dz_lora_spec lora;
    dz_status st = dz_bench_adapter_config(s->model, &s->peft, &c, err);
    if (st != DZ_OK || !dz_train_peft_lora(&c, &lora)) return st;
    return lora.prefix_tokens > 0 ? dz_prefix_create(b->m, &lora, c.optim.seed, s->model, &b->adapter, err)
                                  : dz_lora_create(dz_model_config(b->m), &lora, c.optim.seed, s->model, &b->adapter, err);
}

/* The steps' engine: over m, or over the adapter with m as its base (then the eval
 * forwards get a forward of their own with the adapter attached). */
static dz_status eval_engine(eval_bench *b, dz_error *err) {
    const dz_bench_eval_spec *s = b->s;
    const dz_zo_params zp = {.seed = 1, .eps = 1e-3f, .q = 1, .fuse = 1, .rng_v2 = s->rng_v2, .rademacher = s->rademacher};
    const int rows = s->batch * K, streams = s->flat ? 2 : 4;
    dz_status st = dz_forward_create_backend(b->m, b->be, rows, b->cs.max_len, 0, streams, &b->f, err);
    if (st != DZ_OK || !b->adapter) return st == DZ_OK ? dz_zo_engine_create(b->m, b->f, &zp, &b->e, err) : st;
    const dz_weight_source base = dz_model_weights(b->m);
    st = dz_zo_engine_create(b->adapter, b->f, &zp, &b->e, err);
    if (st == DZ_OK) st = dz_zo_engine_set_adapter(b->e, &base, err);
    if (st == DZ_OK) st = dz_forward_create_backend(b->m, b->be, rows, b->cs.max_len, 0, streams / 2, &b->fa, err);
    return st == DZ_OK ? dz_forward_set_adapter(b->fa, b->adapter, NULL, err) : st;
}

/* The forward and engine, the scratch, and each batch laid out once. */
static dz_status eval_bench_init(eval_bench *b, const dz_tokenizer *tok, dz_error *err) {
    const dz_bench_eval_spec *s = b->s;
    const int batch = s->batch;
    b->bw = calloc((size_t)s->batches, sizeof *b->bw);
    dz_status st = b->bw ? eval_adapter(b, err) : dz_fail(err, DZ_ERR_NOMEM, "out of memory");
    if (st == DZ_OK) st = load_examples(b, tok, err);
    if (st == DZ_OK) st = dz_backend_create(s->backend, &b->be, err);
    if (st == DZ_OK) st = eval_engine(b, err);
    const size_t rows_cap = (size_t)batch * K * b->cs.max_len;
    if (st == DZ_OK) {
        b->lp = malloc(sizeof(float) * rows_cap), b->plp = malloc(sizeof(float) * rows_cap);
        b->scores = malloc(sizeof(float) * (size_t)batch * K);
        b->ex = malloc(sizeof(int) * (size_t)batch), b->lab = malloc(sizeof(int) * (size_t)batch);
        if (!b->lp || !b->plp || !b->scores || !b->ex || !b->lab) st = dz_fail(err, DZ_ERR_NOMEM, "out of memory");
    }
    for (int i = 0; st == DZ_OK && i < s->batches; i++) {
        eval_batch_work *w = &b->bw[i];
        w->ex0 = i * batch;
        w->t_eval = w->t_step = w->t_ideal[0] = w->t_ideal[1] = w->t_ideal[2] = 1e30;
        for (int j = 0; j < batch; j++) b->ex[j] = w->ex0 + j;
        st = dz_class_batch_init(&w->bb, batch * K, b->cs.max_len, !s->flat, err);
        if (st == DZ_OK) st = dz_class_batch_fill(&w->bb, &b->cs, b->ex, batch, err);
        if (st == DZ_OK) eval_batch_tokens(w, &b->cs, batch);
    }
    return st;
}

static void eval_bench_free(eval_bench *b) {
    for (int i = 0; b->bw && i < b->s->batches; i++) dz_class_batch_free(&b->bw[i].bb);
    free(b->bw), free(b->lp), free(b->plp), free(b->scores), free(b->ex), free(b->lab);
    dz_zo_engine_free(b->e);
    dz_forward_free(b->fa);
    dz_forward_free(b->f);
    dz_model_free(b->adapter);
    dz_backend_free(b->be);
    dz_class_set_free(&b->cs);
    dz_dataset_free(&b->ds);
}

/* Round r (0 warms up) interleaves, batch by batch, the eval forward, the ZO step and the
 * GEMMs of the ideal, so all three see the same moments of a shared machine. */
static dz_status time_round(eval_bench *b, int r, dz_error *err) {
    const dz_weight_source w = dz_model_weights(b->m);
    const int batch = b->s->batch, batches = b->s->batches;
    for (int i = 0; i < batches; i++) {
        eval_batch_work *bw = &b->bw[i];
        double t0 = dz_now();
        dz_status st = dz_class_batch_forward(b->fa ? b->fa : b->f, &w, &bw->bb, b->lp, b->plp, err);
        if (st != DZ_OK) return st;
        double dt = dz_now() - t0;
        if (r > 0 && dt < bw->t_eval) bw->t_eval = dt;
        for (int j = 0; j < batch; j++) b->lab[j] = b->cs.labels[bw->ex0 + j];
        dz_bench_class_loss cl = {.bb = &bw->bb, .labels = b->lab, .n = batch, .K = K, .scores = b->scores};
        const dz_zo_batch zb = dz_class_batch_zo(&bw->bb, dz_bench_class_loss_fn, &cl);
        dz_zo_step_result res;
        t0 = dz_now();
        if ((st = dz_zo_step(b->e, (uint32_t)(r * batches + i), 0.0f, &zb, &res, err)) != DZ_OK) return st;
        dt = dz_now() - t0;
        if (r > 0 && dt < bw->t_step) bw->t_step = dt, bw->step_time = res.time;
        if (r > 0) b->g_sum += res.g[0];
        if (r == 0) continue;
        double ideal[3];
        ideal_seconds(dz_model_config(b->m), bw, ideal);
        for (int k = 0; k < 3; k++)
            if (ideal[k] < bw->t_ideal[k]) bw->t_ideal[k] = ideal[k];
    }
    return DZ_OK;
}

static eval_summary summarise(const eval_bench *b, const dz_bench_zo_passes *passes) {
    const int batches = b->s->batches;
    eval_summary x = {0};
    for (int i = 0; i < batches; i++) {
        const eval_batch_work *w = &b->bw[i];
        x.te += w->t_eval, x.ts += w->t_step, x.ti[0] += w->t_ideal[0], x.ti[1] += w->t_ideal[1], x.ti[2] += w->t_ideal[2];
        x.ph.begin += w->step_time.begin / batches, x.ph.pass += w->step_time.pass / batches;
        x.ph.layers += w->step_time.layers / batches, x.ph.head += w->step_time.head / batches;
        x.real += w->real_tokens, x.padded += w->padded_tokens, x.head += w->head_rows;
    }
    x.te /= batches, x.ts /= batches, x.ti[0] /= batches, x.ti[1] /= batches, x.ti[2] /= batches;
    /* what a step would take if its forwards ran at the ideal's speed and it added only
     * the z it must draw (2 per parameter of the steps' version, docs/ZO_RNG.md): the most
     * 2 x ideal / step can be */
    const double z = b->s->rng_v2 ? passes->zgen_v2_s : passes->zgen_s;
    x.ceiling = 2 * x.ti[2] / (2 * x.ti[2] + z);
    return x;
}

static void print_json(const dz_bench_report *r, const eval_bench *b, const eval_summary *x,
                       const dz_bench_zo_passes *passes) {
    const dz_bench_eval_spec *s = b->s;
    const int batches = s->batches;
    const double ideal = x->ti[2], te = x->te, ts = x->ts;
    fprintf(r->out, "{\"model\": ");
    dz_write_json_string(r->out, r->model);
    fprintf(r->out, ", \"batch\": %d, \"batches\": %d, \"repeat\": %d, \"threads\": %d, \"layout\": \"%s\", "
           "\"real_tokens_per_batch\": %.1f, \"padded_tokens_per_batch\": %.1f, \"head_rows_per_batch\": %.1f, "
           "\"ideal_seconds\": %.5f, \"openblas_ideal_seconds\": %.5f, \"distzo_gemm_ideal_seconds\": %.5f, \"eval_seconds\": %.5f, "
           "\"step_seconds\": %.5f, \"eval_ratio\": %.4f, \"step_ratio\": %.4f, \"step_over_2_evals\": %.4f, "
           "\"g_sum\": %.17g, \"blas_core\": \"%s\", \"isa\": \"%s\", \"step_phases_seconds\": {\"begin\": %.5f, "
           "\"pass\": %.5f, \"layers\": %.5f, \"head\": %.5f}, \"step_ceiling\": %.4f, \"rng\": \"%s\", \"perturbation\": \"%s\"",
           s->batch, batches, s->repeat, dz_runtime_threads(), s->flat ? "flat" : "shared prompts", (double)x->real / batches,
           (double)x->padded / batches, (double)x->head / batches, ideal, x->ti[0], x->ti[1], te, ts, ideal / te, 2 * ideal / ts,
           ts / (2 * te), b->g_sum, dz_bench_reference_core(), dz_runtime_kernels(), x->ph.begin, x->ph.pass, x->ph.layers,
           x->ph.head, x->ceiling, s->rng_v2 ? "v2" : "v1", s->rademacher ? "rademacher" : "gaussian");
    if (b->adapter)
        fprintf(r->out, ", \"peft\": \"%s\", \"keep_quantized\": %s, \"adapter_parameters\": %lld, \"two_evals_over_step\": %.4f",
                s->peft.method, s->peft.keep_quantized ? "true" : "false",
                (long long)dz_param_table_numel(dz_model_params(b->adapter)), 2 * te / ts);
    dz_bench_print_passes(r->out, passes, ts, 2 * te, s->rng_v2, 1);
    fprintf(r->out, "}\n");
}

static void print_text(const dz_bench_report *r, const eval_bench *b, const eval_summary *x,
                       const dz_bench_zo_passes *passes) {
    FILE *out = r->out;
    const dz_bench_eval_spec *s = b->s;
    const int batches = s->batches;
    const double ideal = x->ti[2], te = x->te, ts = x->ts;
    fprintf(out, "eval     %s, SST-2 %d batches of %d, %s, %d threads, ZO_RNG %s, %s z\n", r->model, batches, s->batch,
            s->flat ? "every candidate a full sequence" : "candidates continue shared prompts", dz_runtime_threads(),
            s->rng_v2 ? "v2" : "v1", s->rademacher ? "Rademacher" : "Gaussian");
    fprintf(out, "gemm     %s\n", dz_runtime_gemm());
    fprintf(out, "tokens   %.1f needed per batch (the batch layout pads to %.1f), head on %.1f rows\n",
            (double)x->real / batches, (double)x->padded / batches, (double)x->head / batches);
    fprintf(out, "ideal    %.2f ms: the Linear GEMMs on the real shapes, the faster of OpenBLAS %s sgemm\n"
           "         (%.2f ms) and distzo's GEMM (%.2f ms) shape by shape\n",
           1e3 * ideal, dz_bench_reference_core(), 1e3 * x->ti[0], 1e3 * x->ti[1]);
    fprintf(out, "eval     %.2f ms per batch forward: ideal / eval = %.1f%%\n", 1e3 * te, 100 * ideal / te);
    fprintf(out, "step     %.2f ms per ZO step: 2 x ideal / step = %.1f%%, step / (2 x eval) = %.3f\n", 1e3 * ts,
            200 * ideal / ts, ts / (2 * te));
    fprintf(out, "         the fastest steps' phases: the layers' forwards %.1f ms (both signs), the blocks' pass\n"
           "         (update, then w+ / w-) %.1f, the head %.1f, the global block's update and the embeddings %.1f\n",
           1e3 * x->ph.layers, 1e3 * x->ph.pass, 1e3 * x->ph.head, 1e3 * x->ph.begin);
    fprintf(out, "ceiling  2 x ideal / (2 x ideal + z alone) = %.1f%%: a step whose forwards ran at the ideal's speed\n"
           "         and that added only the z it must draw (passes below)\n", 100 * x->ceiling);
    fprintf(out, "g        sum of the timed steps %.17g (compare it across builds, --threads, DISTZO_ISA)\n", b->g_sum);
    if (b->adapter)
        fprintf(out, "adapter  %s, %lld parameters%s, attached to the eval forwards: 2 x eval / step = %.3f\n",
                s->peft.method, (long long)dz_param_table_numel(dz_model_params(b->adapter)),
                s->peft.keep_quantized ? ", base kept quantized" : "", 2 * te / ts);
    dz_bench_print_passes(out, passes, ts, 2 * te, s->rng_v2, 0);
}

dz_status dz_bench_eval(dz_model *m, const dz_tokenizer *tok, const dz_bench_eval_spec *s, const dz_bench_report *r,
                        dz_error *err) {
    eval_bench b = {.s = s, .m = m};
    dz_status st = eval_bench_init(&b, tok, err);
    for (int round = 0; st == DZ_OK && round <= s->repeat; round++) st = time_round(&b, round, err);
    dz_bench_zo_passes passes;
    if (st == DZ_OK) st = dz_bench_model_passes(b.adapter ? b.adapter : m, s->repeat, s->rademacher, &passes, err);
    if (st == DZ_OK) {
        const eval_summary x = summarise(&b, &passes);
        if (r->json) print_json(r, &b, &x, &passes);
        else print_text(r, &b, &x, &passes);
    }
    eval_bench_free(&b);
    return st;
}
