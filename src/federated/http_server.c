/* The coordinator's HTTP server: libmicrohttpd, a thread per connection (a round request
 * may wait for news), bodies bounded, the token checked as soon as the headers are in.
 * Slow clients: libmicrohttpd's timeout is an idle one (a client sending a byte now and
 * then keeps its connection for ever), so a watchdog thread shuts every connection whose
 * request headers are not complete by a deadline; with a cap per address and a total
 * well above the workers a run admits, clients that hold connections open from one
 * address cannot keep workers out. */
#include <arpa/inet.h>
#include <microhttpd.h>
#include <netdb.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>

#include "distzo/log.h"
#include "distzo/util.h"
#include "federated/http.h"
#include "federated/protocol.h"

/* A connection the watchdog looks after: shut at `deadline` (0: none, a request of a
 * token holder is being served). */
typedef struct watched {
    int in_use, fd;
    double deadline;
} watched;

struct dz_fed_http_server {
    struct MHD_Daemon *d;
    char *cert, *key; /* PEM text, kept for the daemon's lifetime */
    char token[DZ_FED_TOKEN_MAX + 1];
    dz_fed_http_handler handler;
    void *user;
    pthread_mutex_t mu;           /* guards conns and stop */
    pthread_cond_t cv;
    watched conns[DZ_FED_HTTP_CONNECTIONS];
    int stop, have_watchdog;
    pthread_t watchdog;
};

/* An empty MHD_OPTION_ARRAY: stands in for the TLS options of a plain HTTP server. */
static const struct MHD_OptionItem empty_options[] = {{MHD_OPTION_END, 0, NULL}};

typedef struct conn_state {
    char *body;
    size_t len;
    int too_big;
    int authorized; /* the headers carried the token */
} conn_state;

/* ---- the header deadline ---- */

/* A connection opens: watched, its headers due in DZ_FED_HTTP_HEADER_DEADLINE_S. It
 * closes: no longer watched. libmicrohttpd (0.9.75, MHD_cleanup_connections) notifies the
 * close before it closes the socket, so a watched descriptor is always its connection's. */
static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode code) {
    dz_fed_http_server *s = cls;
    pthread_mutex_lock(&s->mu);
    watched *w = *socket_context;
    if (code == MHD_CONNECTION_NOTIFY_CLOSED) { /* before libmicrohttpd closes the socket */
        if (w) w->in_use = 0;
        *socket_context = NULL;
    } else {
        const union MHD_ConnectionInfo *info = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        for (int i = 0; info && i < DZ_FED_HTTP_CONNECTIONS && !*socket_context; i++)
            if (!s->conns[i].in_use) {
                s->conns[i] = (watched){.in_use = 1, .fd = info->connect_fd,
                                        .deadline = dz_now() + DZ_FED_HTTP_HEADER_DEADLINE_S};
                *socket_context = &s->conns[i];
            }
    }
    pthread_mutex_unlock(&s->mu);
}

/* The connection's deadline from now on: `seconds` ahead, or none (0). */
static void set_deadline(dz_fed_http_server *s, struct MHD_Connection *c, double seconds) {
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    pthread_mutex_lock(&s->mu);
    watched *w = info ? info->socket_context : NULL;
    if (w && w->in_use) w->deadline = seconds > 0 ? dz_now() + seconds : 0;
    pthread_mutex_unlock(&s->mu);
}

/* Shuts the connections past their deadline (their threads then see the end of the stream
 * and close them); the socket stays libmicrohttpd's until its CLOSED notification. */
static void *watchdog(void *arg) {
    dz_fed_http_server *s = arg;
    pthread_mutex_lock(&s->mu);
    while (!s->stop) {
        const double now = dz_now();
        for (int i = 0; i < DZ_FED_HTTP_CONNECTIONS; i++) {
            watched *w = &s->conns[i];
            if (!w->in_use || w->deadline <= 0 || now < w->deadline) continue;
            shutdown(w->fd, SHUT_RDWR);
            w->deadline = 0;
        }
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += 200000000L;
        if (until.tv_nsec >= 1000000000L) until.tv_sec++, until.tv_nsec -= 1000000000L;
        pthread_cond_timedwait(&s->cv, &s->mu, &until);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

static enum MHD_Result reply(struct MHD_Connection *c, int status, char *body, size_t len, const char *type) {
    struct MHD_Response *r = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(body);
        return MHD_NO;
    }
    if (status == 401) MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close"); /* no second try on it */
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type ? type : "application/json");
    const enum MHD_Result ok = MHD_queue_response(c, (unsigned)status, r);
    MHD_destroy_response(r);
    return ok;
}

static enum MHD_Result reply_error(struct MHD_Connection *c, int status, const char *message) {
    char *body = dz_fed_error_json(message);
    return reply(c, status, body, body ? strlen(body) : 0, NULL);
}

