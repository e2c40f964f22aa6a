// Named loggers of the agent's parts: logger("name") is dockhand::logger
// (dockhand/base/logging.h), which the agent and the driver share. This header only forwards
// to it for the files that still include it; new code includes dockhand/base/logging.h.
#pragma once

#include "dockhand/base/logging.h"
