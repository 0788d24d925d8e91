# Read by llama.cpp's CMake as the last step of project(llama_cpp) (CMAKE_PROJECT_<name>_INCLUDE):
# llama-cpp-python forces its cache option LLAMA_BUILD_COMMON ON, but the bindings load only
# libllama and the ggml libraries. A normal variable of the same name wins over the cache entry
# (policy CMP0126, required by its cmake_minimum_required 3.21), so llama.cpp's common library,
# cpp-httplib and their install rules are left out: the build takes under 2 minutes on 2 cores
# instead of about 9.
set(LLAMA_BUILD_COMMON OFF)
