# Command-line tests: bad input through the real binary.
add_test(NAME cli_bad_input
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli/bad_input.sh $<TARGET_FILE:distzo>
                 ${CMAKE_CURRENT_SOURCE_DIR}/data ${DZ_ASSETS})
set_tests_properties(cli_bad_input PROPERTIES LABELS "parser;cli" TIMEOUT 300
                     ENVIRONMENT "DISTZO_ASSETS=${DZ_ASSETS};OMP_NUM_THREADS=2")
