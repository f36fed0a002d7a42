/* A worker's HTTP client: libcurl, one handle kept alive across requests, the token sent
 * with each, answers bounded. */
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "federated/http.h"
#include "federated/protocol.h"

struct dz_fed_http_client {
    CURL *h;
    char base[1024];
    char ca[4096];                /* "": the system's certificate store */
    struct curl_slist *headers, *post_headers; /* a GET carries only the token */
    uint64_t sent, received;
};

typedef struct sink {
    char *p;
    size_t len, cap;
    int too_big;
} sink;

static size_t on_data(char *data, size_t size, size_t n, void *user) {
    sink *s = user;
    const size_t bytes = size * n;
    if (s->len + bytes > DZ_FED_MAX_RESPONSE) {
        s->too_big = 1;
        return 0; /* curl stops with CURLE_WRITE_ERROR */
    }
    if (s->len + bytes + 1 > s->cap) {
        size_t cap = s->cap ? s->cap : 4096;
        while (cap < s->len + bytes + 1) cap *= 2;
        char *p = realloc(s->p, cap);
        if (!p) return 0;
        s->p = p, s->cap = cap;
    }
    memcpy(s->p + s->len, data, bytes);
    s->len += bytes;
    s->p[s->len] = '\0';
    return bytes;
}

dz_status dz_fed_http_client_create(const char *base_url, const char *token, const char *ca_file,
                                    dz_fed_http_client **out, dz_error *err) {
    *out = NULL;
    if (strncmp(base_url, "http://", 7) && strncmp(base_url, "https://", 8))
        return dz_fail(err, DZ_ERR_INVALID, "'%s': the coordinator's URL must start with http:// or https://",
                       base_url);
    static int curl_ready; /* curl_global_init once per process, before any thread uses curl */
    if (!curl_ready) {
        if (curl_global_init(CURL_GLOBAL_DEFAULT) != 0) return dz_fail(err, DZ_ERR_IO, "libcurl: cannot initialize");
        curl_ready = 1;
    }
    dz_fed_http_client *c = calloc(1, sizeof *c);
    if (!c || !(c->h = curl_easy_init())) {
        free(c);
        return dz_fail(err, DZ_ERR_NOMEM, "libcurl: cannot create a handle");
    }
    snprintf(c->base, sizeof c->base, "%s", base_url);
    snprintf(c->ca, sizeof c->ca, "%s", ca_file ? ca_file : "");
    size_t n = strlen(c->base);
    while (n > 0 && c->base[n - 1] == '/') c->base[--n] = '\0';
    char auth[DZ_FED_TOKEN_MAX + 32];
    snprintf(auth, sizeof auth, "Authorization: Bearer %s", token);
    c->headers = curl_slist_append(NULL, auth);
    c->headers = curl_slist_append(c->headers, "Accept:"); /* "Accept:" with no value: curl sends none */
    c->post_headers = curl_slist_append(NULL, auth);
    c->post_headers = curl_slist_append(c->post_headers, "Accept:");
    c->post_headers = curl_slist_append(c->post_headers, "Content-Type: application/json");
    c->post_headers = curl_slist_append(c->post_headers, "Expect:"); /* no 100-continue round trip */
    *out = c;
    return DZ_OK;
}

void dz_fed_http_client_free(dz_fed_http_client *c) {
    if (!c) return;
    curl_slist_free_all(c->headers);
    curl_slist_free_all(c->post_headers);
    curl_easy_cleanup(c->h);
    free(c);
}

dz_status dz_fed_http_call(dz_fed_http_client *c, const char *method, const char *path, const char *body,
                           size_t len, long timeout_ms, int *status, char **resp, size_t *resp_len, dz_error *err) {
    char url[2048];
    sink s = {0};
    *status = 0, *resp = NULL, *resp_len = 0;
    snprintf(url, sizeof url, "%s%s", c->base, path);
    CURL *h = c->h;
    curl_easy_reset(h);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, strcmp(method, "POST") ? c->headers : c->post_headers);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &s);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, timeout_ms);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, timeout_ms < 5000 ? timeout_ms : 5000L);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    if (c->ca[0]) curl_easy_setopt(h, CURLOPT_CAINFO, c->ca); /* peer and host name are verified (curl's default) */
    if (!strcmp(method, "POST")) {
        curl_easy_setopt(h, CURLOPT_POST, 1L);
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body ? body : "");
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)len);
    }
    const CURLcode rc = curl_easy_perform(h);
    curl_off_t up = 0, down = 0;
    long req_bytes = 0, head_bytes = 0;
    curl_easy_getinfo(h, CURLINFO_SIZE_UPLOAD_T, &up);
    curl_easy_getinfo(h, CURLINFO_SIZE_DOWNLOAD_T, &down);
    curl_easy_getinfo(h, CURLINFO_REQUEST_SIZE, &req_bytes);
    curl_easy_getinfo(h, CURLINFO_HEADER_SIZE, &head_bytes);
    c->sent += (uint64_t)req_bytes + (uint64_t)up, c->received += (uint64_t)head_bytes + (uint64_t)down;
    if (rc != CURLE_OK) {
        free(s.p);
        if (s.too_big) return dz_fail(err, DZ_ERR_FORMAT, "%s: the answer is larger than %d bytes", url, DZ_FED_MAX_RESPONSE);
        return dz_fail(err, DZ_ERR_IO, "%s: %s", url, curl_easy_strerror(rc));
    }
    long code = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
    *status = (int)code;
    if (!s.p && !(s.p = calloc(1, 1))) return dz_fail(err, DZ_ERR_NOMEM, "out of memory");
    *resp = s.p, *resp_len = s.len;
    return DZ_OK;
}

void dz_fed_http_bytes(const dz_fed_http_client *c, uint64_t *sent, uint64_t *received) {
    *sent = c->sent, *received = c->received;
}
