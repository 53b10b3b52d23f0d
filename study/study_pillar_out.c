/* What the pillar study writes (study_int.h): the tables on the terminal, DIR/pillar.csv (one
 * row per case and method), DIR/pillar.md (the tables and a conclusion drawn from the numbers,
 * each claim naming the cases it rests on) and the plots (gnuplot through study_plot): per
 * fabric, each method's iteration time over global's; two-level's gap to global's bound as a
 * heat map over models x fabric scales; search wall time per method (log); Alpa's ablation.
 * Depends on study.h. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "podplan/fs.h"
#include "podplan/study.h"
#include "study_int.h"

/* The main grid's eight methods in the order of the tables (the ladder from Alpa as published
 * to global); the ablation's five. */
static const study__pm main_pm[] = {STUDY__PM_MEGATRON,         STUDY__PM_TWO_LEVEL_ALL,
                                    STUDY__PM_TWO_LEVEL,        STUDY__PM_TWO_LEVEL_DOMAIN,
                                    STUDY__PM_TWO_LEVEL_OPEN,   STUDY__PM_SPACE_NODE,
                                    STUDY__PM_SPACE_DOMAIN,     STUDY__PM_EXHAUSTIVE,
                                    STUDY__PM_GLOBAL};
/* The plots' (one colour each) */
static const study__pm plot_pm[] = {STUDY__PM_MEGATRON,         STUDY__PM_TWO_LEVEL,
                                    STUDY__PM_TWO_LEVEL_DOMAIN, STUDY__PM_TWO_LEVEL_OPEN,
                                    STUDY__PM_EXHAUSTIVE,       STUDY__PM_GLOBAL};
#define NPLOT 6
static const study__pm abl_pm[] = {STUDY__PM_MEGATRON, STUDY__PM_INTER_ONLY,
                                   STUDY__PM_INTRA_ONLY, STUDY__PM_TWO_LEVEL, STUDY__PM_GLOBAL};
#define NMAIN 9
#define NABL 5
#define NKNOB (STUDY__PM_KNOB_LAST - STUDY__PM_KNOB_FIRST + 1)

static int is_abl(const study__pcase *k) { return !strcmp(k->set, "ablation"); }

double study__pillar_gap(const study__pcase *k, study__pm m) {
  const study__pres *g = &k->res[STUDY__PM_GLOBAL], *r = &k->res[m];
  if (k->na[0] || !g->ran || !r->ran || !r->found || !(g->bound_s > 0)) return -1;
  return (r->cm_s - g->bound_s) / g->bound_s;
}

/* The method's best over global's best (cost model); 0 when either has none. */
static double vs_global(const study__pcase *k, study__pm m) {
  const study__pres *g = &k->res[STUDY__PM_GLOBAL], *r = &k->res[m];
  if (k->na[0] || !g->found || !r->found) return 0;
  return r->cm_s / g->cm_s;
}

/* ---- the verdicts the robustness pass judges (study_pillar_robust.c) ------------------- */

const char *const study__verdict_text[STUDY__NVERDICT] = {
    "two-level (Alpa's defaults) within 1% of global",
    "two-level open within 1% of global",
    "the hierarchy (island = node) costs at most 1%",
    "the hierarchy (island = node) costs more than 5%",
    "the hierarchy (island = NVLink domain) costs at most 1%",
    "the nominal winner of Megatron and two-level stays the winner",
    "context parallelism is worth more than 1%",
    "expert parallelism is worth more than 1%",
    "ZeRO-2/3 is worth more than 1%",
    "interleaving is worth more than 1%",
    "per-stage recomputation is worth more than 1%",
    "non-uniform pipelines are worth more than 1%",
    "TP across nodes is worth more than 1%",
};

const char *const study__verdict_short[STUDY__NVERDICT] = {
    "Alpa <=1%", "open <=1%", "hierarchy <=1% (node)", "hierarchy >5% (node)",
    "hierarchy <=1% (domain)", "winner", "cp >1%", "ep >1%", "ZeRO-2/3 >1%",
    "interleaving >1%", "per-stage recompute >1%", "non-uniform >1%", "TP across nodes >1%",
};

int study__verdict(const study__pcase *k, int v, double *frac) {
  const study__robust *r = &k->rob;
  *frac = 0;
  if (!r->draws || r->nominal[v] < 0 || !r->judged[v]) return -1;
  *frac = (double)r->held[v] / r->judged[v];
  double agree = r->nominal[v] ? *frac : 1 - *frac;
  return agree >= 0.9 ? r->nominal[v] : 2;
}

/* ---- the terminal --------------------------------------------------------------------- */

/* "yes (97%)", "no (3%)", "unresolved (56%)": the nominal verdict and the share of draws in
 * which it holds; "sim: no" where the simulated times decide it the other way. */
static void verdict_cell(const study__pcase *k, int v, char *buf, size_t n) {
  double frac;
  int s = study__verdict(k, v, &frac);
  static const char *const word[3] = {"no", "yes", "unresolved"};
  if (s < 0) {
    snprintf(buf, n, "-");
    return;
  }
  snprintf(buf, n, "%s (%.0f%%)%s", word[s], 100 * frac,
           k->rob.sim_flip[v] ? (k->rob.nominal[v] ? ", sim: no" : ", sim: yes") : "");
}

static void print_verdicts(FILE *f, const study__pcase *k) {
  if (!k->rob.draws) return;
  fprintf(f, "  verdicts under %d draws of the parameters (share of draws in which each holds):",
          k->rob.draws);
  for (int v = 0; v < STUDY__NVERDICT; v++) {
    char c[64];
    verdict_cell(k, v, c, sizeof c);
    if (strcmp(c, "-")) fprintf(f, "\n    %-58s %s", study__verdict_text[v], c);
  }
  if (k->rob.winner >= 0)
    fprintf(f, "\n    (the nominal winner: %s)", study__pm_name[k->rob.winner]);
  fputc('\n', f);
}

/* A knob's worth on case k: global without it over global (0 when either has no plan or the
 * rung did not run). */
static double knob_worth(const study__pcase *k, study__pm m) {
  double v = vs_global(k, m);
  return k->res[m].ran && v > 0 ? v - 1 : 0;
}

/* "context parallelism +2.1%, ZeRO-2/3 +0.0%, ..." for the knob rungs that ran on case k;
 * 0 when none did. */
static int knob_line(const study__pcase *k, char *buf, size_t n) {
  size_t w = 0;
  buf[0] = '\0';
  for (int m = STUDY__PM_KNOB_FIRST; m <= STUDY__PM_KNOB_LAST && w < n; m++) {
    const study__pres *r = &k->res[m];
    if (!r->ran) continue;
    if (r->found)
      w += (size_t)snprintf(buf + w, n - w, "%s%s %+.1f%%", w ? ", " : "",
                            study__pm_knob((study__pm)m), 100 * knob_worth(k, (study__pm)m));
    else
      w += (size_t)snprintf(buf + w, n - w, "%s%s: no plan without it", w ? ", " : "",
                            study__pm_knob((study__pm)m));
  }
  return w > 0;
}

