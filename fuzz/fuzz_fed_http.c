/* libFuzzer target for the coordinator's HTTP layer (src/federated/http_server.c on
 * libmicrohttpd): the bytes any client on the network can send. A server is started once
 * on a loopback port with a token; each input is sent on a new connection as raw bytes
 * (request line, headers, body, pipelined requests, garbage), the write side is closed and
 * the answer read to the end. Beyond "does not crash": the handler is reached only by a
 * request whose input carries "Bearer " and the token (the token is checked before any
 * handler runs), with GET or POST, a body of at most DZ_FED_MAX_BODY bytes that is
 * NUL-terminated at its length, and a path; query arguments are looked up as the
 * coordinator's handlers do. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "federated/http.h"
#include "federated/protocol.h"

static const char TOKEN[] = "fuzz-token-0123456789abcdef";
static struct sockaddr_in g_addr;
static atomic_int g_reached;

static void handler(void *user, const dz_fed_http_request *req, dz_fed_http_response *resp) {
    (void)user;
    if (strcmp(req->method, "GET") && strcmp(req->method, "POST")) abort();
    if (!req->path || req->body_len > DZ_FED_MAX_BODY || req->body[req->body_len] != '\0') abort();
    const char *since = dz_fed_http_arg(req, "since"), *name = dz_fed_http_arg(req, "name");
    resp->status = 200;
    resp->body = NULL;
    resp->len = (size_t)asprintf(&resp->body, "{\"len\": %zu, \"since\": %zu, \"name\": %zu}", req->body_len,
                                 since ? strlen(since) : 0, name ? strlen(name) : 0);
    atomic_store(&g_reached, 1);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    dz_fed_http_server *server; /* serves until the process ends */
    char url[128];
    dz_error err;
    if (dz_fed_http_serve("127.0.0.1:0", TOKEN, NULL, NULL, handler, NULL, &server, url, sizeof url, &err) != DZ_OK) {
        fprintf(stderr, "fuzz_fed_http: %s\n", err.msg);
        abort();
    }
    int port = 0;
    if (sscanf(url, "http://127.0.0.1:%d", &port) != 1) abort();
    g_addr.sin_family = AF_INET;
    g_addr.sin_port = htons((uint16_t)port);
    g_addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return 0;
}

/* One connection: the input, then EOF; the answer read until the server closes (or 5 s). */
static void exchange(const uint8_t *data, size_t size) {
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect(fd, (const struct sockaddr *)&g_addr, sizeof g_addr) != 0) abort();
    const struct timeval limit = {.tv_sec = 5};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
    for (size_t sent = 0; sent < size;) {
        const ssize_t n = send(fd, data + sent, size - sent, MSG_NOSIGNAL);
        if (n <= 0) break; /* the server may close first (a bad request line) */
        sent += (size_t)n;
    }
    shutdown(fd, SHUT_WR);
    char buf[4096];
    while (recv(fd, buf, sizeof buf, 0) > 0) {
    }
    close(fd);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    atomic_store(&g_reached, 0);
    exchange(data, size);
    if (atomic_load(&g_reached) && !memmem(data, size, TOKEN, sizeof TOKEN - 1)) abort();
    return 0;
}
