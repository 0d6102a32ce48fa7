# libtorch from the torch wheel (CUDA 13.0 build): libtorch_cpu and libtorch_cuda are both
# linked, so every CUDA code path compiles and links here; nothing needs a GPU at run time.
execute_process(
  COMMAND "${PIPETRAIN_PYTHON}" -c
          "import importlib.util as u; print(u.find_spec('torch').submodule_search_locations[0] + '/share/cmake')"
  OUTPUT_VARIABLE PIPETRAIN_TORCH_CMAKE_PREFIX OUTPUT_STRIP_TRAILING_WHITESPACE)
list(PREPEND CMAKE_PREFIX_PATH "${PIPETRAIN_TORCH_CMAKE_PREFIX}")
# Caffe2's CMake would otherwise ask the (absent) GPU which architecture to build for. Hopper
# (sm_90: H100/H200) is what the project's GPU machines have.
# Its -gencode flags follow TORCH_CUDA_ARCH_LIST (it warns that it ignores
# CMAKE_CUDA_ARCHITECTURES, which enabling CUDA defines: harmless).
if(NOT DEFINED ENV{TORCH_CUDA_ARCH_LIST})
  set(ENV{TORCH_CUDA_ARCH_LIST} "9.0")
endif()
find_package(Torch REQUIRED)
# The wheel ships c10d's headers but not gloo's: Debian's libgloo-dev supplies them (headers
# only; libtorch_cpu carries its own gloo, so Debian's libgloo is never linked).
add_library(pipetrain_c10d_gloo INTERFACE)
target_compile_definitions(pipetrain_c10d_gloo INTERFACE USE_C10D_GLOO)
message(STATUS "libtorch ${Torch_VERSION} from ${PIPETRAIN_TORCH_CMAKE_PREFIX}")
# The wheel's libtorch.so and libtorch_cpu.so were linked with gcc-toolset 13's nonshared
# libstdc++ and export copies of std::filesystem (200+ symbols). Whichever library comes first
# in a program's DT_NEEDED list wins the symbol lookup, and libtorch's remove_all jumps to
# address 0 when our code calls it (a segfault measured in the TorchScript tests). Naming
# libstdc++ first, before any object or library, puts the system's copy first in the search.
add_link_options("LINKER:--push-state,--no-as-needed" "-lstdc++" "LINKER:--pop-state")
