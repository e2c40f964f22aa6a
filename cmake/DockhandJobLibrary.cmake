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
function(dockhand_add_job_library name)
  cmake_parse_arguments(ARG "NO_INSTALL" "OUTPUT_DIR;INSTALL_DIR" "SOURCES;LIBRARIES" ${ARGN})
  if(NOT ARG_SOURCES)
    message(FATAL_ERROR "dockhand_add_job_library(${name}): SOURCES is required")
  endif()
  if(ARG_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR
            "dockhand_add_job_library(${name}): unknown arguments: ${ARG_UNPARSED_ARGUMENTS}")
  endif()
  add_library(${name} MODULE ${ARG_SOURCES})
  set_target_properties(${name} PROPERTIES
    PREFIX "lib"
    OUTPUT_NAME "${name}"
    SUFFIX ".so"
    C_VISIBILITY_PRESET default
    CXX_VISIBILITY_PRESET default
    VISIBILITY_INLINES_HIDDEN OFF)
  target_compile_features(${name} PRIVATE cxx_std_17)
  if(ARG_OUTPUT_DIR)
    set_target_properties(${name} PROPERTIES LIBRARY_OUTPUT_DIRECTORY "${ARG_OUTPUT_DIR}")
  elseif(DEFINED DOCKHAND_JOB_OUTPUT_DIR)
    set_target_properties(${name} PROPERTIES LIBRARY_OUTPUT_DIRECTORY "${DOCKHAND_JOB_OUTPUT_DIR}")
  endif()
  target_link_options(${name} PRIVATE "LINKER:--no-undefined" "LINKER:--exclude-libs,ALL")
  if(TARGET Dockhand::sdk)
    target_link_libraries(${name} PRIVATE Dockhand::sdk)
  endif()
  if(ARG_LIBRARIES)
    target_link_libraries(${name} PRIVATE ${ARG_LIBRARIES})
  endif()
  if(COMMAND dockhand_set_warnings)
    dockhand_set_warnings(${name})
  endif()
  if(NOT ARG_NO_INSTALL)
    if(ARG_INSTALL_DIR)
      set(destination "${ARG_INSTALL_DIR}")
    elseif(DEFINED DOCKHAND_JOB_INSTALL_DIR)
      set(destination "${DOCKHAND_JOB_INSTALL_DIR}")
    else()
      set(destination "lib/dockhand/jobs")
    endif()
    if(DEFINED DOCKHAND_JOB_INSTALL_COMPONENT)
      install(TARGETS ${name} LIBRARY DESTINATION "${destination}"
              COMPONENT ${DOCKHAND_JOB_INSTALL_COMPONENT})
    else()
      install(TARGETS ${name} LIBRARY DESTINATION "${destination}")
    endif()
  endif()
endfunction()
