# What `cmake --install` puts under the prefix: the poseidon binary, the
# headers a layer is written against (include paths `core/...` kept), the
# static libraries, and the CMake package an outside project finds with
# find_package(Poseidon CONFIG REQUIRED) to build a plug-in (docs/EXTENDING.md).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)
set(POSEIDON_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/Poseidon)

# Plug-ins link nothing of Poseidon: their calls into the engine resolve at
# load time against the executable, which therefore carries every object of
# core (not only those it calls itself) and exports their symbols.
set_target_properties(poseidon PROPERTIES ENABLE_EXPORTS ON)
target_link_options(poseidon PRIVATE "LINKER:--whole-archive" "$<TARGET_FILE:poseidon_core>"
                    "LINKER:--no-whole-archive")

# Poseidon::sdk: the headers, the language level and the build's feature
# definitions a plug-in must share with the executable that loads it.
add_library(poseidon_sdk INTERFACE)
set_target_properties(poseidon_sdk PROPERTIES EXPORT_NAME sdk)
target_include_directories(poseidon_sdk INTERFACE $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}>
                           $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}/poseidon>)
target_compile_features(poseidon_sdk INTERFACE cxx_std_20)
target_link_libraries(poseidon_sdk INTERFACE yaml-cpp)
if(POSEIDON_WITH_CUDA)
  target_compile_definitions(poseidon_sdk INTERFACE POSEIDON_HAVE_CUDA)
  target_link_libraries(poseidon_sdk INTERFACE CUDA::cudart)
endif()

install(TARGETS poseidon poseidon_sdk EXPORT PoseidonTargets)
install(TARGETS poseidon_core poseidon_layers poseidon_data poseidon_dist_plan poseidon_dist_sim
        poseidon_dist_gpu poseidon_dist_runtime poseidon_dist_schemes poseidon_dist_session ARCHIVE)
install(DIRECTORY core/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/poseidon/core FILES_MATCHING PATTERN "*.h")
install(EXPORT PoseidonTargets NAMESPACE Poseidon:: DESTINATION ${POSEIDON_CMAKE_DIR})
configure_package_config_file(cmake/PoseidonConfig.cmake.in ${CMAKE_CURRENT_BINARY_DIR}/PoseidonConfig.cmake
                              INSTALL_DESTINATION ${POSEIDON_CMAKE_DIR})
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/PoseidonConfigVersion.cmake
                                 COMPATIBILITY ExactVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/PoseidonConfig.cmake ${CMAKE_CURRENT_BINARY_DIR}/PoseidonConfigVersion.cmake
        DESTINATION ${POSEIDON_CMAKE_DIR})
