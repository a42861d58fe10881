# DLOCK_SANITIZE=address,undefined or thread instruments every target of the build.
if(DLOCK_SANITIZE)
  add_compile_options(-fsanitize=${DLOCK_SANITIZE} -fno-omit-frame-pointer -fno-sanitize-recover=all)
  add_link_options(-fsanitize=${DLOCK_SANITIZE})
  if(DLOCK_SANITIZE MATCHES "thread")
    # TSan cannot model standalone fences. asio brackets handler calls with them; our io
    # thread hands work over through mutexes, which TSan does see, so the fences go.
    add_compile_definitions(ASIO_DISABLE_FENCED_BLOCK)
    add_compile_options(-Wno-tsan)
  endif()
  if(DLOCK_SANITIZE MATCHES "address")
    # Programs not position independent (build and test speed only): a PIE test program under
    # ASan applies some 540,000 relocations at every start, which write to as many data pages;
    # the tests start some 1,400 such processes (one per test, and the tool they run). Measured
    # on this project's 2-core machine: 152 -> 122 ms of CPU to start and leave integration_tests, 181
    # -> 131 ms for `dlock --version`. TSan gains nothing from it (88 ms either way).
    add_link_options("$<$<STREQUAL:$<TARGET_PROPERTY:TYPE>,EXECUTABLE>:-no-pie>")
  endif()
endif()
