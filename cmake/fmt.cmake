# One fmt for the whole project: the fmt (12.1) that PyPI's torch wheel bundles in
# torch/include/fmt, header-only. libtorch's own headers include it, so a second fmt (Debian's
# libfmt-dev 9.1) would meet it in every translation unit that includes both. The headers are
# copied into the build tree so the torch-free build gets fmt without torch's include folder
# (its libraries must not see libtorch's headers). Targets link pipetrain_fmt, never fmt::fmt (Debian's).
set(PIPETRAIN_FMT_SOURCE "${PIPETRAIN_TORCH_PACKAGE_DIR}/include/fmt")
if(NOT EXISTS "${PIPETRAIN_FMT_SOURCE}/format.h")
  message(FATAL_ERROR "The torch package at ${PIPETRAIN_TORCH_PACKAGE_DIR} bundles no fmt")
endif()
set(PIPETRAIN_FMT_INCLUDE_DIR "${PROJECT_BINARY_DIR}/fmt-include")
file(COPY "${PIPETRAIN_FMT_SOURCE}" DESTINATION "${PIPETRAIN_FMT_INCLUDE_DIR}")
add_library(pipetrain_fmt INTERFACE)
target_include_directories(pipetrain_fmt BEFORE INTERFACE
  "$<BUILD_INTERFACE:${PIPETRAIN_FMT_INCLUDE_DIR}>"
  "$<INSTALL_INTERFACE:include/pipetrain/fmt-include>")
target_compile_definitions(pipetrain_fmt INTERFACE FMT_HEADER_ONLY)
