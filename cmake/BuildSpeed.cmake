# Build speed only (issue 29): nothing here changes what the code does, only how fast it builds.
#
# Measured on the 2-core CI machine (GCC 12): code generation, not parsing, is most of a
# file's time (lock_test.cc: 1.6 s of 5 s parses, the rest is -O2 code), so precompiled
# headers did not pay (the header's 16 s cost more than the 0.2-0.8 s it saved per test file)
# and are not used. What pays: unity builds for targets of many files sharing heavy headers
# (each template of asio, CLI11 and nlohmann/json instantiated and compiled once per batch,
# not once per file), and test code compiled at -Og (tests/CMakeLists.txt).
# The quick tier's build (scripts/test.sh quick, on a clean clone without ccache) went from 480
# to about 390 s of CPU by unity batches for the test programs (the integration and regression
# tests quick runs are one program each, tests/CMakeLists.txt) and one batch each for the CLI
# and the service.
# What did not pay: test code at -O0 (async_test.cc: 13.9 s of CPU, 13.5 s at -Og, 17.7 s at
# -O1) and a faster linker (the 30 links of quick took 7 s of CPU together with GNU ld).
option(DLOCK_UNITY "Unity builds for this repository's multi-file targets (build speed only)"
       ${PROJECT_IS_TOP_LEVEL})

# ccache when it is installed (optional): a rebuild after switching
# branches or presets back and forth. A build without it is the same build.
if(PROJECT_IS_TOP_LEVEL AND NOT CMAKE_CXX_COMPILER_LAUNCHER)
  find_program(DLOCK_CCACHE ccache)
  if(DLOCK_CCACHE)
    set(CMAKE_CXX_COMPILER_LAUNCHER "${DLOCK_CCACHE}")
  endif()
endif()

function(dlock_unity)
  if(DLOCK_UNITY)
    set_target_properties(${ARGN} PROPERTIES UNITY_BUILD ON)
  endif()
endfunction()

# A unity build of at most `size` files per batch: for the test programs, whose files are
# compiled at -Og with gtest's headers and templates in each (a batch of four parses and
# generates those once, not four times; four keeps enough batches for both cores).
function(dlock_unity_batches target size)
  if(DLOCK_UNITY)
    set_target_properties(${target} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE ${size})
  endif()
endfunction()
