# What `cpack` makes of `cmake --install` (cmake/install.cmake): one Debian
# package, `poseidon`, with the CLI, the static libraries, the SDK's headers
# and its CMake package under /usr, so that a plug-in is built against it
# with no source tree (docs/INSTALL.md, tools/deb_check.sh).
# The package depends only on Debian packages: dpkg-shlibdeps (dpkg-dev)
# computes the libraries' packages from the executable, and the SDK adds the
# headers its CMake package finds (yaml-cpp's, through find_dependency). A
# build with the CUDA backend links libraries of /usr/local/cuda that no
# Debian package provides: cpack refuses it (cmake/package_check.cmake).
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME poseidon)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "deep-learning framework with distributed training (CLI, libraries, plug-in SDK)")
set(CPACK_PACKAGE_CONTACT "Poseidon maintainers <poseidon@localhost>")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# OpenBLAS built on OpenMP, as the build chose it (tools/packages.txt); the
# libraries alone would let apt pick its pthread build.
set(CPACK_DEBIAN_PACKAGE_DEPENDS "libyaml-cpp-dev, libopenblas0-openmp")
# A plug-in is configured with CMake and compiled as C++20 (g++ 12).
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "cmake, g++, make")
set(CPACK_POSEIDON_WITH_CUDA ${POSEIDON_WITH_CUDA})
set(CPACK_PROJECT_CONFIG_FILE ${CMAKE_CURRENT_LIST_DIR}/package_check.cmake)
include(CPack)