static int authorized(const dz_fed_http_server *s, struct MHD_Connection *c) {
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    if (!h || strncmp(h, "Bearer ", 7) != 0) return 0;
    return dz_fed_secret_equal(h + 7, s->token);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **con_cls) {
    dz_fed_http_server *s = cls;
    conn_state *cs = *con_cls;
    if (!cs) { /* the headers: the body, if any, comes in the next calls */
        if (!(cs = calloc(1, sizeof *cs))) return MHD_NO;
        *con_cls = cs;
        if (!(cs->authorized = authorized(s, c))) /* refused before any body is read; the deadline stands */
            return reply_error(c, 401, "bad or missing token (Authorization: Bearer, --token-file)");
        set_deadline(s, c, 0);
        return MHD_YES;
    }
    if (*upload_size) {
        if (!cs->too_big && cs->len + *upload_size <= DZ_FED_MAX_BODY) {
            char *p = realloc(cs->body, cs->len + *upload_size + 1);
            if (!p) return MHD_NO;
            memcpy(p + cs->len, upload, *upload_size);
            cs->body = p, cs->len += *upload_size;
            cs->body[cs->len] = '\0';
        } else {
            cs->too_big = 1;
        }
        *upload_size = 0;
        return MHD_YES;
    }
    if (cs->too_big) return reply_error(c, 413, "request body larger than 16384 bytes");
    if (strcmp(method, "GET") && strcmp(method, "POST")) return reply_error(c, 405, "only GET and POST");
    const dz_fed_http_request req = {.method = method, .path = url, .body = cs->body ? cs->body : "",
                                     .body_len = cs->len, .conn = c};
    dz_fed_http_response resp = {.status = 500};
    s->handler(s->user, &req, &resp);
    if (!resp.body) return reply_error(c, 500, "out of memory");
    return reply(c, resp.status, resp.body, resp.len, resp.content_type);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode t) {
    conn_state *cs = *con_cls;
    /* a token holder's connection kept alive: its next request's headers within the idle window */
    if (cs && cs->authorized) set_deadline(cls, c, DZ_FED_HTTP_KEEPALIVE_S);
    if (cs) free(cs->body);
    free(cs);
    *con_cls = NULL;
}

const char *dz_fed_http_arg(const dz_fed_http_request *req, const char *key) {
    return MHD_lookup_connection_value(req->conn, MHD_GET_ARGUMENT_KIND, key);
}

void dz_fed_http_peer(const dz_fed_http_request *req, char *out, size_t cap) {
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(req->conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    const struct sockaddr *a = info ? info->client_addr : NULL;
    snprintf(out, cap, "?");
    if (a && a->sa_family == AF_INET) inet_ntop(AF_INET, &((const struct sockaddr_in *)(const void *)a)->sin_addr, out, (socklen_t)cap);
    if (a && a->sa_family == AF_INET6)
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)(const void *)a)->sin6_addr, out, (socklen_t)cap);
}

/* "HOST:PORT" (an IPv6 host in brackets) to an address. */
static dz_status resolve(const char *listen, struct sockaddr_storage *sa, socklen_t *sa_len, dz_error *err) {
    char host[256];
    const char *colon = strrchr(listen, ':');
    if (!colon || colon == listen || (size_t)(colon - listen) >= sizeof host)
        return dz_fail(err, DZ_ERR_INVALID, "--listen '%s': expected HOST:PORT (e.g. 127.0.0.1:8470)", listen);
    const char *h = listen;
    size_t hl = (size_t)(colon - listen);
    if (h[0] == '[' && hl >= 2 && h[hl - 1] == ']') h++, hl -= 2;
    memcpy(host, h, hl);
    host[hl] = '\0';
    char *end;
    const long port = strtol(colon + 1, &end, 10);
    if (!colon[1] || *end || port < 0 || port > 65535)
        return dz_fail(err, DZ_ERR_INVALID, "--listen '%s': the port must be 0..65535", listen);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE}, *res = NULL;
    const int rc = getaddrinfo(host, colon + 1, &hints, &res);
    if (rc != 0 || !res)
        return dz_fail(err, DZ_ERR_INVALID, "--listen '%s': cannot resolve '%s': %s", listen, host, gai_strerror(rc));
    memcpy(sa, res->ai_addr, res->ai_addrlen);
    *sa_len = res->ai_addrlen;
    freeaddrinfo(res);
    return DZ_OK;
}

static void free_server(dz_fed_http_server *s) {
    if (s->have_watchdog) {
        pthread_mutex_lock(&s->mu);
        s->stop = 1;
        pthread_cond_broadcast(&s->cv);
        pthread_mutex_unlock(&s->mu);
        pthread_join(s->watchdog, NULL);
    }
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->mu);
    free(s->cert);
    free(s->key);
    free(s);
}

/* A descriptor per connection: the soft limit raised (to the hard one at most) where it
 * is below what the connection limit needs. */
