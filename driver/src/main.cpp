#include "dockhand/driver/cli.h"

int main(int argc, char** argv) { return dockhand::driver::runCli(argc, argv); }
