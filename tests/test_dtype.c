/* bf16/f16 conversions against values computed by hand from the IEEE formats. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "distzo/dtype.h"

static void bf16_round_trip_and_rounding(void **state) {
    (void)state;
    assert_int_equal(dz_f32_to_bf16(1.0f), 0x3f80);
    assert_true(dz_bf16_to_f32(0x3f80) == 1.0f);
    /* 1 + 2^-8 is exactly halfway between bf16 1.0 and 1.0078125: ties to even -> 1.0 */
    assert_int_equal(dz_f32_to_bf16(1.00390625f), 0x3f80);
    /* 1 + 3*2^-8 is halfway between 1.0078125 (odd) and 1.015625 (even) -> up */
    assert_int_equal(dz_f32_to_bf16(1.01171875f), 0x3f82);
    assert_int_equal(dz_f32_to_bf16(-2.0f), 0xc000);
    assert_true(isnan(dz_bf16_to_f32(dz_f32_to_bf16(NAN))));
}

static void f16_known_values(void **state) {
    (void)state;
    assert_int_equal(dz_f32_to_f16(1.0f), 0x3c00);
    assert_int_equal(dz_f32_to_f16(-2.0f), 0xc000);
    assert_int_equal(dz_f32_to_f16(65504.0f), 0x7bff);
    assert_int_equal(dz_f32_to_f16(1e6f), 0x7c00);
    assert_int_equal(dz_f32_to_f16(5.9604645e-08f), 0x0001); /* smallest subnormal */
    assert_true(dz_f16_to_f32(0x0001) == 5.9604645e-08f);
    assert_true(dz_f16_to_f32(0x3555) == 0.333251953125f);
    for (uint32_t h = 0; h < 0x7c00; h++) /* every finite positive half round-trips */
        assert_int_equal(dz_f32_to_f16(dz_f16_to_f32((uint16_t)h)), h);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(bf16_round_trip_and_rounding),
        cmocka_unit_test(f16_known_values),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
