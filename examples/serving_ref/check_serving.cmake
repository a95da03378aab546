# cmake -DREF="serving_ref|args..." -DPROG="program|args..." -P check_serving.cmake
# Runs both; passes when the program's "AUC <x> misses <n>" line matches
# the reference's (AUC within 1e-6: float rounding may differ across
# languages in the last place; misses exactly).
foreach(which REF PROG)
  string(REPLACE "|" ";" cmd "${${which}}")
  execute_process(COMMAND ${cmd} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  message("${out}${err}")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${cmd}: exit status ${rc}")
  endif()
  if(NOT out MATCHES "AUC ([0-9.]+) misses ([0-9]+)")
    message(FATAL_ERROR "${cmd}: no 'AUC <x> misses <n>' line")
  endif()
  set(${which}_auc ${CMAKE_MATCH_1})
  set(${which}_misses ${CMAKE_MATCH_2})
endforeach()
# CMake has no floating point: compare in micro-units of AUC.
foreach(which REF PROG)
  string(REGEX REPLACE "^0\\.([0-9][0-9][0-9][0-9][0-9][0-9]).*" "\\1" micro "${${which}_auc}")
  math(EXPR ${which}_micro "1${micro} - 1000000")
endforeach()
math(EXPR diff "${PROG_micro} - ${REF_micro}")
if(diff GREATER 1 OR diff LESS -1 OR NOT PROG_misses EQUAL REF_misses)
  message(FATAL_ERROR "got AUC ${PROG_auc} misses ${PROG_misses}, "
                      "serving_ref says AUC ${REF_auc} misses ${REF_misses}")
endif()
message("OK: AUC ${PROG_auc} misses ${PROG_misses} (serving_ref: AUC ${REF_auc} misses ${REF_misses})")
