/* What a command stores, each in one transaction on a file opened and closed here: a scored
 * plan with its specs and measurements (store_save), specs alone (store_save_specs), batches
 * of imported measurements (store_import_measurements), a calibration with its cluster
 * (store_save_calibration). A failure rolls back, so the file is
 * as it was; the commands hold no transaction logic of their own. */
#include "store_int.h"

/* Opens path and begins the transaction; *s is NULL when opening failed. */
static int open_tx(const char *path, store **s, pp_err *err) {
  int rc = store_open(path, NULL, s, err);
  if (!rc) rc = store_begin(*s, err);
  return rc;
}

/* Commits when everything before succeeded; closing rolls back what was not committed. */
static int close_tx(store *s, int rc, pp_err *err) {
  if (!rc) rc = store_commit(s, err);
  store_close(s);
  return rc;
}

int store_save(const char *path, const spec_model *m, const spec_cluster *c, const spec_plan *p,
               store_score *sc, store_measurement *ms, size_t n, size_t *added, pp_err *err) {
  store *s = NULL;
  int64_t cid = 0;
  if (added) *added = 0;
  int rc = open_tx(path, &s, err);
  if (!rc && c) rc = store_put_cluster(s, c, &cid, err);
  if (!rc && sc) {
    sc->cluster_id = cid;
    rc = store_put_model(s, m, &sc->model_id, err);
    if (!rc) rc = store_put_plan(s, p, &sc->plan_id, err);
    if (!rc) rc = store_put_score(s, sc, NULL, err);
  }
  for (size_t i = 0; i < n; i++) ms[i].cluster_id = cid;
  if (!rc && n) rc = store_put_measurements(s, ms, n, added, err);
  return close_tx(s, rc, err);
}

int store_save_specs(const char *path, const spec_model *models, size_t nm,
                     const spec_cluster *clusters, size_t nc, const spec_plan *p,
                     int64_t *model_ids, int64_t *cluster_ids, int64_t *plan_id, pp_err *err) {
  store *s = NULL;
  int64_t id = 0;
  int rc = open_tx(path, &s, err);
  for (size_t i = 0; !rc && i < nm; i++) {
    rc = store_put_model(s, &models[i], &id, err);
    if (model_ids) model_ids[i] = id;
  }
  for (size_t i = 0; !rc && i < nc; i++) {
    rc = store_put_cluster(s, &clusters[i], &id, err);
    if (cluster_ids) cluster_ids[i] = id;
  }
  if (!rc && p) rc = store_put_plan(s, p, plan_id ? plan_id : &id, err);
  return close_tx(s, rc, err);
}

int store_import_measurements(const char *path, const spec_cluster *c, store_batch *b,
                              size_t nb, pp_err *err) {
  store *s = NULL;
  int64_t cid = 0;
  int rc = open_tx(path, &s, err);
  if (!rc && c) rc = store_put_cluster(s, c, &cid, err);
  for (size_t i = 0; !rc && i < nb; i++) {
    for (size_t k = 0; k < b[i].n; k++) b[i].ms[k].cluster_id = cid;
    b[i].added = 0;
    rc = store_put_measurements(s, b[i].ms, b[i].n, &b[i].added, err);
  }
  return close_tx(s, rc, err);
}

int store_save_calibration(const char *path, const spec_cluster *c, store_calibration *cal,
                           pp_err *err) {
  store *s = NULL;
  int rc = open_tx(path, &s, err);
  if (!rc) rc = store_put_cluster(s, c, &cal->cluster_id, err);
  if (!rc) rc = store_put_calibration(s, cal, err);
  return close_tx(s, rc, err);
}
