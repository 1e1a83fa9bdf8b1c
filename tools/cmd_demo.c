/* SPDX-License-Identifier: MIT */
#include <stdio.h>
#include "tools/commands.h"
int cmd_demo(int argc, char **argv) { (void)argc; (void)argv; return 0; }
