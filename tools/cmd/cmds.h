/* The trainshim command's subcommands, one file each (tools/cmd_<name>.c). */
#ifndef TRAINSHIM_CMDS_H
#define TRAINSHIM_CMDS_H
int cmd_run(int argc, char **argv);
int cmd_report(int argc, char **argv);
int cmd_config(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_replay(int argc, char **argv);
#endif
