/* The progress reporter (distzo/progress.h): nothing before the delay, nor without a sink or
 * below the info level; a first and a final report with the counts and an ETA; an operation
 * begun inside another joins it. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "distzo/log.h"
#include "distzo/progress.h"

typedef struct seen {
    int reports, firsts, finals;
    int64_t last_done, last_total;
    double last_eta;
    const char *what;
} seen;

static void record(const dz_progress_report *r, void *user) {
    seen *s = user;
    s->reports++, s->firsts += r->first, s->finals += r->final;
    s->last_done = r->done, s->last_total = r->total, s->last_eta = r->eta_s, s->what = r->what;
}

static int setup(void **state) {
    (void)state;
    dz_log_set_level(DZ_LOG_INFO);
    return 0;
}

static void quiet_within_the_delay(void **state) {
    (void)state;
    seen s = {0};
    dz_progress_set_sink(record, &s);
    dz_progress_set_delay(3600);
    dz_progress p;
    dz_progress_begin(&p, "evaluation", "examples", 10);
    for (int i = 0; i < 10; i++) dz_progress_add(1);
    dz_progress_end(&p);
    assert_int_equal(s.reports, 0);
    dz_progress_add(1); /* no operation running: nothing, no crash */
    assert_int_equal(s.reports, 0);
}

static void first_and_final_reports(void **state) {
    (void)state;
    seen s = {0};
    dz_progress_set_sink(record, &s);
    dz_progress_set_delay(0);
    dz_progress p;
    dz_progress_begin(&p, "replay", "steps", 4);
    dz_progress_add(1);
    assert_int_equal(s.reports, 1);
    assert_int_equal(s.firsts, 1);
    assert_int_equal(s.last_done, 1);
    assert_int_equal(s.last_total, 4);
    assert_true(isfinite(s.last_eta) && s.last_eta >= 0);
    dz_progress_add(1);
    dz_progress_add(1); /* reports at most ten times a second: these may go unsent */
    dz_progress_add(1); /* the last unit: always sent */
    assert_in_range(s.reports, 2, 4);
    assert_int_equal(s.last_done, 4);
    const int before_end = s.reports;
    dz_progress_end(&p);
    assert_int_equal(s.reports, before_end + 1);
    assert_int_equal(s.finals, 1);
    assert_int_equal(s.firsts, 1);
    assert_string_equal(s.what, "replay");
}

static void nested_operation_joins(void **state) {
    (void)state;
    seen s = {0};
    dz_progress_set_sink(record, &s);
    dz_progress_set_delay(0);
    dz_progress outer, inner;
    dz_progress_begin(&outer, "evaluation", "examples", 6);
    dz_progress_begin(&inner, "dev", "examples", 3);
    dz_progress_add(3);
    dz_progress_end(&inner); /* joined: no final of its own */
    assert_int_equal(s.finals, 0);
    assert_int_equal(s.last_total, 6);
    dz_progress_add(3);
    dz_progress_end(&outer);
    assert_int_equal(s.finals, 1);
    assert_int_equal(s.last_done, 6);
    assert_string_equal(s.what, "evaluation");
}

static void silent_below_info_or_without_sink(void **state) {
    (void)state;
    seen s = {0};
    dz_progress_set_sink(record, &s);
    dz_progress_set_delay(0);
    dz_log_set_level(DZ_LOG_WARN); /* --quiet, ranks other than 0 */
    dz_progress p;
    dz_progress_begin(&p, "evaluation", "examples", 2);
    dz_progress_add(2);
    dz_progress_end(&p);
    dz_log_set_level(DZ_LOG_INFO);
    dz_progress_set_sink(NULL, NULL);
    dz_progress_begin(&p, "evaluation", "examples", 2);
    dz_progress_add(2);
    dz_progress_end(&p);
    assert_int_equal(s.reports, 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(quiet_within_the_delay, setup),
        cmocka_unit_test_setup(first_and_final_reports, setup),
        cmocka_unit_test_setup(nested_operation_joins, setup),
        cmocka_unit_test_setup(silent_below_info_or_without_sink, setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
