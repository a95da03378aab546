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

#
# Without seconds (a helper's caller gave no TIMEOUT) the tests must get one
# later in the same directory (set_tests_properties): checked once the
# directory is configured, and a test still without one fails the
# configure, naming it (the test test_timeouts checks the whole tree too).
function(hb_test_timeout seconds)
  if(NOT seconds)
    # EVAL: a deferred call expands its arguments only when it runs.
    cmake_language(EVAL CODE "cmake_language(DEFER CALL _hb_require_timeout [[${ARGN}]])")
    return()
  endif()
  math(EXPR scaled "${seconds} * ${HB_TEST_TIMEOUT_SCALE}")
  set_tests_properties(${ARGN} PROPERTIES TIMEOUT ${scaled})
endfunction()

function(_hb_require_timeout)
  foreach(t ${ARGN})
    get_test_property(${t} TIMEOUT timeout)
    if(NOT timeout)
      message(FATAL_ERROR "hb: test ${t} has no TIMEOUT: give its helper "
                          "TIMEOUT s (see tests/CMakeLists.txt)")
    endif()
  endforeach()
endfunction()
