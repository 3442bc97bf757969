# Project-wide compile flags and the one function that declares a module library.

# -Wno-restrict: GCC 12 reports false positives inside std::string concatenation (GCC PR 105329).
set(SERVESIM_WARNINGS -Wall -Wextra -Wpedantic -Wconversion -Wshadow -Wno-sign-conversion -Wno-restrict)

if(SERVESIM_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
endif()

# servesim_library(NAME name SOURCES ... [PUBLIC_DEPS ...] [PRIVATE_DEPS ...])
# Declares servesim::<name> from an explicit source list. Headers sit beside sources and are
# included from the repository root ("core/time.h", "models/model_spec.h").
function(servesim_library)
  cmake_parse_arguments(ARG "" "NAME" "SOURCES;PUBLIC_DEPS;PRIVATE_DEPS" ${ARGN})
  add_library(servesim_${ARG_NAME} STATIC ${ARG_SOURCES})
  add_library(servesim::${ARG_NAME} ALIAS servesim_${ARG_NAME})
  target_include_directories(servesim_${ARG_NAME} PUBLIC ${PROJECT_SOURCE_DIR})
  target_compile_options(servesim_${ARG_NAME} PRIVATE ${SERVESIM_WARNINGS})
  target_link_libraries(servesim_${ARG_NAME} PUBLIC ${ARG_PUBLIC_DEPS} PRIVATE ${ARG_PRIVATE_DEPS})
endfunction()

# servesim_test(NAME name SOURCES ... DEPS ...)
# One doctest executable per library; it links only that library (a layering mistake is a link error).
function(servesim_test)
  cmake_parse_arguments(ARG "" "NAME" "SOURCES;DEPS" ${ARGN})
  add_executable(test_${ARG_NAME} ${ARG_SOURCES})
  target_compile_options(test_${ARG_NAME} PRIVATE ${SERVESIM_WARNINGS})
  target_link_libraries(test_${ARG_NAME} PRIVATE ${ARG_DEPS} servesim_doctest_main)
  target_compile_definitions(test_${ARG_NAME} PRIVATE SERVESIM_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
  add_test(NAME ${ARG_NAME} COMMAND test_${ARG_NAME} --no-intro --force-colors=0
           WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(${ARG_NAME} PROPERTIES LABELS default)
  add_dependencies(servesim_tests test_${ARG_NAME})
endfunction()
