// The `dockhand` program: the node agent.
#include "app/agent_application.h"

int main(int argc, char** argv) {
  dockhand::agent::AgentApplication app;
  return app.start(argc, argv);
}
