# Precompiled headers: most of a clean build was spent parsing the same standard library,
# Boost.JSON and GoogleTest headers again in every translation unit. Two precompiled headers
# are built once and every C++ target reuses one of them (REUSE_FROM): tests get the one
# with GoogleTest, everything else the one without. Only third-party and standard headers go
# in, never the project's own, so that editing a project header rebuilds what includes it and
# no more.
#
# Left out on purpose: <iostream> (its static std::ios_base::Init would start in every
# binary: see src/common/json.cc) and GoogleMock (few tests use it).
#
# -DUPLINK_PCH=OFF builds without them, which also shows a file that forgot an #include.
option(UPLINK_PCH "Precompile the standard library, Boost.JSON and GoogleTest headers" ON)

if(UPLINK_PCH AND CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  # GCC 12 forgets that what it reads from a precompiled header came from system headers, so
  # its -Warray-bounds, -Wstringop-overread and -Wstringop-overflow false positives inside libstdc++'s std::string
  # (the kind -Wno-restrict silences in CMakeLists.txt) are no longer suppressed and fill the
  # build log. A build with -DUPLINK_PCH=OFF still reports them.
  add_compile_options(-Wno-array-bounds -Wno-stringop-overread -Wno-stringop-overflow)
endif()

set(UPLINK_PCH_HEADERS
  <algorithm> <array> <atomic> <charconv> <chrono> <cmath> <condition_variable> <cstddef>
  <cstdint> <cstdio> <cstdlib> <cstring> <deque> <filesystem> <fstream> <functional> <limits>
  <map> <memory> <mutex> <optional> <set> <span> <sstream> <string> <string_view> <thread>
  <unordered_map> <utility> <variant> <vector>
  <boost/json.hpp>)

# Included before any target is declared (for the option and flags above); this is called once
# after every target is (the top-level CMakeLists.txt). A target that links GoogleTest is a
# test: it compiles with UPLINK_TEST_COMPILE_OPTIONS and the precompiled header with
# GoogleTest, which is built with the same options.
function(uplink_finish_targets)
  uplink_targets_under(${PROJECT_SOURCE_DIR} targets)
  set(use_pch ON)
  if(NOT UPLINK_PCH OR UPLINK_FUZZ)
    # libFuzzer builds add sanitizer flags per target, which a shared header cannot match.
    set(use_pch OFF)
  endif()
  if(use_pch)
    # The holders compile nothing but their header.
    add_library(uplink_pch OBJECT ${PROJECT_SOURCE_DIR}/cmake/pch_holder.cc)
    target_precompile_headers(uplink_pch PRIVATE ${UPLINK_PCH_HEADERS})
    add_library(uplink_test_pch OBJECT ${PROJECT_SOURCE_DIR}/cmake/pch_holder.cc)
    target_precompile_headers(uplink_test_pch PRIVATE ${UPLINK_PCH_HEADERS} <gtest/gtest.h>)
    target_link_libraries(uplink_test_pch PRIVATE GTest::gtest)
    target_compile_options(uplink_test_pch PRIVATE ${UPLINK_TEST_COMPILE_OPTIONS})
  endif()

  foreach(target IN LISTS targets)
    get_target_property(type ${target} TYPE)
    get_target_property(imported ${target} IMPORTED)
    get_target_property(pic ${target} POSITION_INDEPENDENT_CODE)
    # Shared libraries compile with -fPIC, which a header precompiled without it cannot serve.
    if(imported OR pic OR NOT type MATCHES "^(STATIC_LIBRARY|OBJECT_LIBRARY|EXECUTABLE)$")
      continue()
    endif()
    get_target_property(libraries ${target} LINK_LIBRARIES)
    if(libraries MATCHES "GTest::")
      target_compile_options(${target} PRIVATE ${UPLINK_TEST_COMPILE_OPTIONS})
      if(use_pch)
        target_precompile_headers(${target} REUSE_FROM uplink_test_pch)
      endif()
    elseif(use_pch)
      target_precompile_headers(${target} REUSE_FROM uplink_pch)
    endif()
  endforeach()
endfunction()

function(uplink_targets_under directory out)
  get_property(found DIRECTORY ${directory} PROPERTY BUILDSYSTEM_TARGETS)
  get_property(subdirectories DIRECTORY ${directory} PROPERTY SUBDIRECTORIES)
  foreach(subdirectory IN LISTS subdirectories)
    uplink_targets_under(${subdirectory} below)
    list(APPEND found ${below})
  endforeach()
  set(${out} ${found} PARENT_SCOPE)
endfunction()
