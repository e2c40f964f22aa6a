# dockhand_add_plugin(<name> SOURCES <src>... [LIBRARIES <lib>...] [OUTPUT_DIR <dir>] [NO_INSTALL])
#
# Builds a Dockhand plugin: a shared library named dockhand-<name>.so with hidden visibility,
# every undefined symbol resolved at link time, and static dependencies kept private, so that
# two plugins never see each other's helpers. Built-in plugins, test fixtures and third-party
# plugins (through the installed CMake package) all use this one function. The install rule
# goes into the component named by DOCKHAND_PLUGIN_INSTALL_COMPONENT when that is set.
function(dockhand_add_plugin name)
  cmake_parse_arguments(ARG "NO_INSTALL" "OUTPUT_DIR" "SOURCES;LIBRARIES" ${ARGN})
  set(target dockhand-plugin-${name})
  add_library(${target} MODULE ${ARG_SOURCES})
  set_target_properties(${target} PROPERTIES
    OUTPUT_NAME "dockhand-${name}"
    PREFIX ""
    SUFFIX ".so"
    C_VISIBILITY_PRESET hidden
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON)
  if(ARG_OUTPUT_DIR)
    set_target_properties(${target} PROPERTIES LIBRARY_OUTPUT_DIRECTORY "${ARG_OUTPUT_DIR}")
  elseif(DEFINED DOCKHAND_PLUGIN_OUTPUT_DIR)
    set_target_properties(${target} PROPERTIES LIBRARY_OUTPUT_DIRECTORY "${DOCKHAND_PLUGIN_OUTPUT_DIR}")
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
  if(NOT ARG_NO_INSTALL AND DEFINED DOCKHAND_PLUGIN_INSTALL_DIR)
    if(DEFINED DOCKHAND_PLUGIN_INSTALL_COMPONENT)
      install(TARGETS ${target} LIBRARY DESTINATION "${DOCKHAND_PLUGIN_INSTALL_DIR}"
              COMPONENT ${DOCKHAND_PLUGIN_INSTALL_COMPONENT})
    else()
      install(TARGETS ${target} LIBRARY DESTINATION "${DOCKHAND_PLUGIN_INSTALL_DIR}")
    endif()
  endif()
endfunction()
