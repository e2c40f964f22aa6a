# Install layout and OS packages. Included last from the top CMakeLists.txt.
#
# Two packages, built with CPack from one install tree (configure with
# -DCMAKE_INSTALL_PREFIX=/usr for packages; packaging/ci-package-check.sh does):
#
#   dockhand      (install component `dockhand`, the default component of every install rule
#                  outside sdk/): /usr/bin/{dockhand,dockhand-driver},
#                  /usr/lib/dockhand/plugins/*.so, /etc/dockhand/agent.json (a conffile) and
#                  agent.d/, the JSON Schema, the Grafana dashboard (grafana/dockhand.json) and
#                  the example Prometheus config (prometheus/dockhand.yml) in /usr/share/dockhand,
#                  the Kubernetes manifests and scripts in /usr/share/dockhand/{kubernetes,
#                  container}, the systemd units, the man pages, docs and examples in
#                  /usr/share/doc/dockhand; the Slurm launcher /usr/bin/dockhand-slurm and its
#                  sbatch template in /usr/share/dockhand/slurm.
#   dockhand-dev  (component `dev`, the default of every install rule under sdk/; rpm:
#                  dockhand-devel): the SDK headers and the CMake package for plugin authors.
#
#   cmake --build build/pkg && (cd build/pkg && cpack)      # .deb, and .rpm with rpmbuild
find_package(Python3 COMPONENTS Interpreter)

set(DOCKHAND_SYSTEMD_UNIT_DIR "lib/systemd/system" CACHE STRING
    "Where the systemd units install, relative to the prefix (/usr/lib/systemd/system)")
set(_etc "${CMAKE_INSTALL_FULL_SYSCONFDIR}/dockhand")
set(_doc "${CMAKE_INSTALL_DATADIR}/doc/dockhand")

# ---- configuration --------------------------------------------------------------------------
install(FILES configs/agent.json DESTINATION "${_etc}" COMPONENT dockhand)
install(DIRECTORY DESTINATION "${_etc}/agent.d" COMPONENT dockhand)
install(FILES configs/agent.schema.json DESTINATION "${CMAKE_INSTALL_DATADIR}/dockhand"
        COMPONENT dockhand)

# ---- monitoring: the Grafana dashboard and an example Prometheus scrape config -----------
install(FILES packaging/grafana/dockhand.json DESTINATION "${CMAKE_INSTALL_DATADIR}/dockhand/grafana"
        COMPONENT dockhand)
install(FILES packaging/prometheus/dockhand.yml
        DESTINATION "${CMAKE_INSTALL_DATADIR}/dockhand/prometheus" COMPONENT dockhand)

# ---- systemd --------------------------------------------------------------------------------
install(FILES packaging/systemd/dockhand.service packaging/systemd/dockhand@.service
        DESTINATION "${DOCKHAND_SYSTEMD_UNIT_DIR}" COMPONENT dockhand)
# The maintainer scripts' upgrade step (restart in place, keeping sessions and blocks), and
# needrestart told not to restart the agents the destructive way after a library update.
install(PROGRAMS packaging/systemd/dockhand-restart-in-place
        DESTINATION "${CMAKE_INSTALL_PREFIX}/lib/dockhand" COMPONENT dockhand)
install(FILES packaging/needrestart/dockhand.conf
        DESTINATION "${CMAKE_INSTALL_FULL_SYSCONFDIR}/needrestart/conf.d" COMPONENT dockhand)

