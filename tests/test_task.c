/* Task pieces that need no model: the prediction rule of classification (a non-finite
 * score is never a prediction, so NaN cannot pass for label 0) and the per-example
 * cross-entropy against a direct computation. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "distzo/task.h"

static void predict_is_argmax_ties_low(void **state) {
    (void)state;
    const float a[3] = {-2.0f, -1.0f, -3.0f}, tie[3] = {-1.0f, -1.0f, -4.0f};
    assert_int_equal(dz_class_predict(a, 3), 1);
    assert_int_equal(dz_class_predict(tie, 3), 0);
}

static void predict_refuses_non_finite(void **state) {
    (void)state;
    const float all_nan[2] = {NAN, NAN}, one_nan[3] = {-1.0f, NAN, -2.0f}, inf[2] = {-1.0f, INFINITY},
                minus_inf[2] = {-INFINITY, -1.0f};
    assert_int_equal(dz_class_predict(all_nan, 2), -1);
    assert_int_equal(dz_class_predict(one_nan, 3), -1);
    assert_int_equal(dz_class_predict(inf, 2), -1);
    assert_int_equal(dz_class_predict(minus_inf, 2), -1);
}

static void example_losses_are_cross_entropy(void **state) {
    (void)state;
    const float s[4] = {-1.0f, -2.0f, -0.5f, -0.25f};
    const int labels[2] = {0, 1};
    double out[2];
    dz_class_example_losses(s, labels, 2, 2, out);
    const double want0 = log(exp(-1.0) + exp(-2.0)) + 1.0, want1 = log(exp(-0.5) + exp(-0.25)) + 0.25;
    assert_true(fabs(out[0] - want0) < 1e-12);
    assert_true(fabs(out[1] - want1) < 1e-12);
    assert_true(fabs(dz_class_loss(s, labels, 2, 2) - (want0 + want1) / 2) < 1e-12);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(predict_is_argmax_ties_low),
        cmocka_unit_test(predict_refuses_non_finite),
        cmocka_unit_test(example_losses_are_cross_entropy),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
