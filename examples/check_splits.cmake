# cmake -DRUN="prog|args..." -DSAMPLES=<n> -P check_splits.cmake
#
# Runs a demo in parameter-server mode with dynamic splits (--splits; it
# must exit 0, which it does when its AUC is learned) and adds up the
# samples its workers report ("worker R: S steps, N samples"): they must
# come to SAMPLES, every train sample once.
string(REPLACE "|" ";" cmd "${RUN}")
execute_process(COMMAND ${cmd} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("${out}${err}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${cmd}: exit status ${rc}")
endif()
string(REGEX MATCHALL "worker [0-9]+: [0-9]+ steps, [0-9]+ samples" lines "${out}")
list(LENGTH lines workers)
set(total 0)
foreach(line ${lines})
  string(REGEX REPLACE ".* ([0-9]+) samples" "\\1" n "${line}")
  math(EXPR total "${total} + ${n}")
endforeach()
if(workers EQUAL 0 OR NOT total EQUAL SAMPLES)
  message(FATAL_ERROR "${workers} workers trained ${total} samples in all; expected ${SAMPLES}")
endif()
message("OK: ${workers} workers trained ${total} samples, every one once")
