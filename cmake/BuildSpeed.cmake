# Build speed only (issue 29): nothing here changes what the code does, only how fast it builds.
#
# Measured on the 2-core CI machine (GCC 12): what pays is unity builds for targets of many
# files sharing heavy headers (each template of asio, CLI11 and nlohmann/json instantiated and
# compiled once per batch, not once per file) and test code compiled at -Og
# (tests/CMakeLists.txt); a precompiled asio for the library saved CPU but is off (below).
# The quick tier's build (scripts/test.sh quick, on a clean clone without ccache) went from 480
# to about 390 s of CPU by unity batches for the test programs (the integration and regression
# tests quick runs are one program each, tests/CMakeLists.txt) and one batch each for the CLI
# and the service; then from 377 to 360 s (measured on the same machine, 4 other builds on it)
# by the precompiled asio (now off), larger batches for the integration and service tests, and
# test programs that compile while the tool does (tests/CMakeLists.txt, dlock_runs_tool); then
# from 4:18 to 3:13 of wall time (fresh clone, no ccache, 2 cores) by its own preset without the
# service (CMakePresets.json, `quick`): dlock serve's unity batch alone was a 60 s job.
# What did not pay: test code at -O0 (async_test.cc: 13.9 s of CPU, 13.5 s at -Og, 17.7 s at
# -O1), -g0 instead of -g1 for test code (no measurable difference), precompiled gtest and asio
# for the test programs (per batch between 0.7 s saved and 1.1 s lost: a batch's time is code
# generation, and the header itself costs 6 s) and a faster linker (the 30 links of quick took
# 7 s of CPU together with GNU ld).
option(DLOCK_UNITY "Unity builds for this repository's multi-file targets (build speed only)"
       ${PROJECT_IS_TOP_LEVEL})

# ccache when it is installed (optional): a rebuild after switching
# branches or presets back and forth. A build without it is the same build.
if(PROJECT_IS_TOP_LEVEL AND NOT CMAKE_CXX_COMPILER_LAUNCHER)
  find_program(DLOCK_CCACHE ccache)
  if(DLOCK_CCACHE)
    # Without pch_defines,time_macros ccache does not cache a file compiled with a precompiled
    # header (DLOCK_PCH below; ccache's manual, "Precompiled headers"): it still hashes the
    # header. No file of ours uses __DATE__ or __TIME__.
    set(CMAKE_CXX_COMPILER_LAUNCHER env CCACHE_SLOPPINESS=pch_defines,time_macros
                                    "${DLOCK_CCACHE}")
  endif()
endif()

function(dlock_unity)
  if(DLOCK_UNITY)
    set_target_properties(${ARGN} PROPERTIES UNITY_BUILD ON)
  endif()
endfunction()

# A unity build of at most `size` files per batch: for the test programs, whose files are
# compiled at -Og with gtest's headers and templates in each (a batch of four parses and
# generates those once, not four times). Larger batches save more CPU but are longer single
# jobs: with 2 cores a long job that starts last leaves the other core idle at the end.
function(dlock_unity_batches target size)
  if(DLOCK_UNITY)
    set_target_properties(${target} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE ${size})
  endif()
endfunction()

# Precompiled headers: <asio.hpp> and <asio/ssl.hpp>, which src/net/connection.h brings into
# nearly every file of the library, parsed once instead of once per file. -ftime-report on the
# dev preset: parsing is up to half of a library file's time (api/client.cc: 4.6 s of CPU
# without, 3.0 s with the header). One header for all the layers, built by the first and reused
# by the others (REUSE_FROM; one per target, CMake's default, would parse asio once per target
# again). A reuser must be compiled with the donor's flags and definitions: CMake adds
# -Winvalid-pch, so under -Werror a mismatch fails the build instead of silently parsing the
# headers again (GCC refuses a header made with a macro the user lacks, or one asio tests that
# only the user defines, such as gRPC's NOMINMAX). Only external headers: a change to our own
# headers does not rebuild it. OFF in clang-tidy's configuration (scripts/test.sh): clang
# cannot read GCC's precompiled headers.
# OFF: with it, ASan reported alloc-dealloc-mismatch (aligned_alloc vs operator delete) in
# asio's recycling allocator across the library and the tests: asio/detail/config.hpp picks
# aligned_alloc only if a libstdc++ header (_GLIBCXX_HAVE_ALIGNED_ALLOC) came before it, which
# the precompiled header (asio first) and the tests' own files decide differently. A fix to
# try: <cstddef> before <asio.hpp> in HEADERS, checked by the ASan tier.
option(DLOCK_PCH "A precompiled asio for the library (build speed only)" OFF)

# dlock_precompile(<donor> HEADERS <header>... [REUSED_BY <target>...]): <donor> precompiles the
# headers, each target of REUSED_BY uses the donor's precompiled header.
function(dlock_precompile donor)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "" "HEADERS;REUSED_BY")
  if(NOT DLOCK_PCH)
    return()
  endif()
  target_precompile_headers(${donor} PRIVATE ${arg_HEADERS})
  foreach(target IN LISTS arg_REUSED_BY)
    if(TARGET ${target})
      target_precompile_headers(${target} REUSE_FROM ${donor})
    endif()
  endforeach()
endfunction()
