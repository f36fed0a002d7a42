/* The run's parameter-efficient settings (peft.h): their check and the adapter's spec. The
 * seed log's fingerprint of the layout is peft_log.c's. */
#include <string.h>

#include "run/peft.h"

int dz_train_peft_lora(const dz_train_config *c, dz_lora_spec *spec) {
    if (c->peft.method && !strcmp(c->peft.method, "prefix")) {
        *spec = (dz_lora_spec){.prefix_tokens = c->peft.prefix_tokens};
        return 1;
    }
    if (!c->peft.method || strcmp(c->peft.method, "lora")) return 0;
    *spec = (dz_lora_spec){.rank = c->peft.lora_rank, .alpha = c->peft.lora_alpha};
    dz_error e = {0};
    if (dz_lora_parse_targets(c->peft.lora_targets, &spec->targets, &e) != DZ_OK) spec->targets = 0; /* checked before */
    return 1;
}

/* An adapter's setting given to a run that trains no such adapter would be ignored, and a
 * run.json or --config holding one would not be written back as read: refused, as the
 * command line's --lora-* / --prefix-* are. Only settings that differ from the defaults count. */
static dz_status refuse_unused(const dz_train_peft *p, int lora, int prefix, dz_error *err) {
    dz_train_config d;
    dz_train_config_default(&d);
    const char *trains = lora ? "a LoRA adapter" : prefix ? "a prefix" : "every parameter";
    if (!lora && (p->lora_rank != d.peft.lora_rank || p->lora_alpha != d.peft.lora_alpha ||
                  p->lora_dropout != d.peft.lora_dropout ||
                  strcmp(p->lora_targets ? p->lora_targets : "", d.peft.lora_targets)))
        return dz_fail(err, DZ_ERR_INVALID, "lora_rank/lora_alpha/lora_targets/lora_dropout: set for a run that trains %s "
                       "(give --peft lora, or leave them at their defaults)", trains);
    if (!prefix && p->prefix_tokens != d.peft.prefix_tokens)
        return dz_fail(err, DZ_ERR_INVALID, "prefix_tokens %d: set for a run that trains %s (give --peft prefix, or "
                       "leave it at %d)", p->prefix_tokens, trains, d.peft.prefix_tokens);
    return DZ_OK;
}

dz_status dz_train_peft_check(const dz_train_config *c, dz_error *err) {
    const dz_train_peft *p = &c->peft;
    const int lora = p->method && !strcmp(p->method, "lora"), prefix = p->method && !strcmp(p->method, "prefix");
    const int known = !p->method || !strcmp(p->method, "none") || lora || prefix; /* else refused below */
    dz_status st = known ? refuse_unused(p, lora, prefix, err) : DZ_OK;
    if (st != DZ_OK) return st;
    if ((!p->method || !strcmp(p->method, "none")) && p->lora_init)
        return dz_fail(err, DZ_ERR_INVALID, "--adapter %s: the run trains every parameter (give --peft lora or "
                       "prefix to train the adapter on)", p->lora_init);
    if (!p->method || !strcmp(p->method, "none")) return DZ_OK;
    if (!strcmp(p->method, "prefix"))
        return p->prefix_tokens >= 1 && p->prefix_tokens <= 4096
                   ? DZ_OK
                   : dz_fail(err, DZ_ERR_INVALID, "--prefix-tokens %d: expected 1..4096", p->prefix_tokens);
    if (strcmp(p->method, "lora"))
        return dz_fail(err, DZ_ERR_INVALID, "--peft '%s': expected none, lora or prefix", p->method);
    if (p->lora_dropout != 0.0f)
        return dz_fail(err, DZ_ERR_INVALID, "--lora-dropout %g: a ZO step has no dropout (both perturbed forwards must "
                       "see the same network); use 0", (double)p->lora_dropout);
    if (p->lora_rank < 1 || p->lora_rank > 4096)
        return dz_fail(err, DZ_ERR_INVALID, "--lora-rank %d: expected 1..4096", p->lora_rank);
    if (!(p->lora_alpha > 0.0f) || p->lora_alpha > 1e6f)
        return dz_fail(err, DZ_ERR_INVALID, "--lora-alpha %g: expected a positive number", (double)p->lora_alpha);
    unsigned targets;
    return dz_lora_parse_targets(p->lora_targets, &targets, err);
}

void dz_train_peft_weights(const dz_train_config *c, dz_weights_spec *ws, dz_lora_spec *spec) {
    if (!dz_train_peft_lora(c, spec)) return;
    ws->lora = spec;
    ws->base = c->model;
    ws->lora_seed = c->optim.seed;
    ws->lora_init = c->peft.lora_init;
    ws->base_flags = c->peft.keep_quantized ? DZ_LOAD_KEEP_QUANTIZED : 0;
}
