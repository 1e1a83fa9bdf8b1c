#include "tools/commands.h"
int cmd_bench_trace(int argc, char **argv) { (void)argc; (void)argv; return 0; }
