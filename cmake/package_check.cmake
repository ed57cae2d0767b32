# Read by cpack before it packages (CPACK_PROJECT_CONFIG_FILE): a .deb must
# depend on Debian packages only, and the CUDA backend's cuBLAS, cuDNN and
# NCCL come from /usr/local/cuda or pip's wheels, which dpkg-shlibdeps cannot
# name (it would leave them out of Depends without a word).
if(CPACK_POSEIDON_WITH_CUDA)
  message(FATAL_ERROR "This build has the CUDA backend, whose libraries no Debian package provides: "
                      "package a build configured with -DPOSEIDON_CUDA=OFF (tools/deb_check.sh makes one)")
endif()