# ---- the catalog of the package's own plugins (plugin_trust, docs/plugins.md "Trust") ------
# Written when the package is made, from the plugin files as installed, so that it pins exactly
# the bytes the package ships: an agent with "plugin_trust": {"policy": "verified"} loads them
# with no more setup.
set(_dockhand_catalog "${CMAKE_INSTALL_FULL_DATADIR}/dockhand/plugins.sha256")
set(_dockhand_plugin_dir "${CMAKE_INSTALL_PREFIX}/${DOCKHAND_PLUGIN_INSTALL_DIR}")
install(CODE "
  file(GLOB _plugins \"\$ENV{DESTDIR}${_dockhand_plugin_dir}/*.so\")
  list(SORT _plugins)
  set(_text \"# SHA-256 of each plugin the dockhand package installs (plugin_trust).\\n\")
  foreach(_plugin IN LISTS _plugins)
    file(SHA256 \"\${_plugin}\" _hash)
    get_filename_component(_name \"\${_plugin}\" NAME)
    string(APPEND _text \"\${_hash}  ${_dockhand_plugin_dir}/\${_name}\\n\")
  endforeach()
  message(STATUS \"Installing: \$ENV{DESTDIR}${_dockhand_catalog}\")
  file(WRITE \"\$ENV{DESTDIR}${_dockhand_catalog}\" \"\${_text}\")
" COMPONENT dockhand)

# ---- Kubernetes and the container image ---------------------------------------------------
# The manifests and the scripts the image runs (docs/operations.md#kubernetes): the image
# installs this package, so the paths in the manifests are these.
file(GLOB _kubernetes_manifests "${PROJECT_SOURCE_DIR}/packaging/kubernetes/*.yaml")
install(FILES ${_kubernetes_manifests}
        DESTINATION "${CMAKE_INSTALL_DATADIR}/dockhand/kubernetes" COMPONENT dockhand)
install(PROGRAMS packaging/kubernetes/decommission.sh packaging/kubernetes/nvidia-visible-devices.sh
        DESTINATION "${CMAKE_INSTALL_DATADIR}/dockhand/kubernetes" COMPONENT dockhand)
install(PROGRAMS packaging/container/entrypoint.sh
        DESTINATION "${CMAKE_INSTALL_DATADIR}/dockhand/container" COMPONENT dockhand)
install(FILES packaging/container/Containerfile
        DESTINATION "${CMAKE_INSTALL_DATADIR}/dockhand/container" COMPONENT dockhand)

# ---- Slurm: the launcher and the sbatch template (docs/operations.md, "Slurm") ---------------
install(PROGRAMS packaging/slurm/dockhand-slurm DESTINATION "${CMAKE_INSTALL_BINDIR}"
        COMPONENT dockhand)
install(PROGRAMS packaging/slurm/dockhand.sbatch
        DESTINATION "${CMAKE_INSTALL_DATADIR}/dockhand/slurm" COMPONENT dockhand)

# ---- docs, examples, Debian's per-package files ---------------------------------------------
install(FILES README.md docs/operations.md docs/driver.md DESTINATION "${_doc}"
        COMPONENT dockhand)
install(FILES packaging/debian/copyright DESTINATION "${_doc}" COMPONENT dockhand)
install(FILES configs/agent.example.json DESTINATION "${_doc}/examples" COMPONENT dockhand)
install(DIRECTORY examples/wordcount examples/flaky DESTINATION "${_doc}/examples"
        COMPONENT dockhand)
install(FILES packaging/debian/dockhand.lintian-overrides
        DESTINATION "${CMAKE_INSTALL_DATADIR}/lintian/overrides" RENAME dockhand
        COMPONENT dockhand)
install(FILES packaging/debian/dockhand-dev.lintian-overrides
        DESTINATION "${CMAKE_INSTALL_DATADIR}/lintian/overrides" RENAME dockhand-dev
        COMPONENT dev)

# ---- generated at build time: man pages, the compressed changelog ----------------------------
set(_gen "${CMAKE_BINARY_DIR}/packaging")
set(_generated)
if(Python3_Interpreter_FOUND)
  foreach(page dockhand.8 dockhand-driver.1 dockhand-slurm.1)
    string(REGEX MATCH "[0-9]$" section "${page}")
    string(REGEX REPLACE "\\.[0-9]$" "" name "${page}")
    add_custom_command(OUTPUT "${_gen}/${page}.gz"
      COMMAND ${CMAKE_COMMAND} -E make_directory "${_gen}"
      COMMAND ${Python3_EXECUTABLE} "${PROJECT_SOURCE_DIR}/docs/man/md2man.py"
              "${PROJECT_SOURCE_DIR}/docs/man/${page}.md" "${_gen}/${page}.gz"
              --name ${name} --section ${section} --version ${PROJECT_VERSION}
      DEPENDS "${PROJECT_SOURCE_DIR}/docs/man/${page}.md" "${PROJECT_SOURCE_DIR}/docs/man/md2man.py"
      COMMENT "Generating man page ${page}")
    list(APPEND _generated "${_gen}/${page}.gz")
    install(FILES "${_gen}/${page}.gz" DESTINATION "${CMAKE_INSTALL_MANDIR}/man${section}"
            COMPONENT dockhand)
  endforeach()
else()
  message(WARNING "python3 not found: the man pages are not built or installed")
endif()
add_custom_command(OUTPUT "${_gen}/changelog.Debian.gz"
  COMMAND ${CMAKE_COMMAND} -E make_directory "${_gen}"
  COMMAND gzip -9n -c "${PROJECT_SOURCE_DIR}/packaging/debian/changelog" > "${_gen}/changelog.Debian.gz"
  DEPENDS "${PROJECT_SOURCE_DIR}/packaging/debian/changelog")
list(APPEND _generated "${_gen}/changelog.Debian.gz")
install(FILES "${_gen}/changelog.Debian.gz" DESTINATION "${_doc}" COMPONENT dockhand)
# Debian: every package has its own doc directory with copyright and changelog.
install(FILES packaging/debian/copyright "${_gen}/changelog.Debian.gz"
        DESTINATION "${CMAKE_INSTALL_DATADIR}/doc/dockhand-dev" COMPONENT dev)
# What a plugin or job library author reads, with the SDK they build against (the man pages
# name them).
install(FILES docs/plugins.md docs/jobs.md docs/blocks.md docs/resources.md docs/protocol.md
        DESTINATION "${CMAKE_INSTALL_DATADIR}/doc/dockhand-dev" COMPONENT dev)
add_custom_target(dockhand-packaging-files ALL DEPENDS ${_generated})

# ---- the SDK, when sdk/ installs nothing itself ---------------------------------------------
# sdk/CMakeLists.txt owns the SDK's install rules (headers, the Dockhand CMake package); they
# land in the `dev` component. Until it has any, the headers are installed from here.
file(READ "${PROJECT_SOURCE_DIR}/sdk/CMakeLists.txt" _sdk_cmake)
if(NOT _sdk_cmake MATCHES "install\\(")
  install(DIRECTORY sdk/include/dockhand DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}"
          COMPONENT dev FILES_MATCHING PATTERN "*.h" PATTERN "*.hpp")
endif()

# ---- CPack ----------------------------------------------------------------------------------
set(CPACK_PACKAGE_NAME dockhand)
set(CPACK_PACKAGE_VENDOR "The Dockhand authors")
set(CPACK_PACKAGE_VERSION "${PROJECT_VERSION}")
set(CPACK_PACKAGE_CONTACT "Dockhand Maintainers <maintainers@dockhand.dev>")
set(CPACK_PACKAGE_HOMEPAGE_URL "${PROJECT_HOMEPAGE_URL}")
# Each package has its own synopsis (first line of CPACK_DEBIAN_<C>_DESCRIPTION, and
# CPACK_RPM_<C>_PACKAGE_SUMMARY). CPackDeb prepends the project-wide summary to every
# description unless it is CPack's default text, so it is left at that default.
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "${CMAKE_PROJECT_NAME} built using CMake")
set(CPACK_RESOURCE_FILE_LICENSE "${PROJECT_SOURCE_DIR}/LICENSE")
set(CPACK_PACKAGE_DIRECTORY "${CMAKE_BINARY_DIR}/packages")
set(CPACK_STRIP_FILES ON)
# Install rules with absolute destinations (/etc/dockhand) go into the package, not onto the
# building machine.
set(CPACK_SET_DESTDIR ON)
set(CPACK_COMPONENTS_ALL dockhand dev)
set(CPACK_COMPONENT_DOCKHAND_DISPLAY_NAME "Dockhand node agent")
set(CPACK_COMPONENT_DEV_DISPLAY_NAME "Dockhand plugin SDK")
# Debian descriptions: the synopsis, then paragraphs (CPack indents them; an empty line
# becomes " .").
set(_agent_text
"Dockhand runs on every worker machine of a cluster: it connects to a driver,
registers the machine's cores and resources, runs the driver's tasks through
plugins and reports their status. Its behaviour follows the executor backend
of Apache Spark.

This package holds the agent (dockhand), the reference driver
(dockhand-driver), the built-in plugins, the default configuration in
/etc/dockhand and the systemd units dockhand.service and dockhand@.service.")
set(_sdk_text
"Dockhand runs a cluster's tasks on worker machines through plugins loaded
by a stable C ABI.

This package holds what plugin authors build against: the C ABI header,
the header-only C++ helper and the CMake package (find_package(Dockhand)).")
set(CPACK_COMPONENT_DOCKHAND_DESCRIPTION "${_agent_text}")
set(CPACK_COMPONENT_DEV_DESCRIPTION "${_sdk_text}")
set(CPACK_DEBIAN_DOCKHAND_DESCRIPTION "cluster node agent that runs a driver's tasks, and its reference driver\n${_agent_text}")
set(CPACK_DEBIAN_DEV_DESCRIPTION "plugin SDK for the Dockhand node agent: headers, CMake package\n${_sdk_text}")
set(CPACK_RPM_DOCKHAND_PACKAGE_SUMMARY "Dockhand node agent and reference driver")
set(CPACK_RPM_DEV_PACKAGE_SUMMARY "Dockhand plugin SDK: headers and CMake package")
set(CPACK_RPM_DOCKHAND_PACKAGE_DESCRIPTION "${_agent_text}")
set(CPACK_RPM_DEV_PACKAGE_DESCRIPTION "${_sdk_text}")

set(CPACK_GENERATOR DEB)
find_program(DOCKHAND_RPMBUILD rpmbuild)
if(DOCKHAND_RPMBUILD)
  list(APPEND CPACK_GENERATOR RPM)
endif()

# Debian
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_RELEASE 1)
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${CPACK_PACKAGE_CONTACT}")
set(CPACK_DEBIAN_PACKAGE_HOMEPAGE "${PROJECT_HOMEPAGE_URL}")
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(CPACK_DEBIAN_DOCKHAND_PACKAGE_NAME dockhand)
set(CPACK_DEBIAN_DOCKHAND_PACKAGE_SECTION admin)
set(CPACK_DEBIAN_DOCKHAND_PACKAGE_DEPENDS "adduser")
# dockhand-slurm (the Slurm launcher) runs srun; only nodes of a Slurm cluster need it.
set(CPACK_DEBIAN_DOCKHAND_PACKAGE_SUGGESTS "slurm-client")
configure_file(packaging/debian/conffiles.in "${_gen}/debian/conffiles" @ONLY)
set(CPACK_DEBIAN_DOCKHAND_PACKAGE_CONTROL_EXTRA
    "${_gen}/debian/conffiles;${PROJECT_SOURCE_DIR}/packaging/debian/postinst;${PROJECT_SOURCE_DIR}/packaging/debian/prerm;${PROJECT_SOURCE_DIR}/packaging/debian/postrm")
set(CPACK_DEBIAN_DEV_PACKAGE_NAME dockhand-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
# Not "all": the CMake package lives in the multiarch libdir (CMAKE_INSTALL_LIBDIR).
set(CPACK_DEBIAN_DEV_PACKAGE_SHLIBDEPS OFF)
set(CPACK_DEBIAN_DEV_PACKAGE_SUGGESTS "dockhand (= ${PROJECT_VERSION}-1), cmake")

# RPM (Fedora names: dockhand, dockhand-devel)
set(CPACK_RPM_COMPONENT_INSTALL ON)
set(CPACK_RPM_FILE_NAME RPM-DEFAULT)
set(CPACK_RPM_PACKAGE_RELEASE 1)
set(CPACK_RPM_PACKAGE_LICENSE "Apache-2.0")
set(CPACK_RPM_PACKAGE_URL "${PROJECT_HOMEPAGE_URL}")
set(CPACK_RPM_DOCKHAND_PACKAGE_NAME dockhand)
set(CPACK_RPM_DOCKHAND_PACKAGE_GROUP "System Environment/Daemons")
set(CPACK_RPM_DEV_PACKAGE_NAME dockhand-devel)
set(CPACK_RPM_PACKAGE_RELOCATABLE OFF)
set(CPACK_RPM_DOCKHAND_USER_FILELIST
    "%config(noreplace) ${_etc}/agent.json"
    "%config(noreplace) ${CMAKE_INSTALL_FULL_SYSCONFDIR}/needrestart/conf.d/dockhand.conf"
    "%exclude ${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_DATADIR}/lintian")
set(CPACK_RPM_EXCLUDE_FROM_AUTO_FILELIST_ADDITION
    /etc /etc/needrestart /etc/needrestart/conf.d /lib /lib/systemd /lib/systemd/system
    /usr/lib/systemd /usr/lib/systemd/system
    /usr/share/man /usr/share/man/man1 /usr/share/man/man8 /usr/share/doc /usr/share/lintian
    /usr/share/lintian/overrides /usr/include)
set(CPACK_RPM_DOCKHAND_PRE_INSTALL_SCRIPT_FILE "${PROJECT_SOURCE_DIR}/packaging/rpm/pre-install.sh")
set(CPACK_RPM_DOCKHAND_POST_INSTALL_SCRIPT_FILE "${PROJECT_SOURCE_DIR}/packaging/rpm/post-install.sh")
set(CPACK_RPM_DOCKHAND_PRE_UNINSTALL_SCRIPT_FILE "${PROJECT_SOURCE_DIR}/packaging/rpm/pre-uninstall.sh")
set(CPACK_RPM_DOCKHAND_POST_UNINSTALL_SCRIPT_FILE "${PROJECT_SOURCE_DIR}/packaging/rpm/post-uninstall.sh")

include(CPack)