static void print_case(FILE *f, const study__pcase *k) {
  fprintf(f, "\n%s on %s, %d GPUs, global batch %d", k->model, k->fabric, k->gpus, k->gbs);
  if (k->na[0]) {
    fprintf(f, ": not on this fabric: %s\n", k->na);
    return;
  }
  const study__pres *g = &k->res[STUDY__PM_GLOBAL];
  if (g->bound_s > 0)
    fprintf(f, "; global's lower bound %.4f s (gap %.2f%%%s)", g->bound_s, 100 * g->gap,
            g->complete ? "" : ", stopped early: the time limit or the enumeration cap");
  fprintf(f, "\n  %-22s %10s %10s %6s %9s %11s %9s\n", "method", "iter s", "sim s", "MFU",
          "vs bound", "evaluations", "wall s");
  study__pm pms[STUDY__PM_N];
  int npm = is_abl(k) ? NABL : NMAIN;
  memcpy(pms, is_abl(k) ? abl_pm : main_pm, (size_t)npm * sizeof *pms);
  for (int m = STUDY__PM_KNOB_FIRST; !is_abl(k) && m <= STUDY__PM_KNOB_LAST; m++)
    pms[npm++] = (study__pm)m; /* global with one knob removed */
  for (int i = 0; i < npm; i++) {
    const study__pres *r = &k->res[pms[i]];
    if (!r->ran) continue;
    if (!r->found) {
      fprintf(f, "  %-22s no feasible plan: %.120s\n", study__pm_name[pms[i]], r->why);
      continue;
    }
    double gap = study__pillar_gap(k, pms[i]);
    char vs[24] = "-";
    if (gap >= 0) snprintf(vs, sizeof vs, "+%.2f%%", 100 * gap);
    char sim[24] = "-"; /* not simulated (above --sim-max-gpus, or stopped) */
    if (r->sim_s > 0) snprintf(sim, sizeof sim, "%.4f", r->sim_s);
    fprintf(f, "  %-22s %10.4f %10s %5.1f%% %9s %11lld %9.2f%s%s\n", study__pm_name[pms[i]],
            r->cm_s, sim, 100 * r->mfu, vs, r->evaluations, r->wall_s,
            r->resumed ? "  (stored)" : "",
            r->sim_stopped ? "  (a simulation stopped by --sim-time-limit)" : "");
  }
  if (g->found && g->traits[0]) fprintf(f, "  global's best: %s\n", g->traits);
  char w[512];
  if (knob_line(k, w, sizeof w)) fprintf(f, "  each knob's worth (global without it): %s\n", w);
  print_verdicts(f, k);
}

/* ---- the conclusion, per fabric --------------------------------------------------------- */

/* How one two-level variant did on one fabric. */
typedef struct variant_sum {
  int within, certified;   /* within 1% of global's best; of global's lower bound */
  int ran;                 /* cases it ran in (of the fabric's compared) */
  double gaps[64];         /* the gaps to global's best, for the median (the first 64) */
  int ngaps;
  int none;                /* no feasible plan where global found one */
  double max_gap;          /* the largest gap to global's best (time / global's - 1) */
  char max_case[128];      /* its case */
  char traits[512];        /* what global's best does there that two-level cannot */
} variant_sum;

static const study__pm variants[] = {STUDY__PM_TWO_LEVEL, STUDY__PM_TWO_LEVEL_DOMAIN,
                                     STUDY__PM_TWO_LEVEL_OPEN, STUDY__PM_SPACE_NODE,
                                     STUDY__PM_SPACE_DOMAIN, STUDY__PM_TWO_LEVEL_ALL};
#define NVAR 6
#define VAR_OPEN 2  /* the two-level algorithm without Alpa's defaults */
#define VAR_SPACE 3 /* 3, 4: global in the two-level space (the hierarchy alone) */
#define VAR_ALL 5   /* Alpa's defaults with logical meshes "all" */
static const char *const variant_text[NVAR] = {
    "Alpa's defaults (island = node)", "Alpa's defaults, island = NVLink domain",
    "open (no Alpa defaults)", "two-level space, island = node (global restricted)",
    "two-level space, island = NVLink domain (global restricted)",
    "Alpa's defaults, logical meshes \"all\" (its GPT suite)"};

typedef struct fabric_sum {
  char fabric[64];
  int compared;            /* cases where global found a plan (and so a bound) */
  int limited;             /* ... of them where global stopped early */
  variant_sum v[NVAR];
  double algo[64];         /* two-level open over the two-level space's best (island = node) */
  int nalgo;
  double alpa[64];         /* two-level with Alpa's defaults over two-level open */
  int nalpa;
  double knob[NKNOB][64];  /* global without the knob over global */
  int nknob[NKNOB];
  double knob_max[NKNOB];
  char knob_case[NKNOB][128];
  int robust[STUDY__NVERDICT][2]; /* cases where the verdict is robustly false, true */
  int unresolved[STUDY__NVERDICT];
  int sim_flips;                  /* verdicts the simulator decides the other way */
  char open_cases[1024];          /* the unresolved ones: "case: verdict (x%)" */
} fabric_sum;

/* The traits without the recompute one (what the open variant could have done too). */
static void split_traits(const char *t, int open, char *out, size_t n) {
  snprintf(out, n, "%s", t);
  if (!open) return;
  char *r = strstr(out, STUDY__TRAIT_RECOMPUTE);
  if (!r) return;
  if (r >= out + 2 && r[-2] == ';') r -= 2;
  *r = '\0';
}

void study__case_label(const study__pcase *cases, int n, const study__pcase *k, char *buf,
                       size_t len) {
  int other = 0;
  for (int i = 0; i < n && !other; i++)
    other = cases[i].gpus == k->gpus && cases[i].gbs != k->gbs && !strcmp(cases[i].model, k->model);
  if (other)
    snprintf(buf, len, "%s x%d gbs %d", k->model, k->gpus, k->gbs);
  else
    snprintf(buf, len, "%s x%d", k->model, k->gpus);
}

