# dockhand_add_plugin(<name> SOURCES <src>... [LIBRARIES <lib>...] [OUTPUT_DIR <dir>] [NO_INSTALL])
#
# Builds a Dockhand plugin: a shared library named dockhand-<name>.so with hidden visibility,
# every undefined symbol resolved at link time, and static dependencies kept private, so that
# two plugins never see each other's helpers. Built-in plugins, test fixtures and third-party
# plugins (through the installed CMake package) all use this one function. The install rule
# goes into the component named by DOCKHAND_PLUGIN_INSTALL_COMPONENT when that is set.
include("${CMAKE_CURRENT_LIST_DIR}/DockhandModule.cmake")

function(dockhand_add_plugin name)
  cmake_parse_arguments(ARG "NO_INSTALL" "OUTPUT_DIR" "SOURCES;LIBRARIES" ${ARGN})
  set(output_dir "${ARG_OUTPUT_DIR}")
  if(NOT output_dir AND DEFINED DOCKHAND_PLUGIN_OUTPUT_DIR)
    set(output_dir "${DOCKHAND_PLUGIN_OUTPUT_DIR}")
  endif()
  set(destination "")
  if(NOT ARG_NO_INSTALL AND DEFINED DOCKHAND_PLUGIN_INSTALL_DIR)
    set(destination "${DOCKHAND_PLUGIN_INSTALL_DIR}")
  endif()
  _dockhand_add_module(dockhand-plugin-${name}
    SOURCES ${ARG_SOURCES}
    LIBRARIES ${ARG_LIBRARIES}
    OUTPUT_NAME "dockhand-${name}"
    VISIBILITY hidden
    OUTPUT_DIR "${output_dir}"
    DESTINATION "${destination}"
    COMPONENT "${DOCKHAND_PLUGIN_INSTALL_COMPONENT}")
endfunction()
