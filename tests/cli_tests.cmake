# Command-line tests: bad input through the real binary.
add_test(NAME cli_bad_input
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli/bad_input.sh $<TARGET_FILE:distzo>
                 ${CMAKE_CURRENT_SOURCE_DIR}/data ${DZ_ASSETS})
set_tests_properties(cli_bad_input PROPERTIES LABELS "parser;cli" TIMEOUT 300
                     ENVIRONMENT "DISTZO_ASSETS=${DZ_ASSETS};OMP_NUM_THREADS=2;OMP_WAIT_POLICY=PASSIVE")

# Crash safety of train/export: SIGKILL at random moments, --resume must be bitwise the
# uninterrupted run (weights, metrics.jsonl, best/, seeds.log). Exit 77 = assets absent.
add_test(NAME cli_crash_resume
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli/crash_resume.sh $<TARGET_FILE:distzo> ${DZ_ASSETS})
set_tests_properties(cli_crash_resume PROPERTIES LABELS "zo;cli" TIMEOUT 1200 SKIP_RETURN_CODE 77
                     ENVIRONMENT "DISTZO_ASSETS=${DZ_ASSETS};OMP_NUM_THREADS=2;OMP_WAIT_POLICY=PASSIVE")

# The same kills with the masters in a disk store (resumed runs equal the run in memory).
add_test(NAME cli_crash_resume_disk
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli/crash_resume.sh $<TARGET_FILE:distzo> ${DZ_ASSETS} 4243 disk)
set_tests_properties(cli_crash_resume_disk PROPERTIES LABELS "zo;cli" TIMEOUT 1200 SKIP_RETURN_CODE 77
                     ENVIRONMENT "DISTZO_ASSETS=${DZ_ASSETS};OMP_NUM_THREADS=2;OMP_WAIT_POLICY=PASSIVE")

# --store disk: bitwise equal to ram, across SIGKILL + resume (skipped, exit 77, without assets).
add_test(NAME cli_store COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli/store.sh $<TARGET_FILE:distzo> ${DZ_ASSETS})
set_tests_properties(cli_store PROPERTIES LABELS "zo;cli" TIMEOUT 900 SKIP_RETURN_CODE 77
                     ENVIRONMENT "DISTZO_ASSETS=${DZ_ASSETS};OMP_NUM_THREADS=2;OMP_WAIT_POLICY=PASSIVE")

# The run folder is the user's: pruning only what the run wrote (--keep-checkpoints),
# readers (export, eval) changing nothing, the seed log's torn tail cut only by the writer.
add_test(NAME cli_run_folder COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli/run_folder.sh $<TARGET_FILE:distzo> ${DZ_ASSETS})
set_tests_properties(cli_run_folder PROPERTIES LABELS "run;cli" TIMEOUT 300 SKIP_RETURN_CODE 77
                     ENVIRONMENT "DISTZO_ASSETS=${DZ_ASSETS};OMP_NUM_THREADS=2;OMP_WAIT_POLICY=PASSIVE")

# Failing reads, writes, fsyncs and allocations (DISTZO_TEST_FAULT, src/core/io.h): a clear
# error, never a crash, and --resume then equals the uninterrupted run; in memory and with
# the masters in a disk store.
add_test(NAME cli_faults COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli/faults.sh $<TARGET_FILE:distzo> ${DZ_ASSETS} ram)
add_test(NAME cli_faults_disk COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli/faults.sh $<TARGET_FILE:distzo> ${DZ_ASSETS} disk)
set_tests_properties(cli_faults cli_faults_disk PROPERTIES LABELS "run;cli" TIMEOUT 600 SKIP_RETURN_CODE 77
                     ENVIRONMENT "DISTZO_ASSETS=${DZ_ASSETS};OMP_NUM_THREADS=2;OMP_WAIT_POLICY=PASSIVE")
