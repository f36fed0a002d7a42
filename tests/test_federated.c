/* The federated protocol's pieces without a network: the one-byte code against
 * tools/ref_fed_byte_code.py's golden file (every byte decoded, chosen g encoded), and the
 * message parsers: each message round-trips, and every malformed or out-of-bounds field
 * is refused naming it. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include <cjson/cJSON.h>

#include "assets.h"
#include "json_file.h"
#include "distzo/setup.h"

#include "distzo/util.h"
#include "federated/admission.h"
#include "federated/byte_code.h"
#include "federated/protocol.h"
#include "federated/settings.h"
#include "run/seed_pool.h"

static uint32_t bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static cJSON *golden(void) { return test_json_file("federated/byte_code.json"); }

static void byte_code_decodes_as_the_reference(void **state) {
    (void)state;
    cJSON *o = golden();
    const cJSON *dec = cJSON_GetObjectItem(o, "decode"), *table;
    int tables = 0;
    cJSON_ArrayForEach(table, dec) {
        const float clip = (float)atof(table->string);
        assert_int_equal(cJSON_GetArraySize(table), 256);
        for (int b = 0; b < 256; b++) {
            const cJSON *want = cJSON_GetArrayItem(table, b);
            const float got = dz_fed_byte_decode((uint8_t)b, clip);
            if (cJSON_IsNull(want)) {
                assert_true(isnan(got));
            } else if (bits(got) != (uint32_t)want->valuedouble) {
                fail_msg("clip %g, byte 0x%02x: %a, the reference %a", (double)clip, b, (double)got,
                         (double)from_bits((uint32_t)want->valuedouble));
            }
        }
        tables++;
    }
    assert_int_equal(tables, 2);
    cJSON_Delete(o);
}

static void byte_code_encodes_as_the_reference(void **state) {
    (void)state;
    cJSON *o = golden();
    const cJSON *c;
    int n = 0;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(o, "encode")) {
        const float clip = (float)cJSON_GetObjectItem(c, "clip")->valuedouble;
        const float g = from_bits((uint32_t)cJSON_GetObjectItem(c, "g_bits")->valuedouble);
        const int want = (int)cJSON_GetObjectItem(c, "code")->valuedouble;
        const int got = dz_fed_byte_encode(g, clip);
        if (got != want) fail_msg("g %g, clip %g: code 0x%02x, the reference 0x%02x", (double)g, (double)clip, got, want);
        n++;
    }
    assert_true(n >= 40);
    assert_int_equal(dz_fed_byte_encode(NAN, 64.0f), DZ_FED_BYTE_NONE);
    assert_int_equal(dz_fed_byte_encode(INFINITY, 64.0f), DZ_FED_BYTE_NONE);
    cJSON_Delete(o);
}

/* Within the code's range the decoded value is within half a step (a factor e^(1/32)) of g,
 * with its sign; above it, the clip. */
static void byte_code_error_is_half_a_step(void **state) {
    (void)state;
    const float clip = 64.0f;
    const double half_step = exp(1.0 / 32.0) * (1 + 1e-6);
    for (double a = clip * exp(-7.8); a < clip; a *= 1.0137) {
        for (int s = -1; s <= 1; s += 2) {
            const float g = (float)(s * a), d = dz_fed_byte_decode(dz_fed_byte_encode(g, clip), clip);
            assert_true(d * g > 0);
            const double r = fabs((double)d / g);
            if (r > half_step || r < 1 / half_step) fail_msg("g %g decodes to %g", (double)g, (double)d);
        }
    }
    assert_true(dz_fed_byte_decode(dz_fed_byte_encode(1e6f, clip), clip) == clip);
    assert_true(dz_fed_byte_decode(dz_fed_byte_encode(-1e6f, clip), clip) == -clip);
}

/* ---- messages ---- */

#define KEY "0123456789abcdef0123456789abcdef"

static void expect_refused(dz_status st, const dz_error *err, const char *needle) {
    assert_int_not_equal(st, DZ_OK);
    if (!strstr(err->msg, needle)) fail_msg("the error '%s' does not name '%s'", err->msg, needle);
}

static dz_status submit(const char *json, uint32_t q, dz_fed_code code, dz_fed_submit *m, dz_error *err) {
    return dz_fed_submit_parse(json, strlen(json), q, code, m, err);
}

