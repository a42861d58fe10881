# Install rules and the Debian package (top-level builds only, DLOCK_INSTALL):
#   include/dlock/*.h and the generated version.h    headers
#   include/dlock/v1/lock.proto                      the lock service's gRPC API
#   libdlock.a, or libdlock.so.X.Y with its links   the library (BUILD_SHARED_LIBS)
#   lib/cmake/dlock/                                 find_package(dlock CONFIG) -> dlock::dlock
#   lib/pkgconfig/dlock.pc                           pkg-config --cflags --libs dlock
#   bin/dlock, its man page, its bash completion     with DLOCK_BUILD_TOOLS
#   lib/systemd/system/dlock.service                 with DLOCK_BUILD_SERVICE too
include(CMakePackageConfigHelpers)

set(DLOCK_CMAKE_DIR "${CMAKE_INSTALL_LIBDIR}/cmake/dlock")

install(DIRECTORY "${PROJECT_SOURCE_DIR}/include/dlock" "${PROJECT_BINARY_DIR}/include/dlock"
        DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}" COMPONENT dlock_dev
        FILES_MATCHING PATTERN "*.h")
# The lock service's API, beside the headers, for other projects to generate clients from
# (protoc -I /usr/include dlock/v1/lock.proto); installed whether or not this build serves it.
install(FILES "${PROJECT_SOURCE_DIR}/proto/dlock/v1/lock.proto"
        DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}/dlock/v1" COMPONENT dlock_dev)
install(TARGETS dlock EXPORT dlockTargets
        ARCHIVE DESTINATION "${CMAKE_INSTALL_LIBDIR}" COMPONENT dlock_dev
        LIBRARY DESTINATION "${CMAKE_INSTALL_LIBDIR}" COMPONENT dlock_lib NAMELINK_COMPONENT dlock_dev)
install(EXPORT dlockTargets NAMESPACE dlock:: DESTINATION "${DLOCK_CMAKE_DIR}" COMPONENT dlock_dev)

# The static library's users link what it links; dlockConfig.cmake finds those first.
get_target_property(dlock_type dlock TYPE)
if(dlock_type STREQUAL "STATIC_LIBRARY")
  set(DLOCK_STATIC ON)
  # As -l flags, not Requires.private: `pkg-config --static` would then ask for the static
  # archives of everything OpenSSL links, which Debian's -dev packages do not all pull in.
  # Linking libdlock.a needs these libraries, shared or static.
  set(DLOCK_PC_REQUIRES_PRIVATE "")
  set(DLOCK_PC_LIBS_PRIVATE "-lhiredis -lssl -lcrypto -luriparser -pthread")
else()
  set(DLOCK_STATIC OFF)
  set(DLOCK_PC_REQUIRES_PRIVATE "")
  set(DLOCK_PC_LIBS_PRIVATE "")
endif()
configure_package_config_file("${PROJECT_SOURCE_DIR}/cmake/dlockConfig.cmake.in"
                              "${PROJECT_BINARY_DIR}/dlockConfig.cmake"
                              INSTALL_DESTINATION "${DLOCK_CMAKE_DIR}")
# 0.x: a new minor version may break the API, so only the same minor version is compatible.
write_basic_package_version_file("${PROJECT_BINARY_DIR}/dlockConfigVersion.cmake"
                                 COMPATIBILITY SameMinorVersion)
install(FILES "${PROJECT_BINARY_DIR}/dlockConfig.cmake"
              "${PROJECT_BINARY_DIR}/dlockConfigVersion.cmake"
        DESTINATION "${DLOCK_CMAKE_DIR}" COMPONENT dlock_dev)

# dlock.pc names the prefix it is installed into (`cmake --install --prefix`, or /usr in the
# Debian package), which is known only at install time: configured now but for the prefix,
# then written by the install step itself into DESTDIR + prefix (nothing written into the
# build tree at install time, so an install as root leaves it as it was).
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}" OR IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
  message(FATAL_ERROR "dlock.pc needs a relative CMAKE_INSTALL_LIBDIR and CMAKE_INSTALL_INCLUDEDIR")
endif()
set(DLOCK_PC_PREFIX "@DLOCK_PC_PREFIX@")
configure_file("${PROJECT_SOURCE_DIR}/cmake/dlock.pc.in" "${PROJECT_BINARY_DIR}/dlock.pc.in" @ONLY)
install(CODE "
  set(DLOCK_PC_PREFIX \"\${CMAKE_INSTALL_PREFIX}\")
  set(dlock_pc \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR}/pkgconfig/dlock.pc\")
  message(STATUS \"Installing: \${dlock_pc}\")
  configure_file([[${PROJECT_BINARY_DIR}/dlock.pc.in]] \"\${dlock_pc}\" @ONLY)
  list(APPEND CMAKE_INSTALL_MANIFEST_FILES \"\${dlock_pc}\")
  " COMPONENT dlock_dev)

install(FILES "${PROJECT_SOURCE_DIR}/LICENSE" DESTINATION "${CMAKE_INSTALL_DOCDIR}"
        COMPONENT dlock_lib)

if(NOT PROJECT_IS_TOP_LEVEL)
  return()  # a parent project's CPack configuration is its own
endif()
# One Debian package with everything (cpack -G DEB in the build directory). With a shared
# library the package needs only what dpkg-shlibdeps finds; the static library's users need
# the -dev packages of what it links. <dlock/async.h> needs asio's headers.
set(CPACK_PACKAGE_NAME dlock)
set(CPACK_PACKAGE_VENDOR "dlock")
set(CPACK_PACKAGE_CONTACT "dlock maintainers <dlock@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "${PROJECT_DESCRIPTION}")
set(CPACK_RESOURCE_FILE_LICENSE "${PROJECT_SOURCE_DIR}/LICENSE")
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS "${PROJECT_BINARY_DIR}/src")
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "libasio-dev, redis-server")
if(DLOCK_STATIC)
  set(CPACK_DEBIAN_PACKAGE_DEPENDS "libhiredis-dev, libssl-dev, liburiparser-dev")
endif()
include(CPack)
