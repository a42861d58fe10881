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
endif()