static void add_case(const study__pillar_run *r, fabric_sum *s, const study__pcase *k) {
  char lab[160];
  study__case_label(r->cases, r->ncases, k, lab, sizeof lab);
  s->compared++;
  s->limited += !k->res[STUDY__PM_GLOBAL].complete;
  const study__pres *open = &k->res[STUDY__PM_TWO_LEVEL_OPEN], *sp = &k->res[STUDY__PM_SPACE_NODE];
  if (open->found && sp->found && s->nalgo < 64) s->algo[s->nalgo++] = open->cm_s / sp->cm_s - 1;
  const study__pres *alpa = &k->res[STUDY__PM_TWO_LEVEL];
  if (open->found && alpa->found && s->nalpa < 64) s->alpa[s->nalpa++] = alpa->cm_s / open->cm_s - 1;
  for (int v = 0; v < STUDY__NVERDICT; v++) {
    double frac;
    int st = study__verdict(k, v, &frac);
    s->sim_flips += st >= 0 && k->rob.sim_flip[v];
    if (st == 0 || st == 1) s->robust[v][st]++;
    if (st != 2) continue;
    s->unresolved[v]++;
    size_t w = strlen(s->open_cases);
    if (w + 2 < sizeof s->open_cases)
      snprintf(s->open_cases + w, sizeof s->open_cases - w, "%s%s: %s (%.0f%%)", w ? "; " : "",
               lab, study__verdict_text[v], 100 * frac);
  }
  for (int j = 0; j < NKNOB; j++) {
    study__pm m = (study__pm)(STUDY__PM_KNOB_FIRST + j);
    if (!k->res[m].ran || !k->res[m].found || s->nknob[j] >= 64) continue;
    double w = knob_worth(k, m);
    s->knob[j][s->nknob[j]++] = w;
    if (s->nknob[j] == 1 || w > s->knob_max[j]) {
      s->knob_max[j] = w;
      snprintf(s->knob_case[j], sizeof s->knob_case[j], "%.100s", lab);
    }
  }
  for (int v = 0; v < NVAR; v++) {
    double g = study__pillar_gap(k, variants[v]);
    variant_sum *x = &s->v[v];
    x->ran += k->res[variants[v]].ran;
    if (g < 0) {
      x->none += k->res[variants[v]].ran && !k->res[variants[v]].found;
      continue;
    }
    double vs = vs_global(k, variants[v]) - 1;
    if (x->ngaps < 64) x->gaps[x->ngaps++] = vs;
    x->within += vs <= 0.01;
    x->certified += g <= 0.01;
    if (vs > x->max_gap) {
      x->max_gap = vs;
      snprintf(x->max_case, sizeof x->max_case, "%.100s", lab);
      if (v < VAR_SPACE || v == VAR_ALL) /* the space rungs hold global's knobs: no trait
                                             explains them */
        split_traits(k->res[STUDY__PM_GLOBAL].traits, v == VAR_OPEN, x->traits,
                     sizeof x->traits);
    }
  }
}

static int summarise(const study__pillar_run *r, fabric_sum *fs, int max) {
  int n = 0;
  for (int i = 0; i < r->ncases; i++) {
    const study__pcase *k = &r->cases[i];
    if (is_abl(k) || k->na[0] || study__pillar_gap(k, STUDY__PM_GLOBAL) < 0) continue;
    int j = 0;
    while (j < n && strcmp(fs[j].fabric, k->fabric)) j++;
    if (j == n) {
      if (n == max) continue;
      memset(&fs[n], 0, sizeof fs[n]);
      snprintf(fs[n++].fabric, sizeof fs[0].fabric, "%s", k->fabric);
    }
    add_case(r, &fs[j], k);
  }
  return n;
}

