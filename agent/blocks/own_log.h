// The agent's own stdout and stderr, as its block server serves them (GET /v1/logs/agent/...):
// readable only when the stream is a regular file (the agent started with it redirected to
// one); a terminal, a pipe or the journal is named in the answer with where to look instead.
#pragma once

#include <string>

#include "blocks/block_server.h"

namespace dockhand::agent {

// This process's `stream` ("stdout" or "stderr") opened again for reading: the descriptor to
// serve (the caller closes it), or the status and reason to answer with (404 for no such
// stream or not a file, 500 when it cannot be read).
LogFile openOwnLog(const std::string& stream);

}  // namespace dockhand::agent
