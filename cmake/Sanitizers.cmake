# DLOCK_SANITIZE=address,undefined or thread instruments every target of the build.
if(DLOCK_SANITIZE)
  add_compile_options(-fsanitize=${DLOCK_SANITIZE} -fno-omit-frame-pointer -fno-sanitize-recover=all)
  add_link_options(-fsanitize=${DLOCK_SANITIZE})
endif()
