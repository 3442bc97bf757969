# Project-wide compile flags and the one function that declares a module library.

# -Wno-restrict: GCC 12 reports false positives inside std::string concatenation (GCC PR 105329).
set(SERVESIM_WARNINGS -Wall -Wextra -Wpedantic -Wconversion -Wshadow -Wno-sign-conversion)
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  list(APPEND SERVESIM_WARNINGS -Wno-restrict)  # clang (the fuzz build) has no such warning
endif()

if(SERVESIM_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
endif()

# servesim_library(NAME name SOURCES ... [PUBLIC_DEPS ...] [PRIVATE_DEPS ...])
# Declares servesim::<name> from an explicit source list. Headers sit beside sources and are
# included by their path from the repository root ("core/time.h", "models/model_spec.h"), but a
# library does not see the whole repository: its include path is a view (build/include_views/<name>)
# holding links to its own folder and to the folders of the servesim libraries it depends on,
# directly or not. An include of a library above it (or beside it, undeclared) is a compile error.
function(servesim_library)
  cmake_parse_arguments(ARG "" "NAME" "SOURCES;PUBLIC_DEPS;PRIVATE_DEPS" ${ARGN})
  add_library(servesim_${ARG_NAME} STATIC ${ARG_SOURCES})
  add_library(servesim::${ARG_NAME} ALIAS servesim_${ARG_NAME})
  file(RELATIVE_PATH folder ${PROJECT_SOURCE_DIR} ${CMAKE_CURRENT_SOURCE_DIR})
  set(folders ${folder})
  foreach(dep IN LISTS ARG_PUBLIC_DEPS ARG_PRIVATE_DEPS)
    if(dep MATCHES "^servesim::(.+)$")
      get_property(dep_folders GLOBAL PROPERTY SERVESIM_FOLDERS_${CMAKE_MATCH_1})
      if(NOT dep_folders)
        message(FATAL_ERROR "servesim_library(${ARG_NAME}): ${dep} must be declared before it")
      endif()
      list(APPEND folders ${dep_folders})
    endif()
  endforeach()
  list(REMOVE_DUPLICATES folders)
  list(SORT folders)
  set_property(GLOBAL PROPERTY SERVESIM_FOLDERS_${ARG_NAME} ${folders})
  set(view ${PROJECT_BINARY_DIR}/include_views/${ARG_NAME})
  servesim_include_view(${view} ${folders})
  # The layer map a check reads (scripts/check_layers.sh): library, folder, visible folders.
  list(JOIN folders " " visible)
  set_property(GLOBAL APPEND PROPERTY SERVESIM_LAYERS "${ARG_NAME} ${folder} ${visible}")
  # Built against the view; installed (`cmake --install`) with the headers under
  # include/servesim/<folder>, included the same way ("core/time.h").
  target_include_directories(servesim_${ARG_NAME} PUBLIC $<BUILD_INTERFACE:${view}>
                             $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}/servesim>)
  target_compile_options(servesim_${ARG_NAME} PRIVATE ${SERVESIM_WARNINGS})
  target_link_libraries(servesim_${ARG_NAME} PUBLIC ${ARG_PUBLIC_DEPS} PRIVATE ${ARG_PRIVATE_DEPS})
  set_target_properties(servesim_${ARG_NAME} PROPERTIES EXPORT_NAME ${ARG_NAME})
  install(TARGETS servesim_${ARG_NAME} EXPORT servesimTargets ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
  install(DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR}/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/servesim/${folder}
          FILES_MATCHING PATTERN "*.h" PATTERN "data" EXCLUDE)
endfunction()

# servesim_include_view(VIEW FOLDER...): VIEW/<folder> links to the source folder, for each folder.
function(servesim_include_view view)
  file(REMOVE_RECURSE ${view})
  foreach(f IN LISTS ARGN)
    get_filename_component(parent ${view}/${f} DIRECTORY)
    file(MAKE_DIRECTORY ${parent})
    file(CREATE_LINK ${PROJECT_SOURCE_DIR}/${f} ${view}/${f} SYMBOLIC)
  endforeach()
endfunction()

# Writes build/layers.txt (one line per library: its name, its folder, the folders it may include)
# once every library is declared.
function(servesim_write_layers)
  get_property(layers GLOBAL PROPERTY SERVESIM_LAYERS)
  list(JOIN layers "\n" text)
  file(WRITE ${PROJECT_BINARY_DIR}/layers.txt "${text}\n")
endfunction()

# servesim_test(NAME name SOURCES ... DEPS ...)
# One doctest executable per library; it links only that library (a layering mistake is a link error)
# and sees only that library's view plus tests/ (the shared test helpers).
function(servesim_test)
  cmake_parse_arguments(ARG "" "NAME" "SOURCES;DEPS" ${ARGN})
  add_executable(test_${ARG_NAME} ${ARG_SOURCES})
  target_compile_options(test_${ARG_NAME} PRIVATE ${SERVESIM_WARNINGS})
  target_include_directories(test_${ARG_NAME} PRIVATE ${SERVESIM_TESTS_VIEW})
  target_link_libraries(test_${ARG_NAME} PRIVATE ${ARG_DEPS} servesim_doctest_main)
  target_compile_definitions(test_${ARG_NAME} PRIVATE SERVESIM_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
  add_test(NAME ${ARG_NAME} COMMAND test_${ARG_NAME} --no-intro --force-colors=0
           WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(${ARG_NAME} PROPERTIES LABELS default)
  add_dependencies(servesim_tests test_${ARG_NAME})
endfunction()
