# Installs the SDK (component "dev") from a Dockhand build tree into a fresh prefix, then
# configures and builds each sdk/examples/ project OUT OF TREE against that prefix, as a
# plugin author would; then makes a project of each kind with `dockhand plugins new` from the
# installed templates, builds it the same way and runs its own tests. Run with cmake -P and:
#   -DDOCKHAND_BUILD_DIR=<the Dockhand build>  -DEXAMPLES_SOURCE_DIR=<sdk/examples>
#   -DWORK_DIR=<scratch: prefix/ and build/<example>/ are created here>
#   -DGENERATOR=<the generator to use>  -DDOCKHAND_PROGRAM=<the dockhand program>
#   -DCTEST=<the ctest program>
foreach(var DOCKHAND_BUILD_DIR EXAMPLES_SOURCE_DIR WORK_DIR)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "build_examples.cmake: ${var} is not set")
  endif()
endforeach()

set(prefix "${WORK_DIR}/prefix")
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    string(REPLACE ";" " " command "${ARGN}")
    message(FATAL_ERROR "failed (${rc}): ${command}\n${out}")
  endif()
endfunction()

# The SDK's share of the dev component: what `cmake --install <build> --component dev` puts
# there from sdk/ (headers, the Dockhand CMake package, the examples). Installed through the
# sdk directory's own install script, so that the test does not depend on the package's
# documentation files, which the packaging build generates.
run(${CMAKE_COMMAND} "-DCMAKE_INSTALL_PREFIX=${prefix}" -DCMAKE_INSTALL_COMPONENT=dev
    -P "${DOCKHAND_BUILD_DIR}/sdk/cmake_install.cmake")
foreach(required include/dockhand/plugin.h include/dockhand/plugin.hpp
                 lib/cmake/Dockhand/DockhandConfig.cmake lib/cmake/Dockhand/DockhandPlugin.cmake
                 lib/cmake/Dockhand/DockhandJobLibrary.cmake lib/cmake/Dockhand/DockhandModule.cmake)
  if(NOT EXISTS "${prefix}/${required}")
    message(FATAL_ERROR "the dev component did not install ${required}")
  endif()
endforeach()

file(GLOB examples LIST_DIRECTORIES true RELATIVE "${EXAMPLES_SOURCE_DIR}" "${EXAMPLES_SOURCE_DIR}/*")
list(SORT examples)
set(generator_args)
if(GENERATOR)
  set(generator_args -G "${GENERATOR}")
endif()
foreach(example ${examples})
  if(NOT EXISTS "${EXAMPLES_SOURCE_DIR}/${example}/CMakeLists.txt")
    continue()
  endif()
  set(build "${WORK_DIR}/build/${example}")
  # Only the installed prefix: the example must not find anything of the source tree.
  run(${CMAKE_COMMAND} -S "${EXAMPLES_SOURCE_DIR}/${example}" -B "${build}" ${generator_args}
      -DCMAKE_BUILD_TYPE=Release "-DCMAKE_PREFIX_PATH=${prefix}" -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF
      "-DCMAKE_CXX_FLAGS=-Wall -Wextra -Werror")
  run(${CMAKE_COMMAND} --build "${build}")
  message(STATUS "built example ${example} in ${build}")
endforeach()

# `dockhand plugins new`, one project of each kind, from the templates the prefix holds.
foreach(kind discovery runner migration job)
  set(project "${WORK_DIR}/new/my-${kind}")
  run("${DOCKHAND_PROGRAM}" plugins new --kind ${kind} my-${kind} --dir "${project}"
      --templates "${prefix}/share/dockhand/sdk-templates")
  set(build "${WORK_DIR}/build/new-${kind}")
  run(${CMAKE_COMMAND} -S "${project}" -B "${build}" ${generator_args}
      -DCMAKE_BUILD_TYPE=Release "-DCMAKE_PREFIX_PATH=${prefix}" -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF
      "-DCMAKE_CXX_FLAGS=-Wall -Wextra -Werror" "-DDOCKHAND_PROGRAM=${DOCKHAND_PROGRAM}")
  run(${CMAKE_COMMAND} --build "${build}")
  run("${CTEST}" --test-dir "${build}" --output-on-failure --no-tests=error)
  message(STATUS "made, built and tested a new ${kind} project in ${build}")
endforeach()