static void submit_round_trips(void **state) {
    (void)state;
    dz_fed_submit s = {.machine = 7, .round = 12, .n = 3, .slots = {4, 5, 6}, .values = {0, 0x85, 255}, .loss = 0.625};
    memcpy(s.key, KEY, sizeof s.key);
    char *json = dz_fed_submit_json(&s, DZ_FED_CODE_BYTE);
    dz_fed_submit back;
    dz_error err = {0};
    assert_int_equal(dz_fed_submit_parse(json, strlen(json), 8, DZ_FED_CODE_BYTE, &back, &err), DZ_OK);
    assert_int_equal(back.machine, 7);
    assert_int_equal(back.round, 12);
    assert_int_equal(back.n, 3);
    assert_memory_equal(back.slots, s.slots, 3 * sizeof(uint32_t));
    assert_memory_equal(back.values, s.values, 3 * sizeof(uint32_t));
    assert_string_equal(back.key, KEY);
    assert_true(back.loss == 0.625);
    free(json);
    /* f32: the bits exactly, NaN loss as null */
    s.values[0] = bits(-3.25f), s.values[1] = 0xFFFFFFFFu, s.values[2] = bits(1e-30f), s.loss = NAN;
    json = dz_fed_submit_json(&s, DZ_FED_CODE_F32);
    assert_int_equal(dz_fed_submit_parse(json, strlen(json), 8, DZ_FED_CODE_F32, &back, &err), DZ_OK);
    assert_memory_equal(back.values, s.values, 3 * sizeof(uint32_t));
    assert_true(isnan(back.loss));
    free(json);
}

