# cmake -DA="prog|args..." -DB="prog|args..." -DDIR_A=<out> -DDIR_B=<out>
#       -P compare_exports.cmake
#
# Runs both training commands (each must exit 0; each writes its serving
# export under <out>/export) and checks that every exported table file is
# byte-identical: the two runs trained the same bits.
foreach(which A B)
  file(REMOVE_RECURSE "${DIR_${which}}")
  string(REPLACE "|" ";" cmd "${${which}}")
  execute_process(COMMAND ${cmd} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  message("${out}${err}")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${cmd}: exit status ${rc}")
  endif()
endforeach()
file(GLOB tables RELATIVE "${DIR_A}/export" "${DIR_A}/export/*.hbe")
list(LENGTH tables n)
if(n EQUAL 0)
  message(FATAL_ERROR "no exported tables in ${DIR_A}/export")
endif()
foreach(t ${tables})
  execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files "${DIR_A}/export/${t}" "${DIR_B}/export/${t}"
                  RESULT_VARIABLE differ)
  if(differ)
    message(FATAL_ERROR "table ${t}: the exports differ")
  endif()
endforeach()
message("OK: ${n} tables bit-identical")
