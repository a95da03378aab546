# cmake -DREF="prog|args..." -DRUN="prog|args..." -DPATTERN=<regex>
#       [-DTOLERANCE=<micro-units>] -P compare_runs.cmake
# cmake -DREF=... -DRUN=... -DEXPORTS="<ref out>|<run out>" -P compare_runs.cmake
#
# Runs both commands (each must exit 0) and finds PATTERN in each output:
# group 1, a number in [0, 10), must agree within TOLERANCE millionths
# (default 1: float rounding may differ in the last place across
# languages); group 2, when the pattern has one, must be equal.
# With EXPORTS instead: the two runs' --out directories (emptied first);
# every table file under <out>/export must be byte-identical (the two runs
# trained the same bits).
if(NOT DEFINED TOLERANCE)
  set(TOLERANCE 1)
endif()
if(DEFINED EXPORTS)
  string(REPLACE "|" ";" EXPORTS "${EXPORTS}")
  list(GET EXPORTS 0 REF_out)
  list(GET EXPORTS 1 RUN_out)
endif()
foreach(which REF RUN)
  string(REPLACE "|" ";" cmd "${${which}}")
  if(DEFINED EXPORTS)
    # Empty, and with its parents (the demos make only the last level).
    file(REMOVE_RECURSE "${${which}_out}")
    file(MAKE_DIRECTORY "${${which}_out}")
  endif()
  execute_process(COMMAND ${cmd} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  message("${out}${err}")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${cmd}: exit status ${rc}")
  endif()
  if(DEFINED EXPORTS)
    continue()
  endif()
  if(NOT out MATCHES "${PATTERN}")
    message(FATAL_ERROR "${cmd}: no line matches '${PATTERN}'")
  endif()
  set(${which}_value ${CMAKE_MATCH_1})
  set(${which}_exact "${CMAKE_MATCH_2}")
  # CMake has no floating point: compare in millionths.
  if(NOT ${which}_value MATCHES "^([0-9])\\.?([0-9]*)$")
    message(FATAL_ERROR "${cmd}: '${${which}_value}' is not a number in [0, 10)")
  endif()
  string(SUBSTRING "${CMAKE_MATCH_2}000000" 0 6 micro)
  math(EXPR ${which}_micro "${CMAKE_MATCH_1} * 1000000 + 1${micro} - 1000000")
endforeach()
if(DEFINED EXPORTS)
  file(GLOB tables RELATIVE "${REF_out}/export" "${REF_out}/export/*.hbe")
  list(LENGTH tables n)
  if(n EQUAL 0)
    message(FATAL_ERROR "no exported tables in ${REF_out}/export")
  endif()
  foreach(t ${tables})
    execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files "${REF_out}/export/${t}"
                            "${RUN_out}/export/${t}" RESULT_VARIABLE differ)
    if(differ)
      message(FATAL_ERROR "table ${t}: the exports differ")
    endif()
  endforeach()
  message("OK: ${n} tables bit-identical")
  return()
endif()
math(EXPR diff "${RUN_micro} - ${REF_micro}")
if(diff GREATER TOLERANCE OR diff LESS -${TOLERANCE} OR NOT "${RUN_exact}" STREQUAL "${REF_exact}")
  message(FATAL_ERROR "got ${RUN_value} ${RUN_exact}, the reference says ${REF_value} ${REF_exact} "
                      "(tolerance ${TOLERANCE} millionths)")
endif()
message("OK: ${RUN_value} ${RUN_exact} (reference: ${REF_value} ${REF_exact})")
