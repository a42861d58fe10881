# Embeds every src/scripts/*.lua file into a generated C++ source as a raw string, so the Lua
# lives in .lua files (readable, one place) and the library carries no runtime file lookups.
function(dlock_embed_scripts out_cc)
  set(script_dir "${PROJECT_SOURCE_DIR}/src/scripts")
  file(GLOB lua_files CONFIGURE_DEPENDS "${script_dir}/*.lua")
  list(SORT lua_files)
  add_custom_command(
    OUTPUT "${out_cc}"
    COMMAND ${CMAKE_COMMAND} -DOUT=${out_cc} -DDIR=${script_dir} -P
            "${PROJECT_SOURCE_DIR}/cmake/GenerateScripts.cmake"
    DEPENDS ${lua_files} "${PROJECT_SOURCE_DIR}/cmake/GenerateScripts.cmake"
    COMMENT "Embedding Lua scripts")
endfunction()
