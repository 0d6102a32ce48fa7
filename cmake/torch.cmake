# libtorch from the torch wheel (CUDA 13.0 build): libtorch_cpu and libtorch_cuda are both
# linked, so every CUDA code path compiles and links here; nothing needs a GPU at run time.
# PIPETRAIN_TORCH_PACKAGE_DIR: the wheel's torch folder, found in the top CMakeLists.txt.
set(PIPETRAIN_TORCH_CMAKE_PREFIX "${PIPETRAIN_TORCH_PACKAGE_DIR}/share/cmake")
list(PREPEND CMAKE_PREFIX_PATH "${PIPETRAIN_TORCH_CMAKE_PREFIX}")
# Caffe2's CMake would otherwise ask the (absent) GPU which architecture to build for; its
# -gencode flags follow TORCH_CUDA_ARCH_LIST. Hopper (sm_90: H100/H200) is what the project's
# GPU machines have. (It warns that it ignores CMAKE_CUDA_ARCHITECTURES: harmless.)
if(NOT DEFINED ENV{TORCH_CUDA_ARCH_LIST})
  set(ENV{TORCH_CUDA_ARCH_LIST} "9.0")
endif()
find_package(Torch REQUIRED)
# The wheel ships c10d's headers but not gloo's: Debian's libgloo-dev supplies them (headers
# only; libtorch_cpu carries its own gloo, so Debian's libgloo is never linked).
add_library(pipetrain_c10d_gloo INTERFACE)
target_compile_definitions(pipetrain_c10d_gloo INTERFACE USE_C10D_GLOO)
message(STATUS "libtorch ${Torch_VERSION} from ${PIPETRAIN_TORCH_CMAKE_PREFIX}")
# Every pipetrain target and every program built on an installed pipetrain links libtorch
# through this one target (exported), so what libtorch needs at link time is said once.
# The wheel's libtorch.so and libtorch_cpu.so were linked with gcc-toolset 13's nonshared
# libstdc++ and export copies of std::filesystem (200+ symbols). Whichever library comes first
# in a program's DT_NEEDED list wins the symbol lookup, and libtorch's remove_all jumps to
# address 0 on a non-empty folder (its recursive_directory_iterator::__erase is an unresolved
# weak symbol): a segfault measured in the TorchScript tests and in the installed example's
# launcher. Naming libstdc++ first, before any object or library (link options come before
# them on the command line), puts the system's copy first in the search.
add_library(pipetrain_torch INTERFACE)
target_link_libraries(pipetrain_torch INTERFACE ${TORCH_LIBRARIES})
target_link_options(pipetrain_torch INTERFACE
                    "LINKER:--push-state,--no-as-needed" "-lstdc++" "LINKER:--pop-state")
