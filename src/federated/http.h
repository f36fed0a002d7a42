/* HTTP/1.1 for the federated protocol: a server on libmicrohttpd (the coordinator) and a
 * client on libcurl (a worker). Both check the shared token; bodies are bounded. */
#ifndef DZ_FEDERATED_HTTP_H
#define DZ_FEDERATED_HTTP_H

#include <stddef.h>
#include <stdint.h>

#include "distzo/error.h"

/* ---- server ---- */

enum {
    DZ_FED_HTTP_CONNECTIONS = 1024,      /* connections at once: 4 per worker a run admits (256) */
    DZ_FED_HTTP_PER_ADDRESS = 64,        /* of them from one client address */
    DZ_FED_HTTP_HEADER_DEADLINE_S = 5,   /* seconds from connecting to a request's complete headers */
    DZ_FED_HTTP_KEEPALIVE_S = 30,        /* a token holder's connection: seconds to its next request's headers */
};

typedef struct dz_fed_http_request {
    const char *method, *path; /* "GET", "/v1/round" */
    const char *body;          /* the request body (NUL-terminated), at most DZ_FED_MAX_BODY bytes */
    size_t body_len;
    void *conn;                /* for dz_fed_http_arg */
} dz_fed_http_request;

typedef struct dz_fed_http_response {
    int status;
    char *body;                /* malloc'd; the server frees it */
    size_t len;
    const char *content_type;  /* NULL: application/json */
} dz_fed_http_response;

/* Called on the server's threads (one per connection), concurrently: the handler locks. */
typedef void (*dz_fed_http_handler)(void *user, const dz_fed_http_request *req, dz_fed_http_response *resp);

typedef struct dz_fed_http_server dz_fed_http_server;

/* Listens on "HOST:PORT" (port 0: a free one); requests without "Authorization: Bearer
 * token" get 401 (and the connection closed) once their headers are in, without reaching
 * handler; headers not complete DZ_FED_HTTP_HEADER_DEADLINE_S after connecting (or
 * DZ_FED_HTTP_KEEPALIVE_S after a token holder's last request) shut the connection. With cert_file and key_file (PEM), HTTPS. The
 * address listened on goes to url ("http://HOST:PORT" or "https://..."). */
dz_status dz_fed_http_serve(const char *listen, const char *token, const char *cert_file, const char *key_file,
                            dz_fed_http_handler handler, void *user, dz_fed_http_server **out, char *url, size_t cap,
                            dz_error *err);
/* A query argument of the request (NULL: absent). */
const char *dz_fed_http_arg(const dz_fed_http_request *req, const char *key);
/* The client's address as text ("127.0.0.1", "::1"; "?" when unknown). */
void dz_fed_http_peer(const dz_fed_http_request *req, char *out, size_t cap);
/* Stops accepting, waits for the handlers to return, frees. NULL is fine. */
void dz_fed_http_stop(dz_fed_http_server *s);

/* ---- client ---- */

typedef struct dz_fed_http_client dz_fed_http_client;

/* ca_file: PEM certificates to trust for https (NULL: the system's store). */
dz_status dz_fed_http_client_create(const char *base_url, const char *token, const char *ca_file,
                                    dz_fed_http_client **out, dz_error *err);
void dz_fed_http_client_free(dz_fed_http_client *c);
/* One request: method "GET" or "POST" (body, len) to base_url + path. *status: the HTTP
 * status, or 0 when no answer came (err then says why: refused, timed out...). *resp:
 * the answer's body (malloc'd, NUL-terminated; the caller frees), at most
 * DZ_FED_MAX_RESPONSE bytes. */
dz_status dz_fed_http_call(dz_fed_http_client *c, const char *method, const char *path, const char *body,
                           size_t len, long timeout_ms, int *status, char **resp, size_t *resp_len, dz_error *err);
/* Bytes this client sent and received, headers included. */
void dz_fed_http_bytes(const dz_fed_http_client *c, uint64_t *sent, uint64_t *received);

#endif
