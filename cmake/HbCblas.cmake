# hb_ctr_find_cblas: the BLAS of the CTR demo's MLP (examples/ctr_train,
# dense_math.h) and of its speed-of-light bench (bench/limit): CBLAS when a
# BLAS with cblas_sgemm and cblas.h are found, else plain loops. The Debian
# way: link the generic libblas.so (libblas-dev), so at run time the
# libblas.so.3 alternative (OpenBLAS when libopenblas0-serial is installed)
# does the work.
# -DHB_CTR_BLAS=OFF builds the loops.
include_guard(GLOBAL)
option(HB_CTR_BLAS "ctr_train: use CBLAS for the MLP when found" ON)
function(hb_ctr_find_cblas out_libs)
  set(${out_libs} "" PARENT_SCOPE)
  if(NOT HB_CTR_BLAS)
    message(STATUS "hb: ctr_train MLP on loops (HB_CTR_BLAS=OFF)")
    return()
  endif()
  if(NOT DEFINED BLA_VENDOR)
    set(BLA_VENDOR Generic)  # libblas.so: whichever BLAS the system selects
  endif()
  find_package(BLAS QUIET)
  find_path(HB_CTR_CBLAS_INCLUDE_DIR cblas.h)
  if(BLAS_FOUND AND HB_CTR_CBLAS_INCLUDE_DIR)
    include(CheckSymbolExists)
    set(CMAKE_REQUIRED_LIBRARIES ${BLAS_LIBRARIES})
    set(CMAKE_REQUIRED_INCLUDES ${HB_CTR_CBLAS_INCLUDE_DIR})
    set(CMAKE_REQUIRED_QUIET ON)
    check_symbol_exists(cblas_sgemm cblas.h HB_CTR_HAVE_CBLAS_SGEMM)
  endif()
  if(HB_CTR_HAVE_CBLAS_SGEMM)
    message(STATUS "hb: ctr_train MLP on cblas_sgemm (${BLAS_LIBRARIES})")
    set(${out_libs} ${BLAS_LIBRARIES} PARENT_SCOPE)
  else()
    message(STATUS "hb: ctr_train MLP on loops: no BLAS with cblas.h and "
                   "cblas_sgemm (Debian: libblas-dev)")
  endif()
endfunction()