static void submit_refuses_bad_fields(void **state) {
    (void)state;
    dz_fed_submit m;
    dz_error err = {0};
    const char *ok = "{\"machine\":1,\"key\":\"" KEY "\",\"round\":0,\"slots\":[0],\"codes\":[3]}";
    assert_int_equal(submit(ok, 4, DZ_FED_CODE_BYTE, &m, &err), DZ_OK);
    struct {
        const char *json, *names;
    } bad[] = {
        {"", "not a JSON object"},
        {"[1,2]", "not a JSON object"},
        {"{\"machine\":1,\"key\":\"" KEY "\",\"round\":0,\"slots\":[0],\"codes\":[3]", "not a JSON object"},
        {"{\"key\":\"" KEY "\",\"round\":0,\"slots\":[0],\"codes\":[3]}", "'machine' is missing"},
        {"{\"machine\":0,\"key\":\"" KEY "\",\"round\":0,\"slots\":[0],\"codes\":[3]}", "'machine'"},
        {"{\"machine\":1.5,\"key\":\"" KEY "\",\"round\":0,\"slots\":[0],\"codes\":[3]}", "'machine'"},
        {"{\"machine\":\"1\",\"key\":\"" KEY "\",\"round\":0,\"slots\":[0],\"codes\":[3]}", "'machine' must be a number"},
        {"{\"machine\":1e300,\"key\":\"" KEY "\",\"round\":0,\"slots\":[0],\"codes\":[3]}", "'machine'"},
        {"{\"machine\":1,\"key\":\"0123\",\"round\":0,\"slots\":[0],\"codes\":[3]}", "'key' has 4 characters"},
        {"{\"machine\":1,\"key\":\"0123456789ABCDEF0123456789abcdef\",\"round\":0,\"slots\":[0],\"codes\":[3]}",
         "lowercase hex"},
        {"{\"machine\":1,\"key\":\"" KEY "\",\"round\":-1,\"slots\":[0],\"codes\":[3]}", "'round'"},
        {"{\"machine\":1,\"key\":\"" KEY "\",\"round\":0,\"slots\":[4],\"codes\":[3]}", "'slots[0]'"},
        {"{\"machine\":1,\"key\":\"" KEY "\",\"round\":0,\"slots\":[0,1,2,3,0],\"codes\":[1,2,3,4,5]}", "at most 4"},
        {"{\"machine\":1,\"key\":\"" KEY "\",\"round\":0,\"slots\":[1,1],\"codes\":[3,3]}", "slot 1 is given twice"},
        {"{\"machine\":1,\"key\":\"" KEY "\",\"round\":0,\"slots\":[0,1],\"codes\":[3]}", "2 slots but 1 values"},
        {"{\"machine\":1,\"key\":\"" KEY "\",\"round\":0,\"slots\":[0],\"codes\":[256]}", "'codes[0]'"},
        {"{\"machine\":1,\"key\":\"" KEY "\",\"round\":0,\"slots\":[0],\"g_bits\":[3]}", "'codes' is missing"},
        {"{\"machine\":1,\"key\":\"" KEY "\",\"round\":0,\"slots\":0,\"codes\":[3]}", "'slots' must be an array"},
        {"{\"machine\":1,\"key\":\"" KEY "\",\"round\":0,\"slots\":[0],\"codes\":[3],\"loss\":\"x\"}", "'loss'"},
        /* a key twice, text after the object: refused, not read either way (they were accepted) */
        {"{\"machine\":1,\"key\":\"" KEY "\",\"round\":0,\"slots\":[0],\"codes\":[1],\"machine\":2}",
         "key 'machine' is given twice"},
        {"{\"machine\":1,\"key\":\"" KEY "\",\"round\":0,\"slots\":[0],\"codes\":[1]}garbage{{{",
         "text after the JSON object"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        memset(&err, 0, sizeof err);
        expect_refused(submit(bad[i].json, 4, DZ_FED_CODE_BYTE, &m, &err), &err, bad[i].names);
    }
    /* f32 takes any 32-bit pattern, nothing above */
    memset(&err, 0, sizeof err);
    expect_refused(submit("{\"machine\":1,\"key\":\"" KEY "\",\"round\":0,\"slots\":[0],\"g_bits\":[4294967296]}", 4,
                          DZ_FED_CODE_F32, &m, &err), &err, "'g_bits[0]'");
    /* a body beyond the response bound */
    memset(&err, 0, sizeof err);
    expect_refused(dz_fed_submit_parse(ok, (size_t)DZ_FED_MAX_RESPONSE + 1, 4, DZ_FED_CODE_BYTE, &m, &err), &err,
                   "too long");
}

static void join_and_run_info(void **state) {
    (void)state;
    dz_fed_join_req j = {.protocol = DZ_FED_PROTOCOL, .fingerprint = 0xfedcba9876543210ULL};
    snprintf(j.name, sizeof j.name, "laptop 3");
    char *json = dz_fed_join_req_json(&j);
    dz_fed_join_req back;
    dz_error err = {0};
    assert_int_equal(dz_fed_join_req_parse(json, strlen(json), &back, &err), DZ_OK);
    assert_true(back.fingerprint == j.fingerprint);
    assert_string_equal(back.name, "laptop 3");
    free(json);
    const char *v3 = "{\"protocol\":3,\"fingerprint\":\"0000000000000001\",\"name\":\"\"}";
    expect_refused(dz_fed_join_req_parse(v3, strlen(v3), &back, &err), &err, "protocol 3");
    char longname[200];
    snprintf(longname, sizeof longname, "{\"protocol\":1,\"fingerprint\":\"0000000000000001\",\"name\":\"%070d\"}", 0);
    expect_refused(dz_fed_join_req_parse(longname, strlen(longname), &back, &err), &err, "at most 64");
    const char *ctl = "{\"protocol\":1,\"fingerprint\":\"0000000000000001\",\"name\":\"a\\u0001b\"}";
    expect_refused(dz_fed_join_req_parse(ctl, strlen(ctl), &back, &err), &err, "not printable");

    dz_fed_run_info r = {.fingerprint = 42, .q = 3, .code = DZ_FED_CODE_F32, .g_clip = 8.5f,
                         .run_json = "{\"model\":\"m.bin\",\"spsa_samples\":3}"};
    json = dz_fed_run_info_json(&r);
    dz_fed_run_info rb;
    assert_int_equal(dz_fed_run_info_parse(json, strlen(json), &rb, &err), DZ_OK);
    assert_int_equal(rb.q, 3);
    assert_int_equal(rb.code, DZ_FED_CODE_F32);
    assert_true(rb.g_clip == 8.5f && rb.fingerprint == 42);
    assert_non_null(strstr(rb.run_json, "\"model\":\"m.bin\""));
    free(rb.run_json);
    free(json);
    const char *q0 = "{\"protocol\":1,\"fingerprint\":\"0000000000000001\",\"q\":65,\"code\":\"byte\",\"g_clip\":1,\"run\":{}}";
    expect_refused(dz_fed_run_info_parse(q0, strlen(q0), &rb, &err), &err, "'q'");
    const char *nr = "{\"protocol\":1,\"fingerprint\":\"0000000000000001\",\"q\":2,\"code\":\"byte\",\"g_clip\":1,\"run\":[]}";
    expect_refused(dz_fed_run_info_parse(nr, strlen(nr), &rb, &err), &err, "'run' must be an object");
    const char *cl = "{\"protocol\":1,\"fingerprint\":\"0000000000000001\",\"q\":2,\"code\":\"byte\",\"g_clip\":-1,\"run\":{}}";
    expect_refused(dz_fed_run_info_parse(cl, strlen(cl), &rb, &err), &err, "'g_clip'");
    const char *co = "{\"protocol\":1,\"fingerprint\":\"0000000000000001\",\"q\":2,\"code\":\"int8\",\"g_clip\":1,\"run\":{}}";
    expect_refused(dz_fed_run_info_parse(co, strlen(co), &rb, &err), &err, "'code'");
}

static void round_round_trips(void **state) {
    (void)state;
    dz_fed_round s = {.version = 0x1234, .round = 9, .log_count = 9, .open = 1, .checksum = 0x8000000000000001ULL,
                      .n_slots = 2, .slots = {3, 4}, .deadline_ms = 2500};
    char *json = dz_fed_round_json(&s);
    dz_fed_round b;
    dz_error err = {0};
    assert_int_equal(dz_fed_round_parse(json, strlen(json), 5, 0, &b, &err), DZ_OK);
    assert_memory_equal(&b, &s, sizeof s);
    expect_refused(dz_fed_round_parse(json, strlen(json), 4, 0, &b, &err), &err, "'slots[1]'"); /* slot 4 of q = 4 */
    expect_refused(dz_fed_round_parse(json, strlen(json), 5, 16, &b, &err), &err, "'seeds'"); /* a pool run needs them */
    free(json);
    s.pool = 16, s.seeds[0] = 15, s.seeds[1] = 0; /* a pool run's round: each slot's seed */
    json = dz_fed_round_json(&s);
    assert_int_equal(dz_fed_round_parse(json, strlen(json), 5, 16, &b, &err), DZ_OK);
    assert_memory_equal(&b, &s, sizeof s);
    expect_refused(dz_fed_round_parse(json, strlen(json), 5, 15, &b, &err), &err, "'seeds[0]'"); /* seed 15 of K = 15 */
    expect_refused(dz_fed_round_parse(json, strlen(json), 5, 0, &b, &err), &err, "'seeds' in a run without");
    free(json);
    const char *short_seeds = "{\"version\":\"0000000000000001\",\"round\":1,\"log_count\":1,\"open\":true,"
                              "\"finished\":false,\"checksum\":\"0000000000000001\",\"slots\":[0,1],\"seeds\":[3],"
                              "\"deadline_ms\":1}";
    expect_refused(dz_fed_round_parse(short_seeds, strlen(short_seeds), 4, 8, &b, &err), &err, "2 slots but 1 seeds");
}

/* The run answer of a pool run carries K and the sampling; one without them is a plain run. */
static void run_info_of_a_pool_run(void **state) {
    (void)state;
    const dz_fed_run_info a = {.fingerprint = 7, .q = 4, .code = DZ_FED_CODE_BYTE, .g_clip = 8, .run_json = "{}",
                               .seed_pool = 4096, .seed_sampling = 1};
    char *json = dz_fed_run_info_json(&a);
    dz_fed_run_info b;
    dz_error err = {0};
    assert_int_equal(dz_fed_run_info_parse(json, strlen(json), &b, &err), DZ_OK);
    assert_int_equal(b.seed_pool, 4096);
    assert_int_equal(b.seed_sampling, 1);
    free(b.run_json);
    assert_non_null(strstr(json, "\"protocol\":2")); /* a worker of protocol 1 refuses it */
    free(json);
    const char *v1 = "{\"protocol\":1,\"fingerprint\":\"0000000000000001\",\"q\":2,\"code\":\"byte\",\"g_clip\":1,"
                     "\"seed_pool\":16,\"seed_sampling\":\"uniform\",\"run\":{}}";
    expect_refused(dz_fed_run_info_parse(v1, strlen(v1), &b, &err), &err, "protocol 1 has no field 'seed_pool'");
    const char *v2 = "{\"protocol\":2,\"fingerprint\":\"0000000000000001\",\"q\":2,\"code\":\"byte\",\"g_clip\":1,"
                     "\"run\":{}}";
    expect_refused(dz_fed_run_info_parse(v2, strlen(v2), &b, &err), &err, "protocol 2 needs the field 'seed_pool'");
    const char *big = "{\"protocol\":2,\"fingerprint\":\"0000000000000001\",\"q\":2,\"code\":\"byte\",\"g_clip\":1,"
                      "\"seed_pool\":4194304,\"seed_sampling\":\"uniform\",\"run\":{}}";
    expect_refused(dz_fed_run_info_parse(big, strlen(big), &b, &err), &err, "'seed_pool'");
    const char *samp = "{\"protocol\":2,\"fingerprint\":\"0000000000000001\",\"q\":2,\"code\":\"byte\",\"g_clip\":1,"
                       "\"seed_pool\":16,\"seed_sampling\":\"greedy\",\"run\":{}}";
    expect_refused(dz_fed_run_info_parse(samp, strlen(samp), &b, &err), &err, "'seed_sampling'");
    const char *wide = "{\"protocol\":2,\"fingerprint\":\"0000000000000001\",\"q\":33,\"code\":\"byte\",\"g_clip\":1,"
                       "\"seed_pool\":16,\"seed_sampling\":\"uniform\",\"run\":{}}";
    expect_refused(dz_fed_run_info_parse(wide, strlen(wide), &b, &err), &err, "at most 32 slots");
}

/* GET /v1/pool's body: encoded and decoded bit for bit; a wrong K, length or CRC refused. */
static void pool_state_round_trips(void **state) {
    (void)state;
    const float acc[5] = {0.5f, -0.0f, 1e-30f, -3.25f, 0};
    uint8_t buf[64];
    assert_int_equal(dz_fed_pool_state_bytes(5), 40);
    dz_fed_pool_state_encode(17, 5, acc, buf);
    float back[5];
    uint32_t count = 0;
    dz_error err = {0};
    assert_int_equal(dz_fed_pool_state_decode(buf, 40, 5, &count, back, &err), DZ_OK);
    assert_int_equal(count, 17);
    assert_memory_equal(back, acc, sizeof acc);
    expect_refused(dz_fed_pool_state_decode(buf, 40, 6, &count, back, &err), &err, "a pool of 5 seeds");
    expect_refused(dz_fed_pool_state_decode(buf, 36, 5, &count, back, &err), &err, "36 bytes");
    buf[20] ^= 1;
    expect_refused(dz_fed_pool_state_decode(buf, 40, 5, &count, back, &err), &err, "CRC");
}

/* FedKSeed-Pro's probabilities against values worked out by hand, the accumulated scalars,
 * and the draw: a function of (run seed, round, pool), following the probabilities. */
static void seed_pool_importance(void **state) {
    (void)state;
    dz_seed_pool p;
    dz_error err = {0};
    assert_int_equal(dz_seed_pool_init(&p, 4, 2, &err), DZ_OK);
    /* seed 0: |g| 2 and 4 (mean 3); seed 1: |g| 1; seed 2: a g of 0 (no contribution); seed 3: never drawn */
    const float r1[4] = {2.0f, -1.0f, 0.0f, 1.0f}, r2[4] = {4.0f, 0.0f, 0.0f, 2.0f};
    assert_int_equal(dz_seed_pool_add(&p, 0.5f, r1, &err), DZ_OK);
    assert_int_equal(dz_seed_pool_add(&p, 0.5f, r2, &err), DZ_OK);
    assert_true(p.acc[0] == 3.0f && p.acc[1] == -0.5f && p.acc[2] == 0.0f && p.acc[3] == 0.0f);
    /* psi = (m - 0) / (3 - 0) = 1, 1/3, 0, 0; p = e^psi / (e + e^(1/3) + 2) */
    const double want[4] = {0.44460726923480115, 0.2282689832714796, 0.16356187374685965, 0.16356187374685965};
    double prob[4];
    dz_seed_pool_probabilities(&p, DZ_SEED_IMPORTANCE, prob);
    for (int i = 0; i < 4; i++) assert_true(fabs(prob[i] - want[i]) < 1e-15);
    dz_seed_pool_probabilities(&p, DZ_SEED_UNIFORM, prob);
    for (int i = 0; i < 4; i++) assert_true(prob[i] == 0.25);
    const float bad[4] = {1.0f, 1.0f, 4.0f, 0.5f}; /* seed 4 of 4, seed 0.5 */
    expect_refused(dz_seed_pool_add(&p, 0.5f, bad, &err), &err, "seed 4");
    /* the draw follows the probabilities, and is the same for the same round */
    int hits[4] = {0};
    const int rounds = 20000;
    uint32_t seeds[2], again[2];
    for (int r = 0; r < rounds; r++) {
        dz_seed_pool_draw(&p, DZ_SEED_IMPORTANCE, 7, (uint32_t)r, prob, seeds);
        dz_seed_pool_draw(&p, DZ_SEED_IMPORTANCE, 7, (uint32_t)r, prob, again);
        assert_memory_equal(seeds, again, sizeof seeds);
        hits[seeds[0]]++, hits[seeds[1]]++;
    }
    for (int i = 0; i < 4; i++) /* 40000 draws: a standard error below 0.0025 */
        assert_true(fabs(hits[i] / (2.0 * rounds) - want[i]) < 0.012);
    dz_seed_pool_draw(&p, DZ_SEED_UNIFORM, 7, 3, prob, seeds);
    dz_seed_pool_draw(&p, DZ_SEED_UNIFORM, 8, 3, prob, again);
    assert_true(seeds[0] < 4 && seeds[1] < 4);
    dz_seed_pool_free(&p);
    /* all seeds alike (or none drawn yet): uniform */
    assert_int_equal(dz_seed_pool_init(&p, 3, 1, &err), DZ_OK);
    dz_seed_pool_probabilities(&p, DZ_SEED_IMPORTANCE, prob);
    for (int i = 0; i < 3; i++) assert_true(fabs(prob[i] - 1.0 / 3) < 1e-15);
    dz_seed_pool_free(&p);
    uint8_t fp[64];
    dz_seed_pool_log_tag(4096, "federated 0123456789abcdef", fp);
    assert_string_equal((const char *)fp, "fedkseed 4096 federated 0123456789abcdef");
    assert_int_equal(dz_seed_pool_log_k(fp), 4096);
    memset(fp, 0, sizeof fp);
    memcpy(fp, "federated 0123456789abcdef", 26);
    assert_int_equal(dz_seed_pool_log_k(fp), 0);
}

static void token_files(void **state) {
    (void)state;
    char dir[] = "/tmp/dz_fed_XXXXXX", path[64], tok[DZ_FED_TOKEN_MAX + 1];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/t", dir);
    dz_error err = {0};
    assert_int_equal(dz_write_file_atomic(path, "0123456789abcdefXYZ\nsecond line\n", 33, &err), DZ_OK);
    assert_int_equal(dz_fed_read_token(path, tok, &err), DZ_OK);
    assert_string_equal(tok, "0123456789abcdefXYZ");
    assert_int_equal(dz_write_file_atomic(path, "short\n", 6, &err), DZ_OK);
    expect_refused(dz_fed_read_token(path, tok, &err), &err, "16..256");
    assert_int_equal(dz_write_file_atomic(path, "0123456789 abcdefXYZ", 20, &err), DZ_OK);
    expect_refused(dz_fed_read_token(path, tok, &err), &err, "a space");
    unlink(path);
    rmdir(dir);
    assert_true(dz_fed_secret_equal("abcdef", "abcdef"));
    assert_false(dz_fed_secret_equal("abcdef", "abcdeg"));
    assert_false(dz_fed_secret_equal("abcdef", "abcde"));
    char k1[DZ_FED_KEY_CHARS + 1], k2[DZ_FED_KEY_CHARS + 1];
    assert_int_equal(dz_fed_new_key(k1), 0);
    assert_int_equal(dz_fed_new_key(k2), 0);
    assert_int_equal(strlen(k1), DZ_FED_KEY_CHARS);
    assert_string_not_equal(k1, k2);
}

/* federated.json: written and read back equal; a field out of its bounds refused by the
 * check, a malformed file by the reader, both naming the option or field. */
static void settings_round_trip_and_bounds(void **state) {
    (void)state;
    char dir[] = "/tmp/dz_fedset_XXXXXX", path[64];
    assert_non_null(mkdtemp(dir));
    dz_fed_settings s, back;
    dz_fed_settings_default(&s);
    s.samples_per_worker = 2, s.quorum = 3, s.round_timeout = 2.5, s.min_workers = 4, s.worker_timeout = 7;
    s.code = DZ_FED_CODE_F32, s.g_clip = 12.25f, s.robust_clip = 3, s.max_joins_per_client = 5;
    dz_error err = {0};
    uint64_t fp = 0;
    assert_int_equal(dz_fed_settings_check(&s, 4, &err), DZ_OK);
    assert_int_equal(dz_fed_settings_write(dir, &s, 0xabcdef0123456789ULL, &err), DZ_OK);
    assert_int_equal(dz_fed_settings_read(dir, &back, &fp, &err), DZ_OK);
    assert_true(fp == 0xabcdef0123456789ULL);
    assert_int_equal(back.samples_per_worker, 2);
    assert_int_equal(back.quorum, 3);
    assert_int_equal(back.min_workers, 4);
    assert_int_equal(back.code, DZ_FED_CODE_F32);
    assert_true(back.round_timeout == 2.5 && back.worker_timeout == 7 && back.g_clip == 12.25f && back.robust_clip == 3);
    assert_int_equal(back.max_joins_per_client, 5);
    struct {
        dz_fed_settings s;
        const char *names;
    } bad[] = {{s, "--samples-per-worker"}, {s, "--quorum"}, {s, "--round-timeout"}, {s, "--min-workers"},
               {s, "--g-clip"}, {s, "--robust-clip"}, {s, "--max-joins-per-client"}};
    bad[0].s.samples_per_worker = 5, bad[1].s.quorum = 5, bad[2].s.round_timeout = 0, bad[3].s.min_workers = 0;
    bad[4].s.g_clip = NAN, bad[5].s.robust_clip = 0.5f, bad[6].s.max_joins_per_client = 0;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        memset(&err, 0, sizeof err);
        expect_refused(dz_fed_settings_check(&bad[i].s, 4, &err), &err, bad[i].names);
    }
    snprintf(path, sizeof path, "%s/federated.json", dir);
    const char *broken = "{\"samples_per_worker\": 1, \"quorum\": 0}";
    assert_int_equal(dz_write_file_atomic(path, broken, strlen(broken), &err), DZ_OK);
    expect_refused(dz_fed_settings_read(dir, &back, &fp, &err), &err, "'round_timeout'");
    unlink(path);
    rmdir(dir);
}

