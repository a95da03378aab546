# Install rules of the Python package `hb` (component python), included by
# CMakeLists.txt once the targets exist: every *.py of hb/ (new modules
# install without an edit here), the SWIG module (capi.py, _capi.so) and an
# _config.py that finds hbrun relative to the package.
#
# HB_PYTHON_INSTALL_DIR: site directory under the prefix. Default: Debian's
#   lib/python3/dist-packages with Debian's interpreter (/usr/bin/python3:
#   what the .deb needs), else the interpreter's posix_prefix platlib
#   (lib/python3.X/site-packages). Relative keeps the install relocatable.
# HB_PYTHON_BUNDLE_LIB: a self-contained package, as `pip install .` builds
#   it: libhb.so.0 (and libhb_cuda.so) and hbrun go into the package folder.
execute_process(COMMAND ${Python3_EXECUTABLE} -c [=[
import sysconfig
if "deb_system" in sysconfig.get_scheme_names():
    print("lib/python3/dist-packages")
else:
    print(sysconfig.get_path("platlib", "posix_prefix", vars={"base": "", "platbase": ""}).lstrip("/"))
]=] OUTPUT_VARIABLE py_site_default OUTPUT_STRIP_TRAILING_WHITESPACE)
set(HB_PYTHON_INSTALL_DIR "${py_site_default}" CACHE STRING
    "Python site directory for `cmake --install` (relative to the prefix, or absolute)")
option(HB_PYTHON_BUNDLE_LIB "Install libhb and hbrun inside the Python package (pip install .)" OFF)

set(py_dest ${HB_PYTHON_INSTALL_DIR}/hb)
# Paths from the installed package folder to libdir and to hbrun.
if(HB_PYTHON_BUNDLE_LIB)
  set(py_to_lib "")
  set(py_to_hbrun hbrun)
else()
  if(IS_ABSOLUTE ${HB_PYTHON_INSTALL_DIR})
    set(root "")
    set(libdir ${CMAKE_INSTALL_FULL_LIBDIR})
    set(bindir ${CMAKE_INSTALL_FULL_BINDIR})
  else()
    set(root /prefix)
    set(libdir ${root}/${CMAKE_INSTALL_LIBDIR})
    set(bindir ${root}/${CMAKE_INSTALL_BINDIR})
  endif()
  file(RELATIVE_PATH py_to_lib ${root}/${py_dest} ${libdir})
  file(RELATIVE_PATH py_to_hbrun ${root}/${py_dest} ${bindir}/hbrun)
endif()

# An ABI-tagged name (_capi.cpython-311-x86_64-linux-gnu.so): another Python
# version sharing lib/python3/dist-packages does not load it.
if(Python3_SOABI)
  set_target_properties(hb_python PROPERTIES SUFFIX ".${Python3_SOABI}${CMAKE_SHARED_MODULE_SUFFIX}")
endif()
# Build tree: RUNPATH to the build's libhb; installed: relative to itself.
set_target_properties(hb_python PROPERTIES INSTALL_RPATH "$ORIGIN/${py_to_lib}"
  # For tests/install.
  HB_PYTHON ${Python3_EXECUTABLE} HB_PYTHON_SITE ${HB_PYTHON_INSTALL_DIR})
install(TARGETS hb_python LIBRARY DESTINATION ${py_dest} COMPONENT python)
get_property(swig_py TARGET hb_python PROPERTY SWIG_SUPPORT_FILES)
install(FILES ${swig_py} DESTINATION ${py_dest} COMPONENT python)
install(DIRECTORY hb/ DESTINATION ${py_dest} COMPONENT python
        FILES_MATCHING PATTERN "*.py" PATTERN "__pycache__" EXCLUDE)
file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/install/_config.py
"import os

# hbrun of this install, relative to the package (written by CMake).
HBRUN = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                      \"${py_to_hbrun}\"))
")
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/install/_config.py DESTINATION ${py_dest}
        COMPONENT python)

if(HB_PYTHON_BUNDLE_LIB)
  install(FILES $<TARGET_FILE:hb> DESTINATION ${py_dest}
          RENAME libhb.so.${PROJECT_VERSION_MAJOR} COMPONENT python)
  install(PROGRAMS $<TARGET_FILE:hbrun> DESTINATION ${py_dest} COMPONENT python)
  if(TARGET hb_cuda)
    install(FILES $<TARGET_FILE:hb_cuda> DESTINATION ${py_dest} COMPONENT python)
  endif()
endif()
