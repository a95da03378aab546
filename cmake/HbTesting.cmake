# Test timeouts (the test budget: tests/CMakeLists.txt, docs/testing.md).
#
# hb_test_timeout(seconds test...): TIMEOUT of the tests, given for the
# plain build (at least 6x the test's runtime there) and multiplied by
# HB_TEST_TIMEOUT_SCALE, which defaults to how much slower the sanitizer
# builds run hb's tests: comm_test, the longest, ran 5x slower under TSan
# than plain on the same machine; ASan+UBSan is taken as 3x (typically 2x).
# A test much slower than that under a sanitizer gets a larger TIMEOUT of
# its own (reader_test: 140x under TSan, for its thread hand-offs).
if(NOT DEFINED HB_TEST_TIMEOUT_SCALE)
  if(HB_SANITIZE MATCHES "thread")
    set(HB_TEST_TIMEOUT_SCALE 6)
  elseif(HB_SANITIZE)
    set(HB_TEST_TIMEOUT_SCALE 3)
  else()
    set(HB_TEST_TIMEOUT_SCALE 1)
  endif()
endif()

function(hb_test_timeout seconds)
  if(NOT seconds)
    # Not fatal (a merge must still build); the test test_timeouts fails.
    message(WARNING "hb: no TIMEOUT for test(s) ${ARGN}: see tests/CMakeLists.txt")
    return()
  endif()
  math(EXPR scaled "${seconds} * ${HB_TEST_TIMEOUT_SCALE}")
  set_tests_properties(${ARGN} PROPERTIES TIMEOUT ${scaled})
endfunction()
