/* The trainshim command's subcommands, one file each (tools/cmd/cmd_<name>.c;
 * replay: tools/replay/cmd_replay.c). */
#ifndef TRAINSHIM_CMDS_H
#define TRAINSHIM_CMDS_H
int cmd_run(int argc, char **argv);
int cmd_report(int argc, char **argv);
int cmd_config(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_replay(int argc, char **argv);
#endif
