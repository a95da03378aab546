# hb_add_subdirectories(): add every sub-folder of the current source folder
# that has a CMakeLists.txt. tests/, bench/, examples/ and bindings/ grow by
# adding folders, without editing a shared list.
function(hb_add_subdirectories)
  file(GLOB sub_dirs LIST_DIRECTORIES true ${CMAKE_CURRENT_SOURCE_DIR}/*)
  foreach(dir ${sub_dirs})
    if(IS_DIRECTORY ${dir} AND EXISTS ${dir}/CMakeLists.txt)
      add_subdirectory(${dir})
    endif()
  endforeach()
endfunction()
