/* distzo plan: which DistZO2 layout to run on a cluster, from the model's shape alone
 * (distzo/plan.h; docs/PLANNER.md). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cli/common.h"

static double mb(double bytes) { return bytes / 1048576.0; }

static void print_json(const char *model, const dz_plan_request *r, const dz_plan *p) {
    printf("{\"model\": ");
    dz_cli_json_string(stdout, model);
    dz_param_table t;
    const double params = dz_param_table_build(&r->cfg, &t, NULL) == DZ_OK ? (double)dz_param_table_numel(&t) : 0.0;
    if (params > 0) dz_param_table_free(&t);
    printf(", \"parameters\": %.0f, \"nodes\": %d, \"ranks_per_node\": %d, \"mem_per_node_bytes\": %.0f, "
           "\"store\": \"%s\", \"master_dtype\": \"%s\", \"batch\": %d, \"seq\": %d, \"labels\": %d, \"spsa_samples\": %d, "
           "\"eval_batch\": %d, \"overhead_bytes\": %.0f, \"overhead_mpi_bytes\": %.0f, \"layouts\": [",
           params, r->nodes, r->ranks_per_node, r->mem_per_node, r->disk_store ? "disk" : "ram",
           r->master == DZ_BF16 ? "bf16" : "f32", r->batch, r->seq, r->labels, r->q, r->eval_batch, r->overhead, r->overhead_mpi);
    for (int i = 0; i < p->count; i++) {
        const dz_plan_layout *L = &p->l[i];
        printf("%s{\"ranks\": %d, \"pertp\": %d, \"dp\": %d, \"local_batch\": %d, \"signs_per_rank\": %d, "
               "\"shared_masters\": %s, \"memory\": {\"overhead\": %.0f, \"masters\": %.0f, \"activations\": %.0f, "
               "\"engine\": %.0f, \"node_working_copies\": %.0f, \"store_buffers\": %.0f, \"load_extra\": %.0f, \"per_rank\": %.0f, \"per_node\": %.0f}, "
               "\"comm\": {\"payload_per_rank\": %.0f, \"wire_per_rank\": %.0f, \"wire_total\": %.0f, "
               "\"node_barriers\": %d}, \"work\": {\"gflop_per_rank\": %.6f, \"perturbed_elements\": %.0f, "
               "\"updated_elements\": %.0f}, \"feasible\": %s, \"why\": ",
               i ? ", " : "", L->n, L->p, L->d, L->local_batch, L->signs, L->shared_masters ? "true" : "false",
               L->overhead, L->masters, L->forward, L->engine, L->node_work, L->store_bufs, L->load_extra, L->rank_peak, L->node_peak,
               L->payload_per_rank, L->wire_per_rank, L->wire_total, L->barriers, L->gflop_per_rank, L->perturbed,
               L->updated, L->feasible ? "true" : "false");
        dz_cli_json_string(stdout, L->why);
        printf("}");
    }
    printf("], \"recommended\": ");
    if (p->best >= 0) printf("{\"pertp\": %d, \"dp\": %d}}\n", p->l[p->best].p, p->l[p->best].d);
    else printf("null}\n");
}

static void print_table(const char *model, const dz_plan_request *r, const dz_plan *p) {
    printf("distzo plan: %s, %d node(s) x %d rank(s), %.1f GB per node, --store %s, %s masters\n", model, r->nodes,
           r->ranks_per_node, r->mem_per_node / 1073741824.0, r->disk_store ? "disk" : "ram",
           r->master == DZ_BF16 ? "bf16" : "f32");
    printf("step: batch %d x %d labels, seq %d, q %d (eval batch %d); fixed per process %.0f MB (%.0f MB under mpirun)\n\n",
           r->batch, r->labels, r->seq, r->q, r->eval_batch, mb(r->overhead), mb(r->overhead_mpi));
    printf("%-10s %6s %6s | %9s %9s | %8s %8s %8s | %11s %10s %9s | %s\n", "layout", "ranks", "local", "MB/rank",
           "MB/node", "masters", "activ.", "engine", "bytes/rank", "GFLOP/rank", "Melem", "fits");
    for (int i = 0; i < p->count; i++) {
        const dz_plan_layout *L = &p->l[i];
        char name[32];
        snprintf(name, sizeof name, "P%d x D%d", L->p, L->d);
        printf("%-10s %6d %6d | %9.1f %9.1f | %7.1f%s %8.1f %8.1f | %11.0f %10.3f %9.2f | %s%s\n", name, L->n,
               L->local_batch, mb(L->rank_peak), mb(L->node_peak), mb(L->masters), L->shared_masters ? "s" : " ",
               mb(L->forward), mb(L->engine + L->store_bufs + L->node_work), L->wire_per_rank, L->gflop_per_rank,
               (L->perturbed + L->updated) / 1e6, L->feasible ? "yes" : "no: ", L->why);
    }
    printf("\nMB/rank counts shared masters (s) in each rank, as peak RSS does; MB/node counts them once.\n"
           "bytes/rank: ring-allreduce estimate of the per-step loss exchange (payload %.0f bytes)%s.\n"
           "Melem: elements perturbed into working copies plus master elements updated, per rank per step.\n",
           p->count && p->l[0].n > 1 ? p->l[0].payload_per_rank : 0.0,
           p->count && p->l[0].shared_masters ? "; plus node barriers around each block's fill" : "");
    if (p->best < 0) {
        printf("\nno layout fits: add memory or nodes, or try --store disk / --master-dtype bf16\n");
        return;
    }
    const dz_plan_layout *B = &p->l[p->best];
    const char *hizoo = r->estimator == DZ_ZO_HIZOO && B->n > 1 ? " --estimator hizoo --node-size 1" /* a replica each */
                        : r->estimator == DZ_ZO_FZOO && B->p > 1 ? " --estimator fzoo --node-size 1" : "";
    printf("\nrecommended: P%d x D%d: mpirun -np %d distzo train --pertp %d --dp %d%s ...\n", B->p, B->d, B->n, B->p,
           B->d, hizoo);
}

