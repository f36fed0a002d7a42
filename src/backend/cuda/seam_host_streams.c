/* The host seam's streams and events (seam_host.h): lazy queues, vector clocks, and the
 * race check every enqueued operation passes. */
#include "backend/cuda/seam_host.h"

#include <stdlib.h>

static const char *kind_name(hs_kind k) {
    return k == HS_COPY   ? "copy"
           : k == HS_GEMM ? "GEMM"
           : k == HS_ZO   ? "ZO kernel"
           : k == HS_FW     ? "forward kernel"
           : k == HS_ATTN   ? "attention kernel"
           : k == HS_GATHER ? "all-gather"
                            : "wait";
}

static void clock_merge(uint32_t *into, const uint32_t *from) {
    for (int i = 0; i < HS_STREAMS; i++)
        if (from[i] > into[i]) into[i] = from[i];
}

int hs_stream_index(hs_state *h, dz_cuda_stream st, int *index) {
    const intptr_t i = (intptr_t)st; /* handles are index + 0: NULL is stream 0 */
    if (i < 0 || i >= HS_STREAMS || !h->streams[i].live)
        return hs_fail(h, DZ_CUDA_ERR_INVALID, "%p is not a live stream", st);
    *index = (int)i;
    return DZ_CUDA_OK;
}

static int event_index(hs_state *h, dz_cuda_event ev, int *index) {
    const intptr_t i = (intptr_t)ev - 1;
    if (i < 0 || i >= HS_EVENTS || !h->events[i].live)
        return hs_fail(h, DZ_CUDA_ERR_INVALID, "%p is not a live event", ev);
    *index = (int)i;
    return DZ_CUDA_OK;
}

/* Y's ranges against every earlier operation that does not happen before it. */
static int check_races(hs_state *h, const hs_op *y) {
    for (int s = 0; s < HS_STREAMS; s++) {
        const hs_stream *q = &h->streams[s];
        for (size_t k = 0; k < q->n; k++) {
            const hs_op *x = &q->ops[k];
            if (x->kind == HS_WAIT || x->clock[x->stream] <= y->clock[x->stream]) continue;
            for (int a = 0; a < x->nr; a++)
                for (int b = 0; b < y->nr; b++) {
                    const hs_range *rx = &x->r[a], *ry = &y->r[b];
                    if ((rx->write || ry->write) && rx->lo < ry->hi && ry->lo < rx->hi)
                        return hs_fail(h, DZ_CUDA_ERR_HAZARD,
                                       "race: a %s on stream %d %s [%#lx, %#lx), which a %s on stream %d %s "
                                       "with no event ordering the two",
                                       kind_name(y->kind), y->stream, ry->write ? "writes" : "reads",
                                       (unsigned long)ry->lo, (unsigned long)ry->hi, kind_name(x->kind), x->stream,
                                       rx->write ? "writes" : "reads");
                }
        }
    }
    return DZ_CUDA_OK;
}

int hs_enqueue(hs_state *h, int stream, hs_op *op) {
    hs_stream *q = &h->streams[stream];
    uint32_t clock[HS_STREAMS];
    for (int i = 0; i < HS_STREAMS; i++) clock[i] = q->clock[i];
    clock_merge(clock, h->host_clock);
    clock[stream]++;
    op->stream = stream;
    for (int i = 0; i < HS_STREAMS; i++) op->clock[i] = clock[i];
    if (op->kind != HS_WAIT) {
        const int st = check_races(h, op);
        if (st != DZ_CUDA_OK) return st;
    }
    if (q->n == q->cap) {
        const size_t cap = q->cap ? 2 * q->cap : 64;
        hs_op *ops = realloc(q->ops, cap * sizeof *ops);
        if (!ops) return hs_fail(h, DZ_CUDA_ERR_MEMORY, "out of host memory for stream %d's queue", stream);
        q->ops = ops, q->cap = cap;
    }
    q->ops[q->n++] = *op;
    for (int i = 0; i < HS_STREAMS; i++) q->clock[i] = clock[i];
    return DZ_CUDA_OK;
}

/* Runs stream s's operations below absolute index pos (a wait first runs what it waits for). */
int hs_run_stream(hs_state *h, int s, uint64_t pos) {
    hs_stream *q = &h->streams[s];
    int status = DZ_CUDA_OK;
    while (q->done < q->n && q->base + q->done < pos) {
        const hs_op *op = &q->ops[q->done++];
        const int st = op->kind == HS_WAIT ? hs_run_stream(h, op->u.wait.stream, op->u.wait.pos) : hs_execute(h, op);
        if (status == DZ_CUDA_OK) status = st;
    }
    return status;
}

/* Before the last operation of `stream` poisons its destination (a download into host
 * memory; range 1) or checksums its source (an upload from host memory; range 0): runs
 * every earlier operation that happens before it and touches that memory (an upload from
 * the same host buffer, a download into it), as the device would have by then. */
int hs_settle(hs_state *h, int stream, int range) {
    const hs_stream *own = &h->streams[stream];
    const hs_op *y = &own->ops[own->n - 1];
    int status = DZ_CUDA_OK;
    for (int s = 0; s < HS_STREAMS; s++) {
        const hs_stream *q = &h->streams[s];
        for (size_t k = (s == stream ? q->n - 1 : q->n); k-- > q->done;) {
            const hs_op *x = &q->ops[k];
            int touches = 0;
            for (int a = 0; a < x->nr; a++)
                touches |= x->r[a].lo < y->r[range].hi && y->r[range].lo < x->r[a].hi;
            if (touches && x->clock[x->stream] <= y->clock[x->stream]) {
                const int st = hs_run_stream(h, s, q->base + k + 1);
                if (status == DZ_CUDA_OK) status = st;
                break;
            }
        }
    }
    return status;
}