/* Joins per address and minute, and which workers get slots (admission.h), against
 * outcomes worked out by hand. */
static void admission_caps_joins_and_slots(void **state) {
    (void)state;
    static dz_fed_admission a;
    enum { CAP = 3 };
    memset(&a, 0, sizeof a);
    for (int i = 0; i < 3; i++) assert_true(dz_fed_admit_join(&a, "10.0.0.1", 100.0 + i, CAP) == 0);
    assert_true(fabs(dz_fed_admit_join(&a, "10.0.0.1", 110.0, CAP) - 50.0) < 1e-9); /* the window began at 100 */
    assert_true(dz_fed_admit_join(&a, "10.0.0.2", 110.0, CAP) == 0);                /* another address: its own count */
    assert_true(dz_fed_admit_join(&a, "10.0.0.1", 160.0, CAP) == 0);                /* a new minute */
    assert_true(dz_fed_admit_join(&a, "10.0.0.1", 161.0, CAP) == 0);
    char addr[DZ_FED_JOIN_WINDOWS][24];
    memset(&a, 0, sizeof a);
    for (int i = 0; i < DZ_FED_JOIN_WINDOWS; i++) {
        snprintf(addr[i], sizeof addr[i], "10.1.%d.%d", i / 256, i % 256);
        assert_true(dz_fed_admit_join(&a, addr[i], 200.0 + i * 0.01, 1) == 0);
    }
    const double full = dz_fed_admit_join(&a, "10.2.0.0", 210.0, 1); /* every entry in use: until the oldest frees */
    assert_true(fabs(full - 50.0) < 1e-9);
    assert_true(dz_fed_admit_join(&a, "10.2.0.0", 260.0, 1) == 0);
    /* in id order: proven workers always; new ones caught up and within 2 of their address */
    const dz_fed_candidate m[] = {{"A", 0, 1}, {"A", 1, 0}, {"A", 0, 0}, {"A", 0, 1}, {"A", 0, 1}, {"B", 0, 1},
                                  {"A", 1, 1}};
    const int want[] = {1, 1, 0, 1, 0, 1, 1};
    int got[7];
    dz_fed_eligible(m, 7, 2, got);
    for (int i = 0; i < 7; i++) assert_int_equal(got[i], want[i]);
}