static const dz_cmd_spec plan_cmd = {
    .name = "plan", .usage = "--model M_OR_PRESET --nodes K --ranks-per-node R --mem-per-node GB [options]",
    .summary = "For each DistZO2 layout (P x D = K x R ranks): memory per rank and per node, bytes\n"
               "exchanged and work per rank per step, whether it fits; recommends the fastest that fits."};

int dz_cmd_plan(int argc, char **argv) {
    const char *model = NULL, *store = "ram", *master = "f32", *estimator = "mezo";
    int json = 0;
    float mem_gb = 0.0f, overhead_mb = NAN, overhead_mpi_mb = NAN; /* NAN: not given (the parser never gives it) */
    dz_plan_request r;
    dz_plan_request_default(&r);
    dz_train_config tc; /* the trainer's own defaults: batch, eval batch, q, shared prompts */
    dz_train_config_default(&tc);
    r.batch = tc.optim.batch, r.eval_batch = tc.schedule.eval_batch, r.q = tc.optim.q;
    r.share_prompts = tc.data.share_prompts;
    r.lozo_rank = tc.optim.lozo_rank;
    int fzoo_directions = tc.optim.fzoo_directions;
    r.seq = DZ_OPT_UNSET; /* 64, or the model's maximum, unless given */
    const dz_opt opts[] = {
        {"model", DZ_OPT_STR, &model, "model folder or llama2.c .bin (only its config is read), or a preset name"},
        {"nodes", DZ_OPT_INT, &r.nodes, "nodes (default 1)"},
        {"ranks-per-node", DZ_OPT_INT, &r.ranks_per_node, "MPI ranks per node (default 1)"},
        {"mem-per-node", DZ_OPT_FLOAT, &mem_gb, "memory per node in GB (GiB)"},
        {"store", DZ_OPT_STR, &store, "ram (default) or disk: where the layer master weights live"},
        {"batch", DZ_OPT_INT, &r.batch, "global batch, examples per step (default 16)"},
        {"seq", DZ_OPT_INT, &r.seq, "longest tokenized example, prompt + label (default 64, or the model's maximum)"},
        {"labels", DZ_OPT_INT, &r.labels, "candidate labels per example (default 2)"},
        {"master-dtype", DZ_OPT_STR, &master, "master weights: f32 (default) or bf16"},
        {"spsa-samples", DZ_OPT_INT, &r.q, "perturbations per step (default 1)"},
        {"estimator", DZ_OPT_STR, &estimator, "mezo (default), sparse, lozo, fzoo or hizoo: what the estimator keeps counts in "
         "the engine (hizoo: 4 bytes a trainable parameter), fzoo's N + 1 and hizoo's 3 forwards in the work"},
        {"fzoo-directions", DZ_OPT_INT, &fzoo_directions, "fzoo: directions per step (default 8)"},
        {"lozo-rank", DZ_OPT_INT, &r.lozo_rank, "lozo: rank of U V^T (default 2)"},
        {"hizoo-rank", DZ_OPT_INT, &r.hizoo_rank, "hizoo: 1 for HiZOO-L (rank-1 factors of a matrix's curvature: "
         "4 (rows + cols + 1) bytes a matrix and cols doubles of sums)"},
        dz_cli_threads_option(&r.threads, "threads per rank (default: this machine's cores)"),
        {"overhead-mb", DZ_OPT_FLOAT, &overhead_mb, "fixed MB per process (default: measured, see docs/PLANNER.md)"},
        {"overhead-mpi-mb", DZ_OPT_FLOAT, &overhead_mpi_mb, "the same under mpirun"},
        {"json", DZ_OPT_FLAG, &json, "print JSON"},
        {0},
    };
    int rc = dz_cli_parse(&plan_cmd, opts, argc, argv, NULL);
    if (rc >= 0) return rc;
    if (!model) return dz_cli_failf("plan needs --model M_OR_PRESET (a model path or one of: %s)", dz_preset_names());
    if (!(mem_gb > 0.0f)) return dz_cli_failf("option --mem-per-node: needs a positive number of GB");
    if (r.seq != DZ_OPT_UNSET && r.seq < 2)
        return dz_cli_failf("option --seq: %d tokens; give at least 2 (a prompt token and a label's)", r.seq);
    r.mem_per_node = (double)mem_gb * 1073741824.0;
    if (!strcmp(store, "ram")) r.disk_store = 0;
    else if (!strcmp(store, "disk") || !strncmp(store, "disk:", 5)) r.disk_store = 1;
    else return dz_cli_failf("option --store: '%s' is not ram or disk", store);
    if (dz_dtype_parse(master, &r.master) != 0 || (r.master != DZ_F32 && r.master != DZ_BF16))
        return dz_cli_failf("option --master-dtype: '%s' is not f32 or bf16", master);
    if (dz_zo_estimator_parse(estimator, &r.estimator) != 0)
        return dz_cli_failf("option --estimator: '%s' is not mezo, sparse, lozo, fzoo or hizoo", estimator);
    int q_given = 0; /* the options train refuses with these estimators, refused here too */
    for (int i = 1; i < argc; i++) q_given |= !strncmp(argv[i], "--spsa-samples", 14);
    if (r.estimator != DZ_ZO_FZOO && fzoo_directions != tc.optim.fzoo_directions)
        return dz_cli_failf("option --fzoo-directions: without --estimator fzoo it would be ignored");
    if (r.estimator == DZ_ZO_FZOO && q_given)
        return dz_cli_failf("option --spsa-samples: --estimator fzoo takes its samples per step from --fzoo-directions");
    if (r.estimator == DZ_ZO_HIZOO && r.q != 1)
        return dz_cli_failf("option --spsa-samples: --estimator hizoo takes one direction per step (1, not %d)", r.q);
    if (r.estimator == DZ_ZO_FZOO && (fzoo_directions < 2 || fzoo_directions > DZ_ZO_MAX_Q))
        return dz_cli_failf("option --fzoo-directions: %d is outside 2..%d", fzoo_directions, DZ_ZO_MAX_Q);
    if (r.estimator == DZ_ZO_FZOO) r.q = fzoo_directions; /* its samples per step, as train sets them */
    if (r.hizoo_rank != 0 && (r.hizoo_rank != 1 || r.estimator != DZ_ZO_HIZOO))
        return dz_cli_failf("option --hizoo-rank: %d; 0 (HiZOO) or 1 (HiZOO-L), with --estimator hizoo", r.hizoo_rank);
    if (r.lozo_rank < 1 || r.lozo_rank > DZ_ZO_LOZO_MAX_RANK)
        return dz_cli_failf("option --lozo-rank: %d is outside 1..%d", r.lozo_rank, DZ_ZO_LOZO_MAX_RANK);
    if (r.estimator != DZ_ZO_LOZO && r.lozo_rank != tc.optim.lozo_rank)
        return dz_cli_failf("option --lozo-rank: without --estimator lozo it would be ignored");
    if (r.threads < 0) return dz_cli_failf("option --threads: %d is negative (0 or leave it out: this machine's cores)",
                                           r.threads);
    if (r.q > DZ_ZO_MAX_Q) return dz_cli_failf("option --spsa-samples: %d is above %d", r.q, DZ_ZO_MAX_Q);
    if (overhead_mb < 0.0f || overhead_mpi_mb < 0.0f)
        return dz_cli_failf("option --overhead%s-mb: %g MB is negative", overhead_mb < 0.0f ? "" : "-mpi",
                            (double)(overhead_mb < 0.0f ? overhead_mb : overhead_mpi_mb));
    if (!isnan(overhead_mb)) r.overhead = overhead_mb * 1048576.0;
    if (!isnan(overhead_mpi_mb)) r.overhead_mpi = overhead_mpi_mb * 1048576.0;
    dz_error err = {0};
    if (dz_is_dir(model) || dz_file_exists(model)) {
        if (dz_config_load(model, &r.cfg, &err) != DZ_OK) return dz_cli_failf("option --model: %s", err.msg);
    } else if (dz_config_preset(model, &r.cfg, &err) != DZ_OK) {
        return dz_cli_failf("option --model: '%s' is neither a model path nor a preset (presets: %s)", model,
                            dz_preset_names());
    }
    if (r.seq == DZ_OPT_UNSET) r.seq = r.cfg.max_seq_len < 64 ? r.cfg.max_seq_len : 64;
    if (r.seq > r.cfg.max_seq_len)
        return dz_cli_failf("option --seq: %d tokens is more than the model's %d positions", r.seq, r.cfg.max_seq_len);
    dz_plan p;
    if (dz_plan_make(&r, &p, &err) != DZ_OK) return dz_cli_fail(&err);
    if (json) print_json(model, &r, &p);
    else print_table(model, &r, &p);
    return 0;
}
