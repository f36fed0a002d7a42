/* libFuzzer target for the federated protocol's message parsers (src/federated/protocol.h):
 * the coordinator parses what any client on the network sends, a worker what the
 * coordinator answers. Beyond "does not crash": what a parser accepts is within its
 * bounds (slots below q, byte codes below 256, a key of 32 hex digits), and writing an
 * accepted message and parsing it again gives the same message. The first input byte
 * chooses q (1..64), the code and whether the run has a seed pool (K = 16); the rest is
 * the body (also read as GET /v1/pool's binary state). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "federated/protocol.h"

static void check_key(const char *k) {
    if (strlen(k) != DZ_FED_KEY_CHARS) abort();
    for (const char *p = k; *p; p++)
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f'))) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const uint32_t q = (uint32_t)(data[0] & 63) + 1;
    const dz_fed_code code = data[0] & 64 ? DZ_FED_CODE_F32 : DZ_FED_CODE_BYTE;
    const uint32_t pool = data[0] & 128 ? 16 : 0;
    const char *body = (const char *)data + 1;
    const size_t len = size - 1;
    dz_error err;

    dz_fed_submit s, s2;
    if (dz_fed_submit_parse(body, len, q, code, &s, &err) == DZ_OK) {
        if (s.n < 0 || (uint32_t)s.n > q || s.machine < 1) abort();
        for (int i = 0; i < s.n; i++) {
            if (s.slots[i] >= q) abort();
            if (code == DZ_FED_CODE_BYTE && s.values[i] > 255) abort();
            for (int j = 0; j < i; j++)
                if (s.slots[i] == s.slots[j]) abort();
        }
        check_key(s.key);
        char *again = dz_fed_submit_json(&s, code);
        if (!again || dz_fed_submit_parse(again, strlen(again), q, code, &s2, &err) != DZ_OK) abort();
        if (s2.n != s.n || memcmp(s2.slots, s.slots, sizeof s.slots) || memcmp(s2.values, s.values, sizeof s.values))
            abort();
        free(again);
    }
    dz_fed_round r, r2;
    if (dz_fed_round_parse(body, len, q, pool, &r, &err) == DZ_OK) {
        if (r.n_slots < 0 || (uint32_t)r.n_slots > q || r.pool != pool) abort();
        for (int i = 0; i < r.n_slots; i++)
            if (r.slots[i] >= q || (pool && r.seeds[i] >= pool) || (!pool && r.seeds[i])) abort();
        char *again = dz_fed_round_json(&r);
        if (!again || dz_fed_round_parse(again, strlen(again), q, pool, &r2, &err) != DZ_OK) abort();
        if (memcmp(&r, &r2, sizeof r)) abort();
        free(again);
    }
    dz_fed_join_req j;
    if (dz_fed_join_req_parse(body, len, &j, &err) == DZ_OK && strlen(j.name) > DZ_FED_MAX_NAME) abort();
    dz_fed_join_resp jr;
    if (dz_fed_join_resp_parse(body, len, &jr, &err) == DZ_OK) check_key(jr.key);
    dz_fed_run_info ri;
    if (dz_fed_run_info_parse(body, len, &ri, &err) == DZ_OK) {
        if (ri.q < 1 || ri.q > DZ_FED_MAX_SLOTS || !(ri.g_clip > 0) || !ri.run_json) abort();
        if (ri.seed_pool > DZ_FED_MAX_POOL || (ri.seed_pool && 2 * ri.q > DZ_FED_MAX_SLOTS)) abort();
        if (ri.seed_sampling != 0 && ri.seed_sampling != 1) abort();
        free(ri.run_json);
    }
    float acc[16], acc2[16];
    uint32_t count = 0, count2 = 0;
    if (dz_fed_pool_state_decode(data + 1, len, 16, &count, acc, &err) == DZ_OK) {
        uint8_t again[DZ_FED_POOL_HEADER + 4 * 16 + 4];
        if (len != sizeof again || count > INT32_MAX) abort();
        for (int i = 0; i < 16; i++)
            if (!isfinite(acc[i])) abort();
        dz_fed_pool_state_encode(count, 16, acc, again);
        if (memcmp(again, data + 1, len) || dz_fed_pool_state_decode(again, len, 16, &count2, acc2, &err) != DZ_OK ||
            count2 != count)
            abort();
    }
    char msg[256];
    dz_fed_error_message(body, len, msg, sizeof msg);
    return 0;
}