static void enough_descriptors(void) {
    const rlim_t need = DZ_FED_HTTP_CONNECTIONS + 64;
    struct rlimit r;
    if (getrlimit(RLIMIT_NOFILE, &r) != 0 || r.rlim_cur >= need) return;
    r.rlim_cur = r.rlim_max == RLIM_INFINITY || r.rlim_max >= need ? need : r.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &r) != 0 || r.rlim_cur < need)
        dz_log(DZ_LOG_WARN, "serve: %llu file descriptors allowed, %llu wanted (%d connections): raise ulimit -n",
               (unsigned long long)r.rlim_cur, (unsigned long long)need, DZ_FED_HTTP_CONNECTIONS);
}

dz_status dz_fed_http_serve(const char *listen, const char *token, const char *cert_file, const char *key_file,
                            dz_fed_http_handler handler, void *user, dz_fed_http_server **out, char *url, size_t cap,
                            dz_error *err) {
    *out = NULL;
    struct sockaddr_storage sa;
    socklen_t sa_len = 0;
    if (!cert_file != !key_file)
        return dz_fail(err, DZ_ERR_INVALID, "HTTPS needs both --tls-cert and --tls-key (PEM files)");
    if (cert_file && MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES)
        return dz_fail(err, DZ_ERR_UNSUPPORTED, "--tls-cert: this libmicrohttpd was built without TLS");
    dz_status st = resolve(listen, &sa, &sa_len, err);
    if (st != DZ_OK) return st;
    dz_fed_http_server *s = calloc(1, sizeof *s);
    if (!s) return dz_fail(err, DZ_ERR_NOMEM, "serve: out of memory");
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    if (cert_file && ((st = dz_read_file(cert_file, &s->cert, NULL, err)) != DZ_OK ||
                      (st = dz_read_file(key_file, &s->key, NULL, err)) != DZ_OK)) {
        free_server(s);
        return st;
    }
    snprintf(s->token, sizeof s->token, "%s", token);
    s->handler = handler, s->user = user;
    enough_descriptors();
    /* poll, not select: descriptors past FD_SETSIZE (1024) are connections too */
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_POLL;
    if (sa.ss_family == AF_INET6) flags |= MHD_USE_IPv6;
    if (cert_file) flags |= MHD_USE_TLS;
    /* MHD_OPTION_HTTPS_MEM_* first: without TLS they are left out by ending the list there */
    s->d = MHD_start_daemon(flags, 0, NULL, NULL, on_request, s,
                            cert_file ? MHD_OPTION_HTTPS_MEM_CERT : MHD_OPTION_ARRAY,
                            cert_file ? (void *)s->cert : (void *)empty_options,
                            cert_file ? MHD_OPTION_HTTPS_MEM_KEY : MHD_OPTION_ARRAY,
                            cert_file ? (void *)s->key : (void *)empty_options,
                            MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa,
                            MHD_OPTION_NOTIFY_COMPLETED, on_completed, s, MHD_OPTION_NOTIFY_CONNECTION, on_connection, s,
                            MHD_OPTION_LISTENING_ADDRESS_REUSE, 1u,
                            MHD_OPTION_CONNECTION_LIMIT, (unsigned)DZ_FED_HTTP_CONNECTIONS,
                            MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)DZ_FED_HTTP_PER_ADDRESS,
                            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)DZ_FED_HTTP_KEEPALIVE_S, MHD_OPTION_END);
    if (s->d && pthread_create(&s->watchdog, NULL, watchdog, s) == 0) s->have_watchdog = 1;
    if (s->d && !s->have_watchdog) {
        MHD_stop_daemon(s->d);
        free_server(s);
        return dz_fail(err, DZ_ERR_NOMEM, "serve: cannot start a thread");
    }
    if (!s->d) {
        free_server(s);
        return dz_fail(err, DZ_ERR_IO, cert_file ? "--listen %s: cannot serve HTTPS there (in use, not an address of this "
                       "machine, or the certificate and key are not a PEM pair)" : "--listen %s: cannot listen there (in "
                       "use, or not an address of this machine)", listen);
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_LISTEN_FD);
    struct sockaddr_storage bound;
    socklen_t bl = sizeof bound;
    char host[INET6_ADDRSTRLEN] = "?";
    int port = 0;
    if (info && getsockname(info->listen_fd, (struct sockaddr *)&bound, &bl) == 0) {
        if (bound.ss_family == AF_INET6) {
            const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)&bound;
            inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof host), port = ntohs(a->sin6_port);
        } else {
            const struct sockaddr_in *a = (const struct sockaddr_in *)&bound;
            inet_ntop(AF_INET, &a->sin_addr, host, sizeof host), port = ntohs(a->sin_port);
        }
    }
    snprintf(url, cap, bound.ss_family == AF_INET6 ? "%s://[%s]:%d" : "%s://%s:%d", cert_file ? "https" : "http",
             host, port);
    *out = s;
    return DZ_OK;
}

void dz_fed_http_stop(dz_fed_http_server *s) {
    if (!s) return;
    MHD_stop_daemon(s->d); /* its CLOSED notifications take s->mu: the watchdog stops after */
    free_server(s);
}
