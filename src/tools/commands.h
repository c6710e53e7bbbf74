/* The subcommands of the shoal CLI; each parses its own flags with
 * GOptionContext and returns the process exit status. */
#ifndef SHOAL_COMMANDS_H
#define SHOAL_COMMANDS_H

int shoal_cmd_run (int argc, char **argv);
int shoal_cmd_import (int argc, char **argv);
int shoal_cmd_layers (int argc, char **argv);

#endif
