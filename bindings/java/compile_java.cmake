# cmake -DJAVAC=... -DCLASSES=... -DGEN_DIR=... -DSOURCES="a;b" -P compile_java.cmake
# Compiles every class SWIG generated (UseSWIG does not list them all) plus
# the hand-written sources; warnings are errors.
file(GLOB generated ${GEN_DIR}/*.java)
file(REMOVE_RECURSE ${CLASSES})
file(MAKE_DIRECTORY ${CLASSES})
execute_process(COMMAND ${JAVAC} -Xlint:all -Werror -d ${CLASSES} ${generated} ${SOURCES}
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "javac failed (${rc})")
endif()
