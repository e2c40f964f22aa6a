# _dockhand_add_module(<target> SOURCES <src>... OUTPUT_NAME <name> [PREFIX <prefix>]
#                      VISIBILITY <hidden|default> [LIBRARIES <lib>...] [OUTPUT_DIR <dir>]
#                      [DESTINATION <dir> [COMPONENT <component>]])
#
# Internal to dockhand_add_plugin (DockhandPlugin.cmake) and dockhand_add_job_library
# (DockhandJobLibrary.cmake): what a library the agent loads needs, written once. A MODULE
# named <prefix><name>.so; every undefined symbol resolved at link time (--no-undefined), so a
# missing one fails the build rather than the load; its static dependencies kept out of its
# exports (--exclude-libs,ALL), so that two loaded libraries never see each other's helpers;
# Dockhand::sdk linked when that target exists, the project's warnings when that function
# exists; installed into DESTINATION (in COMPONENT when given) when DESTINATION is given.
include_guard(GLOBAL)

function(_dockhand_add_module target)
  cmake_parse_arguments(ARG "" "OUTPUT_NAME;PREFIX;VISIBILITY;OUTPUT_DIR;DESTINATION;COMPONENT"
                        "SOURCES;LIBRARIES" ${ARGN})
  add_library(${target} MODULE ${ARG_SOURCES})
  if(ARG_VISIBILITY STREQUAL "hidden")
    set(inlines_hidden ON)
  else()
    set(inlines_hidden OFF)
  endif()
  set_target_properties(${target} PROPERTIES
    OUTPUT_NAME "${ARG_OUTPUT_NAME}"
    PREFIX "${ARG_PREFIX}"
    SUFFIX ".so"
    C_VISIBILITY_PRESET ${ARG_VISIBILITY}
    CXX_VISIBILITY_PRESET ${ARG_VISIBILITY}
    VISIBILITY_INLINES_HIDDEN ${inlines_hidden})
  if(ARG_OUTPUT_DIR)
    set_target_properties(${target} PROPERTIES LIBRARY_OUTPUT_DIRECTORY "${ARG_OUTPUT_DIR}")
  endif()
  target_link_options(${target} PRIVATE "LINKER:--no-undefined" "LINKER:--exclude-libs,ALL")
  if(TARGET Dockhand::sdk)
    target_link_libraries(${target} PRIVATE Dockhand::sdk)
  endif()
  if(ARG_LIBRARIES)
    target_link_libraries(${target} PRIVATE ${ARG_LIBRARIES})
  endif()
  if(COMMAND dockhand_set_warnings)
    dockhand_set_warnings(${target})
  endif()
  if(ARG_DESTINATION)
    if(ARG_COMPONENT)
      install(TARGETS ${target} LIBRARY DESTINATION "${ARG_DESTINATION}" COMPONENT ${ARG_COMPONENT})
    else()
      install(TARGETS ${target} LIBRARY DESTINATION "${ARG_DESTINATION}")
    endif()
  endif()
endfunction()
