# cmake -DNP=n -DHBRUN=path -DDEMO=path -P run_cluster_demo.cmake
# Runs examples/cluster_demo as NP ranks through hbrun and checks both the
# exit status and that every rank reported and rank 0 printed the summary.
execute_process(COMMAND ${HBRUN} -n ${NP} --timeout 60 -- ${DEMO}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("${out}${err}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "hbrun -n ${NP} cluster_demo exited with ${rc}")
endif()
math(EXPR last "${NP} - 1")
foreach(r RANGE 0 ${last})
  if(NOT out MATCHES "\\[${r}\\] cluster_demo: rank ${r} of ${NP}, local ${r} of ${NP}, device cpu:0")
    message(FATAL_ERROR "rank ${r} did not report itself")
  endif()
endforeach()
if(NOT out MATCHES "\\[0\\] cluster_demo: ${NP} ranks passed [0-9]+ barriers")
  message(FATAL_ERROR "rank 0 printed no summary")
endif()
