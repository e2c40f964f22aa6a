# dockhand_add_job_library(<name> SOURCES <src>... [LIBRARIES <lib>...] [OUTPUT_DIR <dir>]
#                          [INSTALL_DIR <dir>] [NO_INSTALL])
#
# Builds a Dockhand job library (docs/jobs.md): the target <name>, a MODULE named lib<name>.so
# that the agent's `library` task runner loads and calls through dockhand/job.h. Unlike a
# plugin it keeps DEFAULT symbol visibility, so its task functions stay in the dynamic symbol
# table and a thread dump of a stuck task can name them; its static dependencies are still kept
# out of it (--exclude-libs,ALL), and every undefined symbol must resolve at link time
# (--no-undefined), so a missing one fails the build rather than the first task. Compiled as
# C++17 at least (a project may ask for a newer standard).
#
# Installed into INSTALL_DIR, else ${DOCKHAND_JOB_INSTALL_DIR}, else lib/dockhand/jobs (relative to
# the install prefix), unless NO_INSTALL; into the component DOCKHAND_JOB_INSTALL_COMPONENT when
# that is set. The output goes to OUTPUT_DIR, else ${DOCKHAND_JOB_OUTPUT_DIR} when set.
include("${CMAKE_CURRENT_LIST_DIR}/DockhandModule.cmake")

function(dockhand_add_job_library name)
  cmake_parse_arguments(ARG "NO_INSTALL" "OUTPUT_DIR;INSTALL_DIR" "SOURCES;LIBRARIES" ${ARGN})
  if(NOT ARG_SOURCES)
    message(FATAL_ERROR "dockhand_add_job_library(${name}): SOURCES is required")
  endif()
  if(ARG_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR
            "dockhand_add_job_library(${name}): unknown arguments: ${ARG_UNPARSED_ARGUMENTS}")
  endif()
  set(output_dir "${ARG_OUTPUT_DIR}")
  if(NOT output_dir AND DEFINED DOCKHAND_JOB_OUTPUT_DIR)
    set(output_dir "${DOCKHAND_JOB_OUTPUT_DIR}")
  endif()
  set(destination "")
  if(NOT ARG_NO_INSTALL)
    if(ARG_INSTALL_DIR)
      set(destination "${ARG_INSTALL_DIR}")
    elseif(DEFINED DOCKHAND_JOB_INSTALL_DIR)
      set(destination "${DOCKHAND_JOB_INSTALL_DIR}")
    else()
      set(destination "lib/dockhand/jobs")
    endif()
  endif()
  # Default visibility: its task functions stay in the dynamic symbol table (thread dumps).
  _dockhand_add_module(${name}
    SOURCES ${ARG_SOURCES}
    LIBRARIES ${ARG_LIBRARIES}
    OUTPUT_NAME "${name}"
    PREFIX "lib"
    VISIBILITY default
    OUTPUT_DIR "${output_dir}"
    DESTINATION "${destination}"
    COMPONENT "${DOCKHAND_JOB_INSTALL_COMPONENT}")
  target_compile_features(${name} PRIVATE cxx_std_17)
endfunction()
