# Warnings apply to our own targets only (PRIVATE), never to consumers.
function(dlock_set_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor
                                           -Woverloaded-virtual -Wimplicit-fallthrough -Wformat=2)
  if(DLOCK_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()