static int cmp_dbl(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(const double *v, int n) {
  double s[64];
  memcpy(s, v, (size_t)n * sizeof *s);
  qsort(s, (size_t)n, sizeof *s, cmp_dbl);
  return n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
}

/* One fabric's sentence, from the numbers only: the price of the hierarchy (global restricted
 * to the two-level space over global, per island), and how far two-level's algorithm (open)
 * stays above the two-level space's optimum. */
static void write_fabric_sentence(FILE *f, const fabric_sum *s) {
  static const char *const island[2] = {"node", "NVLink domain"};
  fprintf(f, "- **%s**: the hierarchy itself (global restricted to the two-level space) costs",
          s->fabric);
  for (int j = 0; j < 2; j++) {
    const variant_sum *x = &s->v[VAR_SPACE + j];
    if (!x->ngaps) {
      fprintf(f, "%s nothing with island = %s (one island holds every GPU, or no plan)",
              j ? ";" : "", island[j]);
      continue;
    }
    fprintf(f, "%s a median %+.1f%% and at most %+.1f%%%s%s%s with island = %s (within 1%% of "
               "global's best in %d of %d cases, certified by its bound in %d)",
            j ? ";" : "", 100 * median(x->gaps, x->ngaps), 100 * fmax(x->max_gap, 0),
            x->max_gap > 0 ? " (" : "", x->max_gap > 0 ? x->max_case : "",
            x->max_gap > 0 ? ")" : "", island[j], x->within, x->ran, x->certified);
  }
  if (s->nalgo)
    fprintf(f, ". Two-level's algorithm (open, with its narrower knobs: no cp, ep or "
               "interleaving, ZeRO 2/3 only on one stage) trails the two-level space's optimum (island = node) by a "
               "median %+.1f%%", 100 * median(s->algo, s->nalgo));
  if (s->limited) fprintf(f, " (global stopped early in %d: its bound is looser there)", s->limited);
  if (s->nalpa)
    fprintf(f, "; Alpa's defaults cost a further median %+.1f%% over the open algorithm",
            100 * median(s->alpa, s->nalpa));
  int any = 0;
  for (int j = 0; j < NKNOB; j++) {
    if (!s->nknob[j]) continue;
    fprintf(f, "%s %s %+.1f%%", any ? "," : ". Removed from global, each knob costs a median of",
            study__pm_knob((study__pm)(STUDY__PM_KNOB_FIRST + j)),
            100 * median(s->knob[j], s->nknob[j]));
    if (s->knob_max[j] >= 0.0005) /* the largest, with its case, where it is not nothing */
      fprintf(f, " (at most %+.1f%%, %s)", 100 * s->knob_max[j], s->knob_case[j]);
    any = 1;
  }
  fputs(".\n", f);
}

/* Per fabric, the verdicts that hold in >= 90% of the draws (each with its cases) and the
 * unresolved ones, named. */
static void write_robust_sentences(FILE *f, const study__pillar_run *r, const fabric_sum *fs,
                                   int n) {
  fprintf(f, "Verdicts under %d draws of the cost-model parameters (%s): a verdict is robust "
             "where the nominal one holds in at least 90%% of the draws, unresolved otherwise "
             "([Robustness](#robustness) has every case).\n\n",
          r->draws, r->posterior ? "a calibration's posterior on its cluster, each parameter's "
                                   "error band elsewhere" : "each parameter's error band");
  static const char *const head[2] = {". Robustly false:", "- **%s**: robustly true:"};
  for (int i = 0; i < n; i++) {
    const fabric_sum *s = &fs[i];
    for (int y = 1; y >= 0; y--) {
      fprintf(f, head[y], s->fabric);
      int any = 0;
      for (int v = 0; v < STUDY__NVERDICT; v++)
        if (s->robust[v][y]) {
          fprintf(f, "%s %s (%d of %d)", any ? ";" : "", study__verdict_text[v], s->robust[v][y],
                  s->compared);
          any = 1;
        }
      if (!any) fputs(" none", f);
    }
    fprintf(f, ". Unresolved: %s", s->open_cases[0] ? s->open_cases : "none");
    if (s->sim_flips)
      fprintf(f, ". The simulator decides %d verdict%s the other way (marked \"sim\" below)",
              s->sim_flips, s->sim_flips == 1 ? "" : "s");
    fputs(".\n", f);
  }
  fputc('\n', f);
}

/* The conclusion: per fabric, a row per two-level variant (how often it is within 1% of
 * global's best and certified within 1% of the optimum, its largest gap and what global's
 * best does there), then one sentence on the split itself (the open variant). */
static void write_conclusion(FILE *f, const study__pillar_run *r) {
  fabric_sum fs[16];
  int n = summarise(r, fs, 16);
  fprintf(f, "## Conclusion\n\n");
  if (!n) {
    fprintf(f, "No case had both a two-level and a global plan to compare.\n\n");
    return;
  }
  fprintf(f, "\"Within 1%%\": two-level's best plan is at most 1%% slower than global's best; "
             "\"certified\": at most 1%% above global's lower bound, so within 1%% of the best "
             "plan of global's space.\n\n"
             "| fabric | two-level | within 1%% | certified | no plan | largest gap | its case: "
             "what global's best does |\n|---|---|--:|--:|--:|--:|---|\n");
  for (int i = 0; i < n; i++) {
    const fabric_sum *s = &fs[i];
    for (int v = 0; v < NVAR; v++) {
      const variant_sum *x = &s->v[v];
      if (v == 0)
        fprintf(f, "| **%s** (%d case%s) ", s->fabric, s->compared, s->compared == 1 ? "" : "s");
      else
        fputs("| ", f);
      fprintf(f, "| %s | %d of %d | %d of %d | %d |", variant_text[v], x->within, x->ran,
              x->certified, x->ran, x->none);
      if (x->max_gap > 0)
        fprintf(f, " +%.1f%% | %s%s%s |\n", 100 * x->max_gap, x->max_case,
                x->traits[0] ? ": " : "", x->traits);
      else
        fputs(" - | - |\n", f);
    }
  }
  fputc('\n', f);
  for (int i = 0; i < n; i++) write_fabric_sentence(f, &fs[i]);
  fputc('\n', f);
  if (r->draws) write_robust_sentences(f, r, fs, n);
}

/* ---- CSV and markdown --------------------------------------------------------------------- */

static int write_csv(const study__pillar_run *r, const char *path, pp_err *err) {
  FILE *f = fopen(path, "w");
  if (!f) return pp_err_set(err, PP_IO, "%s: cannot write: %s", path, strerror(errno));
  fprintf(f, "set,fabric,model,gpus,gbs,method,found,iter_cm_s,iter_sim_s,sim_stopped,mfu,tflops_per_gpu,"
             "mem_gib,lower_bound_s,gap_to_bound_pct,vs_global_pct,search_wall_s,evaluations,"
             "space,complete,search_run_id,plan,traits,why\n");
  for (int i = 0; i < r->ncases; i++) {
    const study__pcase *k = &r->cases[i];
    for (int pm = 0; pm < STUDY__PM_N; pm++) {
      const study__pres *x = &k->res[pm];
      if (!x->ran && !(k->na[0] && pm == STUDY__PM_GLOBAL)) continue;
      fprintf(f, "%s,%s,", k->set, k->fabric);
      study__csv_field(f, k->model);
      fprintf(f, ",%d,%d,%s,%d,", k->gpus, k->gbs, study__pm_name[pm], x->found);
      double gap = study__pillar_gap(k, (study__pm)pm), vs = vs_global(k, (study__pm)pm);
      if (x->found) {
        fprintf(f, "%.6g,", x->cm_s);
        if (x->sim_s > 0) fprintf(f, "%.6g", x->sim_s); /* empty: not simulated */
        fprintf(f, ",%d,%.4f,%.2f,%.2f,", x->sim_stopped, x->mfu, x->tflops, x->mem_gib);
      } else
        fputs(",,,,,,", f);
      if (k->res[STUDY__PM_GLOBAL].bound_s > 0)
        fprintf(f, "%.6g,", k->res[STUDY__PM_GLOBAL].bound_s);
      else
        fputc(',', f);
      if (gap >= 0) fprintf(f, "%.3f", 100 * gap);
      fputc(',', f);
      if (vs > 0) fprintf(f, "%.3f", 100 * (vs - 1));
      fprintf(f, ",%.3f,%lld,%.6g,%d,%lld,", x->wall_s, x->evaluations, x->space, x->complete,
              x->run_id);
      study__csv_field(f, x->plan);
      fputc(',', f);
      study__csv_field(f, x->traits);
      fputc(',', f);
      study__csv_field(f, k->na[0] ? k->na : x->why);
      fputc('\n', f);
    }
  }
  if (fclose(f)) return pp_err_set(err, PP_IO, "%s: cannot write: %s", path, strerror(errno));
  return PP_OK;
}

static void md_case_table(FILE *f, const study__pillar_run *r, int abl) {
  const study__pm *pms = abl ? abl_pm : main_pm;
  int npm = abl ? NABL : NMAIN;
  fprintf(f, "| fabric | model | GPUs | gbs |");
  for (int i = 0; i < npm; i++) fprintf(f, " %s |", study__pm_name[pms[i]]);
  fprintf(f, " global's bound (s) | what global's best does that two-level cannot |\n"
             "|---|---|--:|--:|");
  for (int i = 0; i < npm; i++) fprintf(f, "--:|");
  fprintf(f, "--:|---|\n");
  for (int i = 0; i < r->ncases; i++) {
    const study__pcase *k = &r->cases[i];
    if (is_abl(k) != abl) continue;
    fprintf(f, "| %s | %s | %d | %d |", k->fabric, k->model, k->gpus, k->gbs);
    if (k->na[0]) {
      for (int j = 0; j < npm; j++) fprintf(f, " n/a |");
      fprintf(f, " | %s |\n", k->na);
      continue;
    }
    for (int j = 0; j < npm; j++) {
      const study__pres *x = &k->res[pms[j]];
      double gap = study__pillar_gap(k, pms[j]);
      if (!x->ran) { /* a two-level-space rung where one island holds every GPU */
        fprintf(f, " - |");
        continue;
      }
      if (!x->found) {
        fprintf(f, " none |");
        continue;
      }
      fprintf(f, " %.3f s", x->cm_s);
      if (gap >= 0) fprintf(f, " (+%.1f%%)", 100 * gap);
      if (x->sim_s > 0) fprintf(f, "<br>sim %.3f s", x->sim_s);
      fprintf(f, " |");
    }
    const study__pres *g = &k->res[STUDY__PM_GLOBAL];
    fprintf(f, " %.3f | %s |\n", g->bound_s, g->traits[0] ? g->traits : "-");
  }
  fputc('\n', f);
}

/* Per case, what each knob is worth: global without it over global ("-": the rung did not
 * run, as expert parallelism on a dense model; "none": no plan without it). */
static void md_knob_table(FILE *f, const study__pillar_run *r) {
  fprintf(f, "## What each knob is worth\n\nGlobal searched again with one knob removed; "
             "each cell is that search's best over global's best (cost model), so +0.0%% means "
             "global's best does not need the knob or an equal plan without it exists.\n\n"
             "| fabric | model | GPUs |");
  for (int j = 0; j < NKNOB; j++)
    fprintf(f, " %s |", study__pm_knob((study__pm)(STUDY__PM_KNOB_FIRST + j)));
  fprintf(f, "\n|---|---|--:|");
  for (int j = 0; j < NKNOB; j++) fprintf(f, "--:|");
  fputc('\n', f);
  for (int i = 0; i < r->ncases; i++) {
    const study__pcase *k = &r->cases[i];
    if (is_abl(k) || k->na[0] || !k->res[STUDY__PM_GLOBAL].found) continue;
    fprintf(f, "| %s | %s | %d |", k->fabric, k->model, k->gpus);
    for (int j = 0; j < NKNOB; j++) {
      study__pm m = (study__pm)(STUDY__PM_KNOB_FIRST + j);
      if (!k->res[m].ran)
        fprintf(f, " - |");
      else if (!k->res[m].found)
        fprintf(f, " none |");
      else
        fprintf(f, " %+.1f%% |", 100 * knob_worth(k, m));
    }
    fputc('\n', f);
  }
  fputc('\n', f);
}

/* The case of the same model, GPUs and batch on fabric f (NULL: none with a global plan). */
static const study__pcase *twin(const study__pillar_run *r, const study__pcase *k,
                                const char *f) {
  for (int i = 0; i < r->ncases; i++) {
    const study__pcase *x = &r->cases[i];
    if (!strcmp(x->fabric, f) && !strcmp(x->model, k->model) && x->gpus == k->gpus &&
        x->gbs == k->gbs && !x->na[0] && x->res[STUDY__PM_GLOBAL].found)
      return x;
  }
  return NULL;
}

/* The best of two-level's runs (Alpa's defaults with either island, open) on a case; 0: none. */
static double best_two_level(const study__pcase *k) {
  static const study__pm tl[] = {STUDY__PM_TWO_LEVEL, STUDY__PM_TWO_LEVEL_DOMAIN,
                                 STUDY__PM_TWO_LEVEL_ALL, STUDY__PM_TWO_LEVEL_OPEN};
  double b = 0;
  for (int j = 0; j < 4; j++)
    if (k->res[tl[j]].ran && k->res[tl[j]].found && (b == 0 || k->res[tl[j]].cm_s < b))
      b = k->res[tl[j]].cm_s;
  return b;
}

static void cell_vs(FILE *f, double t, double ref) {
  if (t <= 0)
    fprintf(f, " - |");
  else if (ref > 0)
    fprintf(f, " %.3f s (%+.1f%%) |", t, 100 * (t / ref - 1));
  else
    fprintf(f, " %.3f s |", t);
}

/* What the NVLink domain is worth and whether two-level gets it: the same model, GPUs and
 * batch on 8-GPU domains (dgx-h100), the same H100s in 256-GPU domains (h100-nvl256) and
 * GB200 racks of 72; global's best and two-level's best on each, the pod's over DGX's. */
static void md_domain_table(FILE *f, const study__pillar_run *r) {
  int rows = 0;
  for (int i = 0; i < r->ncases; i++) {
    const study__pcase *k = &r->cases[i];
    if (strcmp(k->fabric, "h100-nvl256") || !twin(r, k, "h100-nvl256") || !twin(r, k, "dgx-h100"))
      continue;
    if (!rows++)
      fprintf(f, "## What the NVLink domain is worth, and whether two-level gets it\n\n"
                 "The same model, GPU count and batch on H100s in 8-GPU NVLink domains "
                 "(dgx-h100) and in 256-GPU domains (h100-nvl256), and on GB200 NVL72 racks "
                 "(other GPUs: for scale). Global's best and two-level's best (of Alpa's "
                 "defaults with either island or logical meshes \"all\", and open), cost "
                 "model; \"(+x%%)\" is the pod's "
                 "time over DGX's, so a negative figure is what the larger domain gains.\n\n"
                 "| model | GPUs | gbs | global, dgx-h100 | global, h100-nvl256 | global, "
                 "gb200-nvl72 | two-level, dgx-h100 | two-level, h100-nvl256 |\n"
                 "|---|--:|--:|--:|--:|--:|--:|--:|\n");
    const study__pcase *d = twin(r, k, "dgx-h100"), *g = twin(r, k, "gb200-nvl72");
    double gd = d->res[STUDY__PM_GLOBAL].cm_s, td = best_two_level(d);
    fprintf(f, "| %s | %d | %d |", k->model, k->gpus, k->gbs);
    cell_vs(f, gd, 0);
    cell_vs(f, k->res[STUDY__PM_GLOBAL].cm_s, gd);
    cell_vs(f, g ? g->res[STUDY__PM_GLOBAL].cm_s : 0, 0);
    cell_vs(f, td, 0);
    cell_vs(f, best_two_level(k), td);
    fputc('\n', f);
  }
  if (rows) fputc('\n', f);
}

/* Per case, each verdict: the nominal one, the share of draws in which it holds and what the
 * simulator says where it differs. */
static void md_robust_table(FILE *f, const study__pillar_run *r) {
  fprintf(f, "## Robustness\n\nEach case's rungs (their best 3 plans) re-scored under %d draws "
             "of the cost-model parameters; a cell is the verdict at the nominal parameters, "
             "\"unresolved\" where fewer than 90%% of the draws agree with it, and the share of "
             "draws in which it holds. \"sim\": the simulated best plans decide it the other "
             "way.\n\n| fabric | model | GPUs |", r->draws);
  for (int v = 0; v < STUDY__NVERDICT; v++) fprintf(f, " %s |", study__verdict_short[v]);
  fprintf(f, "\n|---|---|--:|");
  for (int v = 0; v < STUDY__NVERDICT; v++) fprintf(f, "---|");
  fputc('\n', f);
  for (int i = 0; i < r->ncases; i++) {
    const study__pcase *k = &r->cases[i];
    if (!k->rob.draws) continue;
    fprintf(f, "| %s | %s | %d |", k->fabric, k->model, k->gpus);
    for (int v = 0; v < STUDY__NVERDICT; v++) {
      char c[64];
      verdict_cell(k, v, c, sizeof c);
      if (v == STUDY__V_WINNER && k->rob.winner >= 0 && strcmp(c, "-"))
        fprintf(f, " %s: %s |", study__pm_name[k->rob.winner], c);
      else
        fprintf(f, " %s |", c);
    }
    fputc('\n', f);
  }
  fputc('\n', f);
}

static int write_md(const study__pillar_run *r, const char *path, int plots, pp_err *err) {
  FILE *f = fopen(path, "w");
  if (!f) return pp_err_set(err, PP_IO, "%s: cannot write: %s", path, strerror(errno));
  int nabl = 0, searches = 0, read_back = 0;
  double search_s = 0; /* the searches' wall time when they ran (stored with each case) */
  for (int i = 0; i < r->ncases; i++) {
    nabl += is_abl(&r->cases[i]);
    for (int pm = 0; pm < STUDY__PM_N; pm++) {
      const study__pres *x = &r->cases[i].res[pm];
      if (!x->ran || x->copied) continue;
      searches++, search_s += x->wall_s, read_back += x->resumed;
    }
  }
  fprintf(f, "# The pillar study: does Alpa's two-level split still find the best plan?\n\n"
             "`podplan study pillar%s` (%d cases, %d searches of %.0f s in all when they ran; "
             "the run that wrote this took %.0f s",
          r->quick ? " --quick" : "", r->ncases, searches, search_s, r->wall_s);
  if (read_back)
    fprintf(f, " and read %d of the searches back from the store", read_back);
  fprintf(f, "; every figure is in the store %s, table study_cases, with its search "
             "runs). Times are seconds per training iteration from the cost model; \"+x%%\" "
             "is a method's gap to global's lower bound, which no plan of global's space beats "
             "(global's space holds the uniform space, the two-level space of both islands and "
             "two-level's plans with global's own options; not what two-level with Alpa's "
             "defaults or island = domain may place outside its blocks). Two-level runs with "
             "Alpa's defaults (power-of-two sub-meshes of at most 4 nodes, every power of two "
             "where those cannot cover the cluster; full recompute, its ILP weights); "
             "\"two-level-domain\" makes the whole NVLink domain its fast island; "
             "\"two-level-all\" lets its logical meshes span the islands of a sub-mesh, as "
             "Alpa's GPT suite does (submesh_logical_shape_space \"all\"); "
             "\"two-level-space\" and \"two-level-space-domain\" are global restricted to the "
             "two-level space (islands of nodes, of NVLink domains): their gap to global is the "
             "price of the hierarchy; where the NVLink domain is the node, the domain rungs are "
             "the node rungs' searches. The \"global-\" rungs are global with one knob removed. "
             "Global stops at a gap of %.2f%% to its bound.",
          r->db, 100 * r->gap_target);
  int stopped = 0;
  for (int i = 0; i < r->ncases; i++)
    for (int pm = 0; pm < STUDY__PM_N; pm++) stopped += r->cases[i].res[pm].sim_stopped;
  if (r->simulate > 0) {
    fprintf(f, " The simulator re-scored each method's best %d on cases of ", r->simulate);
    if (r->sim_max_gpus > 0)
      fprintf(f, "at most %d GPUs", r->sim_max_gpus);
    else
      fprintf(f, "every size");
    fprintf(f, "; \"sim\" is the fastest of them simulated");
    if (r->sim_time_limit_s > 0)
      fprintf(f, " (%d simulations ran past %g s of wall time and were stopped: those plans "
                 "keep only their cost-model time)", stopped, r->sim_time_limit_s);
    fputc('.', f);
  }
  fputs("\n\n", f);
  write_conclusion(f, r);
  fprintf(f, "## Cases\n\n");
  md_case_table(f, r, 0);
  md_domain_table(f, r);
  md_knob_table(f, r);
  if (r->draws) md_robust_table(f, r);
  if (nabl) {
    fprintf(f, "## Alpa's ablation on the V100 cluster (p3.16xlarge: 8 V100 per node, 25 Gb/s "
               "between nodes)\n\nInter-op only: one GPU per pipeline stage; intra-op only: one "
               "stage over every GPU; two-level: both (Alpa).\n\n");
    md_case_table(f, r, 1);
  }
  if (plots) {
    fprintf(f, "## Plots\n\n![two-level's gap](pillar-gap.png)\n\n"
               "![two-level's gap without Alpa's defaults](pillar-gap-open.png)\n\n"
               "![search wall time](pillar-wall.png)\n\n");
    char seen[2048] = "";
    for (int i = 0; i < r->ncases; i++) {
      const study__pcase *k = &r->cases[i];
      if (is_abl(k) || strstr(seen, k->fabric)) continue;
      strncat(seen, k->fabric, sizeof seen - strlen(seen) - 2);
      strcat(seen, " ");
      fprintf(f, "![%s](pillar-time-%s.png)\n\n", k->fabric, k->fabric);
    }
    if (nabl) fprintf(f, "![Alpa's ablation](pillar-ablation.png)\n\n");
  }
  if (fclose(f)) return pp_err_set(err, PP_IO, "%s: cannot write: %s", path, strerror(errno));
  return PP_OK;
}

/* ---- plots ------------------------------------------------------------------------------ */

static int open_dat(const char *dir, const char *name, FILE **f, char *path, size_t n,
                    pp_err *err) {
  snprintf(path, n, "%s/%s", dir, name);
  if (!(*f = fopen(path, "w")))
    return pp_err_set(err, PP_IO, "%s: cannot write: %s", path, strerror(errno));
  return PP_OK;
}

/* Per fabric: each method's best over global's best, clustered by case. */
static int plot_times(const study__pillar_run *r, const char *dir, int *plots, pp_err *err) {
  char done[2048] = "";
  for (int i = 0; i < r->ncases; i++) {
    const study__pcase *k0 = &r->cases[i];
    if (is_abl(k0) || strstr(done, k0->fabric)) continue;
    strncat(done, k0->fabric, sizeof done - strlen(done) - 2);
    strcat(done, " ");
    char name[128], path[4096];
    snprintf(name, sizeof name, "pillar-time-%s.dat", k0->fabric);
    FILE *f;
    if (open_dat(dir, name, &f, path, sizeof path, err)) return err->code;
    fprintf(f, "# case megatron two-level two-level-domain two-level-open exhaustive global "
               "(over global)\n");
    int rows = 0;
    for (int j = i; j < r->ncases; j++) {
      const study__pcase *k = &r->cases[j];
      if (is_abl(k) || strcmp(k->fabric, k0->fabric)) continue;
      char lab[160];
      study__case_label(r->cases, r->ncases, k, lab, sizeof lab);
      fprintf(f, "\"%s\"", lab); /* one line: the tics are rotated */
      for (int m = 0; m < NPLOT; m++) {
        double v = vs_global(k, plot_pm[m]);
        if (v > 0) fprintf(f, " %.5f", v); else fputs(" NaN", f);
      }
      fputc('\n', f);
      rows++;
    }
    fclose(f);
    char body[12288], fab[64];
    study_plot_quote(k0->fabric, fab, sizeof fab);
    snprintf(body, sizeof body,
             "set title '%s: best iteration time of each method over global''s best (cost model)'\n"
             "set ylabel 'iteration time / global''s (1 = global)'\n"
             "set style data histogram\nset style histogram clustered gap 1\n"
             "set style fill solid 0.85 border -1\nset boxwidth 0.9\n"
             "set key outside right top vertical\nset grid ytics\nset yrange [0.95:*]\n"
             "set xtics nomirror rotate by 30 right font ',9'\nset bmargin 7\n"
             "set datafile missing 'NaN'\n"
             "plot '%s' using 2:xtic(1) title 'megatron' lc rgb '#7f7f7f', "
             "'' using 3 title 'two-level (node)' lc rgb '#d62728', "
             "'' using 4 title 'two-level (domain)' lc rgb '#ff9896', "
             "'' using 5 title 'two-level (open)' lc rgb '#ff7f0e', "
             "'' using 6 title 'exhaustive (uniform)' lc rgb '#1f77b4', "
             "'' using 7 title 'global' lc rgb '#2ca02c'\n",
             fab, path);
    snprintf(name, sizeof name, "pillar-time-%s", k0->fabric);
    if (study_plot(dir, name, rows > 6 ? 1400 : 1000, 600, body, err)) return err->code;
    *plots += 2;
  }
  return PP_OK;
}

/* Two-level's gap to global's best over models (rows) x fabric and scale (columns): with
 * Alpa's defaults (pillar-gap) or without them (pillar-gap-open). */
static int plot_gap(const study__pillar_run *r, const char *dir, study__pm pm, int *plots,
                    pp_err *err) {
  const char *name = pm == STUDY__PM_TWO_LEVEL_OPEN ? "pillar-gap-open" : "pillar-gap";
  const char *what = pm == STUDY__PM_TWO_LEVEL_OPEN ? "without Alpa''s defaults"
                                                    : "with Alpa''s defaults";
  char cols[32][96], rows[16][64];
  int nc = 0, nr = 0;
  for (int i = 0; i < r->ncases; i++) {
    const study__pcase *k = &r->cases[i];
    if (is_abl(k)) continue;
    char c[96];
    snprintf(c, sizeof c, "%s %d", k->fabric, k->gpus);
    int j = 0;
    while (j < nc && strcmp(cols[j], c)) j++;
    if (j == nc && nc < 32) memcpy(cols[nc++], c, sizeof c);
    j = 0;
    while (j < nr && strcmp(rows[j], k->model)) j++;
    if (j == nr && nr < 16) snprintf(rows[nr++], sizeof rows[0], "%s", k->model);
  }
  if (!nc) return PP_OK;
  char path[4096], dat[64];
  FILE *f;
  snprintf(dat, sizeof dat, "%s.dat", name);
  if (open_dat(dir, dat, &f, path, sizeof path, err)) return err->code;
  fprintf(f, "# column row gap_pct (%s, island = node, over global's best)\n",
          study__pm_name[pm]);
  for (int i = 0; i < r->ncases; i++) {
    const study__pcase *k = &r->cases[i];
    if (is_abl(k)) continue;
    char c[96];
    snprintf(c, sizeof c, "%s %d", k->fabric, k->gpus);
    int x = 0, y = 0;
    while (x < nc && strcmp(cols[x], c)) x++;
    while (y < nr && strcmp(rows[y], k->model)) y++;
    double g = vs_global(k, pm);
    if (g > 0) fprintf(f, "%d %d %.3f\n", x, y, 100 * (g - 1));
  }
  fclose(f);
  char body[8192];
  int b = snprintf(body, sizeof body,
                   "set title 'Two-level (%s, island = node) over global''s best (%%); "
                   "blank: no feasible plan'\n"
                   "set xrange [-0.5:%d.5]\nset yrange [-0.5:%d.5]\nset cblabel 'gap (%%)'\n"
                   "set palette defined (0 '#f7fbff', 5 '#fdd0a2', 20 '#f16913', 60 '#7f2704')\n"
                   "set cbrange [0:*]\nset xtics rotate by 35 right font ',9'\nset xtics (",
                   what, nc - 1, nr - 1);
  for (int i = 0; i < nc && b < (int)sizeof body - 200; i++) {
    char q[96];
    study_plot_quote(cols[i], q, sizeof q);
    b += snprintf(body + b, sizeof body - (size_t)b, "%s'%s' %d", i ? ", " : "", q, i);
  }
  b += snprintf(body + b, sizeof body - (size_t)b, ")\nset ytics (");
  for (int i = 0; i < nr && b < (int)sizeof body - 200; i++)
    b += snprintf(body + b, sizeof body - (size_t)b, "%s'%s' %d", i ? ", " : "", rows[i], i);
  snprintf(body + b, sizeof body - (size_t)b,
           ")\nset bmargin 6\nplot '%s' using 1:2:(0.5):(0.5):3 with boxxyerror fs solid 1.0 "
           "noborder fc palette notitle, "
           "'' using 1:2:(sprintf('%%.1f', $3)) with labels font ',9' notitle\n",
           path);
  if (study_plot(dir, name, nc > 8 ? 1400 : 900, 520, body, err)) return err->code;
  *plots += 2;
  return PP_OK;
}

/* Search wall time per method: one point per case, log scale. */
static int plot_wall(const study__pillar_run *r, const char *dir, int *plots, pp_err *err) {
  char path[4096];
  FILE *f;
  if (open_dat(dir, "pillar-wall.dat", &f, path, sizeof path, err)) return err->code;
  fprintf(f, "# method_index wall_s (one line per case that ran the method)\n");
  int n = 0;
  for (int m = 0; m < NPLOT; m++)
    for (int i = 0; i < r->ncases; i++) {
      const study__pres *x = &r->cases[i].res[plot_pm[m]];
      if (!x->ran || is_abl(&r->cases[i])) continue;
      /* a small spread so that equal times do not hide each other */
      double jitter = 0.3 * ((double)(i % 7) / 6.0 - 0.5);
      fprintf(f, "%.3f %.6g\n", m + jitter, x->wall_s > 1e-4 ? x->wall_s : 1e-4);
      n++;
    }
  fclose(f);
  if (!n) return PP_OK;
  char body[8192];
  snprintf(body, sizeof body,
           "set title 'Search wall time per method (one point per case)'\n"
           "set ylabel 'wall time (s)'\nset logscale y\nset format y '10^{%%L}'\nset grid ytics\n"
           "set xrange [-0.6:5.6]\n"
           "set xtics (\"megatron\" 0, \"two-level\\n(node)\" 1, \"two-level\\n(domain)\" 2, "
           "\"two-level\\n(open)\" 3, \"exhaustive\" 4, \"global\" 5)\nset bmargin 4\n"
           "plot '%s' using 1:2 with points pt 7 ps 0.8 lc rgb '#1f77b4' notitle\n",
           path);
  if (study_plot(dir, "pillar-wall", 900, 520, body, err)) return err->code;
  *plots += 2;
  return PP_OK;
}

/* Alpa's ablation: aggregate model PFLOP/s against GPUs, per method. */
static int plot_ablation(const study__pillar_run *r, const char *dir, int *plots, pp_err *err) {
  char path[4096];
  FILE *f;
  if (open_dat(dir, "pillar-ablation.dat", &f, path, sizeof path, err)) return err->code;
  fprintf(f, "# gpus megatron inter-op-only intra-op-only two-level global (PFLOP/s, model)\n");
  int n = 0;
  for (int i = 0; i < r->ncases; i++) {
    const study__pcase *k = &r->cases[i];
    if (!is_abl(k) || k->na[0]) continue;
    fprintf(f, "%d", k->gpus);
    for (int m = 0; m < NABL; m++) {
      const study__pres *x = &k->res[abl_pm[m]];
      if (x->found) fprintf(f, " %.5f", x->tflops * k->gpus / 1000); else fputs(" NaN", f);
    }
    fputc('\n', f);
    n++;
  }
  fclose(f);
  if (!n) return PP_OK;
  char body[8192];
  snprintf(body, sizeof body,
           "set title 'Alpa''s ablation on the V100 cluster (GPT, 25 Gb/s between nodes)'\n"
           "set xlabel 'GPUs'\nset ylabel 'model PFLOP/s (cost model)'\nset logscale x 2\n"
           "set xrange [6:84]\nset xtics (8, 16, 32, 64)\nset grid\nset key top left\n"
           /* NaN (no plan) read as an undefined value breaks the method's line there; with
            * `set datafile missing` gnuplot would draw it across the gap */
           "plot '%s' using 1:2 with linespoints pt 5 lc rgb '#7f7f7f' title 'megatron', "
           "'' using 1:3 with linespoints pt 9 lc rgb '#9467bd' title 'inter-op only', "
           "'' using 1:4 with linespoints pt 11 lc rgb '#ff7f0e' title 'intra-op only', "
           "'' using 1:5 with linespoints pt 7 lc rgb '#d62728' title 'two-level (both)', "
           "'' using 1:6 with linespoints pt 6 dt 2 lc rgb '#2ca02c' title 'global'\n",
           path);
  if (study_plot(dir, "pillar-ablation", 900, 560, body, err)) return err->code;
  *plots += 2;
  return PP_OK;
}

int study__pillar_write(const study__pillar_run *r, const char *out_dir, FILE *out, int *plots,
                        pp_err *err) {
  *plots = 0;
  for (int i = 0; i < r->ncases; i++) print_case(out, &r->cases[i]);
  fputc('\n', out);
  fabric_sum fs[16];
  int n = summarise(r, fs, 16);
  if (n)
    fprintf(out, "within 1%% of global's best (certified by the bound), Nx: no feasible plan in "
                 "N cases; the largest gap to global's best, per fabric (two-level: Alpa's "
                 "defaults, island = domain, open; then global in the two-level space, island "
                 "= node and = domain: the price of the hierarchy; last, Alpa's defaults with "
                 "logical meshes \"all\"):\n"
                 "%-14s %6s %22s %22s %22s %22s %22s %22s\n", "fabric", "cases", "Alpa defaults",
            "island = domain", "open", "space (node)", "space (domain)", "logical all");
  for (int i = 0; i < n; i++) {
    fprintf(out, "%-14s %6d", fs[i].fabric, fs[i].compared);
    for (int v = 0; v < NVAR; v++) {
      char c[48];
      if (fs[i].v[v].ran)
        snprintf(c, sizeof c, "%d (%d) %dx, +%.1f%%", fs[i].v[v].within, fs[i].v[v].certified,
                 fs[i].v[v].none, 100 * fs[i].v[v].max_gap);
      else
        snprintf(c, sizeof c, "-"); /* not run: one island holds every GPU */
      fprintf(out, " %22s", c);
    }
    fputc('\n', out);
  }
  if (n) {
    fprintf(out, "\neach knob's worth, per fabric: median (largest) of global without it over "
                 "global\n%-14s", "fabric");
    for (int j = 0; j < NKNOB; j++)
      fprintf(out, " %16s", study__pm_name[STUDY__PM_KNOB_FIRST + j] + 7); /* "global-" */
    fputc('\n', out);
  }
  for (int i = 0; i < n; i++) {
    fprintf(out, "%-14s", fs[i].fabric);
    for (int j = 0; j < NKNOB; j++) {
      char c[40] = "-";
      if (fs[i].nknob[j])
        snprintf(c, sizeof c, "%+.1f%% (%+.1f%%)", 100 * median(fs[i].knob[j], fs[i].nknob[j]),
                 100 * fs[i].knob_max[j]);
      fprintf(out, " %16s", c);
    }
    fputc('\n', out);
  }
  if (!out_dir) return PP_OK;
  if (pp_mkdirs(out_dir, err)) return err->code;
  char path[4096];
  snprintf(path, sizeof path, "%s/pillar.csv", out_dir);
  if (write_csv(r, path, err)) return err->code;
  if (plot_times(r, out_dir, plots, err) ||
      plot_gap(r, out_dir, STUDY__PM_TWO_LEVEL, plots, err) ||
      plot_gap(r, out_dir, STUDY__PM_TWO_LEVEL_OPEN, plots, err) ||
      plot_wall(r, out_dir, plots, err) || plot_ablation(r, out_dir, plots, err))
    return err->code;
  snprintf(path, sizeof path, "%s/pillar.md", out_dir);
  if (write_md(r, path, *plots, err)) return err->code;
  fprintf(out, "wrote %s/pillar.csv, %s/pillar.md and %d plot files\n", out_dir, out_dir, *plots);
  return PP_OK;
}