/* Everything of stream s has run and the host has seen it: retire its queue. */
static int sync_stream(hs_state *h, int s) {
    hs_stream *q = &h->streams[s];
    const int st = hs_run_stream(h, s, UINT64_MAX);
    clock_merge(h->host_clock, q->clock);
    q->base += q->n;
    q->n = q->done = 0;
    return st;
}

int hs_run_all(hs_state *h) {
    int status = DZ_CUDA_OK;
    for (int s = 0; s < HS_STREAMS; s++)
        if (h->streams[s].live) {
            const int st = hs_run_stream(h, s, UINT64_MAX);
            if (status == DZ_CUDA_OK) status = st;
        }
    for (int s = 0; s < HS_STREAMS; s++)
        if (h->streams[s].live) sync_stream(h, s);
    return status;
}

static int stream_create(dz_cuda_seam *s, dz_cuda_stream *st) {
    hs_state *h = hs_of(s);
    for (int i = 1; i < HS_STREAMS; i++)
        if (!h->streams[i].live) {
            hs_stream *q = &h->streams[i];
            free(q->ops);
            *q = (hs_stream){.live = 1};
            for (int c = 0; c < HS_STREAMS; c++) q->clock[c] = h->host_clock[c];
            *st = (dz_cuda_stream)(intptr_t)i;
            return DZ_CUDA_OK;
        }
    return hs_fail(h, DZ_CUDA_ERR_RUNTIME, "more than %d streams", HS_STREAMS - 1);
}

/* cudaStreamDestroy lets the stream's work finish. */
static int stream_destroy(dz_cuda_seam *s, dz_cuda_stream st) {
    hs_state *h = hs_of(s);
    int i = 0, status = hs_stream_index(h, st, &i);
    if (status != DZ_CUDA_OK) return status;
    if (i == 0) return hs_fail(h, DZ_CUDA_ERR_INVALID, "stream_destroy: the NULL stream");
    status = sync_stream(h, i);
    h->streams[i].live = 0;
    return status;
}

static int stream_synchronize(dz_cuda_seam *s, dz_cuda_stream st) {
    hs_state *h = hs_of(s);
    int i = 0;
    const int status = hs_stream_index(h, st, &i);
    return status != DZ_CUDA_OK ? status : sync_stream(h, i);
}

static int device_synchronize(dz_cuda_seam *s) { return hs_run_all(hs_of(s)); }

static int event_create(dz_cuda_seam *s, dz_cuda_event *ev) {
    hs_state *h = hs_of(s);
    for (int i = 0; i < HS_EVENTS; i++)
        if (!h->events[i].live) {
            h->events[i] = (hs_event){.live = 1};
            *ev = (dz_cuda_event)(intptr_t)(i + 1);
            return DZ_CUDA_OK;
        }
    return hs_fail(h, DZ_CUDA_ERR_RUNTIME, "more than %d events", HS_EVENTS);
}

static int event_destroy(dz_cuda_seam *s, dz_cuda_event ev) {
    hs_state *h = hs_of(s);
    int e = 0;
    const int status = event_index(h, ev, &e);
    if (status == DZ_CUDA_OK) h->events[e].live = 0;
    return status;
}

/* The event stands for the stream's work enqueued so far. */
static int event_record(dz_cuda_seam *s, dz_cuda_event ev, dz_cuda_stream st) {
    hs_state *h = hs_of(s);
    int e = 0, i = 0, status = event_index(h, ev, &e);
    if (status == DZ_CUDA_OK) status = hs_stream_index(h, st, &i);
    if (status != DZ_CUDA_OK) return status;
    const hs_stream *q = &h->streams[i];
    hs_event *E = &h->events[e];
    E->recorded = 1, E->stream = i, E->pos = q->base + q->n;
    for (int c = 0; c < HS_STREAMS; c++) E->clock[c] = q->clock[c] > h->host_clock[c] ? q->clock[c] : h->host_clock[c];
    return DZ_CUDA_OK;
}

static int event_synchronize(dz_cuda_seam *s, dz_cuda_event ev) {
    hs_state *h = hs_of(s);
    int e = 0;
    const int status = event_index(h, ev, &e);
    if (status != DZ_CUDA_OK || !h->events[e].recorded) return status; /* never recorded: done */
    const int st = hs_run_stream(h, h->events[e].stream, h->events[e].pos);
    clock_merge(h->host_clock, h->events[e].clock);
    return st;
}

/* Later work on st happens after the event's work: a wait in st's queue runs it first. */
static int stream_wait_event(dz_cuda_seam *s, dz_cuda_stream st, dz_cuda_event ev) {
    hs_state *h = hs_of(s);
    int e = 0, i = 0, status = event_index(h, ev, &e);
    if (status == DZ_CUDA_OK) status = hs_stream_index(h, st, &i);
    if (status != DZ_CUDA_OK || !h->events[e].recorded) return status;
    hs_op op = {.kind = HS_WAIT, .u.wait = {.stream = h->events[e].stream, .pos = h->events[e].pos}};
    status = hs_enqueue(h, i, &op);
    if (status == DZ_CUDA_OK) clock_merge(h->streams[i].clock, h->events[e].clock);
    return status;
}

void hs_stream_api(dz_cuda_seam *s) {
    s->stream_create = stream_create, s->stream_destroy = stream_destroy;
    s->stream_synchronize = stream_synchronize, s->device_synchronize = device_synchronize;
    s->event_create = event_create, s->event_destroy = event_destroy, s->event_record = event_record;
    s->event_synchronize = event_synchronize, s->stream_wait_event = stream_wait_event;
}
