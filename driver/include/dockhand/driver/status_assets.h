// The status page's files (driver/status/status.html, status.js, status.css), compiled into
// the driver: CMake writes them into status_assets.cpp from status_assets.cpp.in.
#pragma once

#include <string_view>

namespace dockhand::driver {

extern const std::string_view kStatusHtml;
extern const std::string_view kStatusJs;
extern const std::string_view kStatusCss;

}  // namespace dockhand::driver
