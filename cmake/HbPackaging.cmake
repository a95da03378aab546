# Docs in the install, and a Debian package of the whole install:
#   cmake --build _build && (cd _build && cpack -G DEB)
# gives hb_<version>_<arch>.deb with prefix /usr: the C library, header,
# hbrun, pkg-config and CMake files, the Python package in
# /usr/lib/python3/dist-packages, hb.jar and libhb_jni.so, the Go module
# in /usr/share/hb/go and these docs.
install(FILES README.md DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT doc)
install(FILES bindings/README.md DESTINATION ${CMAKE_INSTALL_DOCDIR} RENAME bindings.md
        COMPONENT doc)
install(DIRECTORY docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT doc
        FILES_MATCHING PATTERN "*.md")

set(CPACK_PACKAGE_NAME hb)
set(CPACK_PACKAGE_VENDOR "hb")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "Hybrid data-parallel and embedding-sharded training, as a C library")
set(CPACK_PACKAGE_CONTACT "hb maintainers <hb@localhost>")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION libdevel)
# Run-time libraries from dpkg-shlibdeps (libuv1, libcjson1, libgloo0, ...)
# when it is installed (dpkg-dev); the rest is what the files need to be used:
# hb.pc's Requires.private, the Python package's numpy.
find_program(HB_DPKG_SHLIBDEPS dpkg-shlibdeps)
if(HB_DPKG_SHLIBDEPS)
  set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
else()
  set(CPACK_DEBIAN_PACKAGE_DEPENDS "libuv1, libcjson1, libgloo0, libstdc++6, libc6, ")
endif()
string(APPEND CPACK_DEBIAN_PACKAGE_DEPENDS "libuv1-dev, libcjson-dev, python3-numpy")
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "pkgconf | pkg-config, python3")
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "default-jre-headless, golang-go")
# A shlibs file and ldconfig triggers for libhb.so.0.
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
include(CPack)