/* stories260K with a ZO engine of q = 2 (seed 5), as the coordinator sets it up. */
static dz_zo_setup *load_260k(void) {
    char path[4200];
    test_asset_path(path, sizeof path, "stories260K/stories260K.bin");
    const dz_weights_spec ws = {.path = path, .master_dtype = DZ_F32};
    const dz_engine_spec es = {.max_batch = 1, .max_len = 2, .streams = 2,
                               .zo = {.seed = 5, .eps = 1e-3f, .q = 2, .fuse = 1}};
    dz_zo_setup *s = NULL;
    dz_error err = {0};
    if (dz_setup_weights(&ws, &s, &err) != DZ_OK || dz_setup_engine(s, &es, &err) != DZ_OK) fail_msg("%s", err.msg);
    return s;
}

/* The pool's fixed-point weights move along the engine's own z (against dz_zo_apply of
 * the same update: equal up to float rounding, where a wrong z would be off by the whole
 * update), and following the scalars step by step gives bitwise what setting them at once
 * does (seed_pool.h). */
static void pool_weights_follow_the_engine(void **state) {
    (void)state;
    dz_zo_setup *a = load_260k(), *b = load_260k(), *c = load_260k();
    dz_model *ma = dz_setup_model(a), *mb = dz_setup_model(b), *mc = dz_setup_model(c);
    dz_seed_pool pool;
    dz_seed_pool_weights wa, wc;
    dz_error err = {0};
    assert_int_equal(dz_seed_pool_init(&pool, 8, 2, &err), DZ_OK);
    assert_int_equal(dz_seed_pool_weights_init(&wa, ma, 5, 0, 0, &pool, &err), DZ_OK);
    assert_int_equal(dz_seed_pool_weights_init(&wc, mc, 5, 0, 0, &pool, &err), DZ_OK);
    pool.acc[0] = -0.5f; /* seed 0: draw 0, step 0 slot 0 */
    dz_seed_pool_weights_sync(&wa, &pool);
    pool.acc[0] = -0.75f, pool.acc[5] = 0.25f; /* seed 5: step 2 slot 1 */
    dz_seed_pool_weights_sync(&wa, &pool);
    dz_seed_pool_weights_sync(&wc, &pool); /* at once */
    const float g0[2] = {-0.75f, 0}, g2[2] = {0, 0.25f};
    dz_zo_engine *eb = dz_setup_zo_engine(b);
    assert_int_equal(dz_zo_apply(eb, 0, 1.0f, g0, &err), DZ_OK);
    assert_int_equal(dz_zo_apply(eb, 2, 1.0f, g2, &err), DZ_OK);
    assert_int_equal(dz_zo_flush(eb, &err), DZ_OK);
    const dz_param_table *t = dz_model_params(ma);
    double moved = 0, worst = 0;
    int64_t n_all = 0;
    for (int i = 0; i < t->count; i++) {
        const int64_t n = dz_param_numel(&t->params[i]);
        const float *pa = dz_model_tensor(ma, i), *pb = dz_model_tensor(mb, i), *pc = dz_model_tensor(mc, i);
        assert_memory_equal(pa, pc, (size_t)n * sizeof(float));
        for (int64_t j = 0; j < n; j++) {
            /* a few float roundings of values up to a few units (base, the two terms of the update) */
            const double d = fabs((double)pa[j] - pb[j]);
            worst = d > worst ? d : worst;
            moved += fabs((double)pa[j] - wa.base[i][j]);
        }
        n_all += n;
    }
    moved /= (double)n_all;
    print_message("pool weights vs dz_zo_apply: worst difference %.3g; mean |update| %.3g\n", worst, moved);
    assert_true(moved > 0.05); /* |0.75 z0 + 0.25 z5| / 2 is about 0.3 on average */
    assert_true(worst < 2e-6);  /* a few float roundings; another z would differ by the update itself */
    dz_seed_pool_weights_free(&wa);
    dz_seed_pool_weights_free(&wc);
    dz_seed_pool_free(&pool);
    dz_setup_free(a);
    dz_setup_free(b);
    dz_setup_free(c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(byte_code_decodes_as_the_reference),
        cmocka_unit_test(byte_code_encodes_as_the_reference),
        cmocka_unit_test(byte_code_error_is_half_a_step),
        cmocka_unit_test(submit_round_trips),
        cmocka_unit_test(submit_refuses_bad_fields),
        cmocka_unit_test(join_and_run_info),
        cmocka_unit_test(round_round_trips),
        cmocka_unit_test(run_info_of_a_pool_run),
        cmocka_unit_test(pool_state_round_trips),
        cmocka_unit_test(seed_pool_importance),
        cmocka_unit_test(pool_weights_follow_the_engine),
        cmocka_unit_test(token_files),
        cmocka_unit_test(settings_round_trip_and_bounds),
        cmocka_unit_test(admission_caps_joins_and_slots),
    };
    return test_assets_exit(cmocka_run_group_tests(tests, NULL, NULL));
}
