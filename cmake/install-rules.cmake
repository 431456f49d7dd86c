# Install and export rules, so that `find_package(softk)` gives the target softk::softk.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(TARGETS softk EXPORT softkTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY include/softk DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT softkTargets NAMESPACE softk:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/softk)

configure_package_config_file(cmake/softkConfig.cmake.in ${PROJECT_BINARY_DIR}/softkConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/softk)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/softkConfigVersion.cmake COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/softkConfig.cmake ${PROJECT_BINARY_DIR}/softkConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/softk)
