/* The podplan driver: the command table (main.c), one file per subcommand (cmd_*.c) and the
 * few helpers they share. Only cli/ turns errors into exit statuses. */
#ifndef PODPLAN_CLI_H
#define PODPLAN_CLI_H

#include <getopt.h>
#include <stdio.h>

#include <jansson.h>

#include "podplan/cm.h"
#include "podplan/err.h"
#include "podplan/search.h"
#include "podplan/spec.h"
#include "podplan/store.h"

/* A subcommand: argv[0] is its name; returns the exit status. */
typedef int (*cli_fn)(int argc, char **argv);

int cmd_presets(int argc, char **argv);
int cmd_check(int argc, char **argv);
int cmd_predict(int argc, char **argv);
int cmd_simulate(int argc, char **argv);
int cmd_search(int argc, char **argv);
int cmd_study(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_import(int argc, char **argv);
int cmd_calibrate(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_report(int argc, char **argv);

/* Prints "podplan CMD: message" for err on stderr; returns its exit status. */
int cli_fail(const char *cmd, const pp_err *err);
/* Prints "podplan CMD: <formatted>" and a pointer to -h on stderr; returns 2. */
int cli_usage_error(const char *cmd, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* Parses an integer option value in [lo, hi]; on failure prints the error, returns 2. */
int cli_int(const char *cmd, const char *opt, const char *val, long lo, long hi, int *out);
/* getopt_long over argv with our own messages: returns the option, -1 at the end, or '?'
 * after printing an error (the caller returns 2). Resets getopt's state on first use. */
int cli_getopt(const char *cmd, int argc, char **argv, const char *shorts,
               const struct option *longs, int *first);
/* One option of a subcommand, in the one table that gives getopt its options and -h its
 * text: the long name, its value's name in the help (NULL: a flag), the id getopt returns
 * ('h' prints as "-h, --help"), and the help, its lines split by '\n'. */
typedef struct cli_opt {
  const char *name, *arg;
  int id;
  const char *help;
} cli_opt;
/* getopt_long's table from opts: n entries and the terminator (longs holds n + 1). */
void cli_opts_longs(const cli_opt *opts, size_t n, struct option *longs);
/* opts' help on f: "  --name ARG" padded to width columns and a space (two spaces after
 * a longer one), then the help; its further lines under the first. */
void cli_opts_help(FILE *f, const cli_opt *opts, size_t n, int width);
/* Loads --model, --cluster (sized by gpus when > 0) and --plan, and resolves the plan
 * against them; prints the error and returns its exit status, or 0. On success *plan is
 * owned by the caller (spec_plan_clear). */
int cli_load_specs(const char *cmd, const char *model, const char *cluster, int gpus,
                   const char *plan, spec_model *m, spec_cluster *c, spec_plan *p);
/* The breakdown keys of docs/cli.md (compute_s ... optimizer_s) as a new object. */
json_t *cli_breakdown_json(const cm_breakdown *t);
/* store_save with the score's breakdown as a JSON object (consumed). */
int cli_save(const char *db, const spec_model *m, const spec_cluster *c, const spec_plan *p,
             store_score *sc, json_t *breakdown, store_measurement *ms, size_t n,
             size_t *added, pp_err *err);
/* --calibration SEL (NULL or "none": nothing; "latest": the newest of a cluster of c's name;
 * or an id) read from the store `db` (NULL: podplan.db): its fitted values applied to p, *id
 * its id (0 for none). A calibration of another cluster is refused. Prints the error and
 * returns the exit status, or 0. */
int cli_calibration(const char *cmd, const char *sel, const char *db, const spec_cluster *c,
                    cm_params *p, int64_t *id);
/* The same for a command that spans clusters (study): the calibration (latest: the newest of
 * any cluster) as its cluster's name, a cm_params_apply list of its values and one of their
 * sigmas (cal_params_sigmas: its posterior). */
int cli_calibration_list(const char *cmd, const char *sel, const char *db, char *cluster,
                         size_t ncluster, char *list, char *sigmas, size_t nlist, int64_t *id);
/* path as a JSON string, made absolute (the current directory before a relative path; as
 * given when that cannot be read): what a score's breakdown records of a file it wrote
 * ("trace"), so that `podplan report` finds it from anywhere. */
json_t *cli_path_json(const char *path);
/* The MPI job a command runs in (MPI starts when a launcher started the process; alone it is
 * one rank), seen by search/ and study/ through search_comm: rank 0 gathers and broadcasts
 * byte buffers (be_job_*). */
typedef struct cli_job {
  int rank, size;
} cli_job;
int cli_job_init(cli_job *j, pp_err *err);
/* comm's hooks over j (which must outlive comm). */
void cli_job_comm(cli_job *j, search_comm *comm);

#endif
