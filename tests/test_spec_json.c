/* Malformed and impossible specs through the real CLI with a real database: each gives exit
 * 2 and one line naming the file, the field and the reason, and nothing is written. Valid
 * specs are stored once by hash. A cluster file equal to the dgx-h100 preset but for the
 * figures it leaves out gets the preset's hash and canonical JSON and lists those defaulted
 * fields. A database another process holds a write lock on: one line, exit 1, nothing
 * written. */
#include <sqlite3.h>
#include <stdlib.h>

#include "check.h"
#include "testutil.h"

#define MODEL_OK "{\"name\":\"m\",\"layers\":24,\"hidden\":1024,\"heads\":16,\"seq_len\":2048,\"vocab\":51200}"
#define NET_FT \
  "\"network\":{\"kind\":\"fat-tree\",\"rail_optimized\":true,\"nic_gbps\":400,\"nics_per_node\":8,\"latency_us\":2.7}"
#define NVL8 "\"nvlink\":{\"domain_gpus\":8,\"gbps_per_gpu\":450,\"latency_us\":0.6}"
#define GB_NVL(used) \
  "\"nvlink\":{\"domain_gpus\":72,\"gbps_per_gpu\":900,\"domain_gpus_used\":" used "}"
#define GB_NET "\"network\":{\"kind\":\"fat-tree\",\"rail_optimized\":true,\"nic_gbps\":400,\"nics_per_node\":4}"
#define CLUSTER_OK \
  "{\"name\":\"c\",\"gpu\":\"h100-sxm\",\"gpus\":64,\"gpus_per_node\":8," NVL8 "," NET_FT "}"

enum { GEN_NONE, GEN_NONUTF8, GEN_DEEP, GEN_BIGSTRING, GEN_MISSING_FILE };

typedef struct bad_case {
  const char *opt;     /* --model, --cluster or --plan */
  const char *text;    /* file content; NULL with gen */
  int gen;             /* generated content */
  const char *expect;  /* substring of the one-line error */
  const char *extra1, *extra2; /* extra arguments */
} bad_case;

static const bad_case cases[] = {
    /* models */
    {"--model", "{\"name\":\"m\",\"hidden\":1024,\"heads\":16,\"seq_len\":2048,\"vocab\":51200}", 0,
     "layers: missing"},
    {"--model", "{\"name\":\"m\",\"layers\":\"24\",\"hidden\":1024,\"heads\":16,\"seq_len\":2048,\"vocab\":51200}",
     0, "layers: must be an integer, got a string"},
    {"--model", "{\"name\":\"m\",\"layers\":24.5,\"hidden\":1024,\"heads\":16,\"seq_len\":2048,\"vocab\":51200}",
     0, "layers: must be an integer, got a real number"},
    {"--model", "{\"name\":\"m\",\"layers\":24,\"hidden\":-1024,\"heads\":16,\"seq_len\":2048,\"vocab\":51200}",
     0, "hidden: must be >= 1, got -1024"},
    {"--model", "{\"name\":\"m\",\"layers\":0,\"hidden\":1024,\"heads\":16,\"seq_len\":2048,\"vocab\":51200}",
     0, "layers: must be >= 1, got 0"},
    {"--model", "{\"name\":\"m\",\"layers\":1000000000000,\"hidden\":1024,\"heads\":16,\"seq_len\":2048,\"vocab\":51200}",
     0, "layers: must be <= 65536"},
    {"--model", "{\"name\":\"m\",\"layers\":24,\"hidden\":1000,\"heads\":16,\"seq_len\":2048,\"vocab\":51200}",
     0, "heads: hidden 1000 is not divisible by heads 16"},
    {"--model", "{\"name\":\"m\",\"layers\":24,\"hidden\":1024,\"heads\":16,\"kv_heads\":5,\"seq_len\":2048,\"vocab\":51200}",
     0, "kv_heads: must divide heads 16"},
    {"--model", "{\"name\":\"m\",\"layerz\":24,\"hidden\":1024,\"heads\":16,\"seq_len\":2048,\"vocab\":51200}",
     0, "layerz: unknown field (did you mean 'layers'?)"},
    {"--model", "{\"name\":\"m\",\"layers\":24,\"hidden\":1024,\"heads\":16,\"seq_len\":2048,\"vocab\":51200,\"ffn\":\"tanh\"}",
     0, "ffn: 'tanh' is not one of gelu, swiglu, relu"},
    {"--model", "{\"name\":\"m\",\"layers\":24,\"hidden\":1024,\"heads\":16,\"seq_len\":2048,\"vocab\":51200,\"ffn\":\"swiglu\"}",
     0, "ffn_hidden: missing (required with ffn swiglu)"},
    {"--model", "{\"name\":\"m\",\"layers\":24,\"hidden\":1024,\"heads\":16,\"seq_len\":2048,\"vocab\":51200,\"experts\":1}",
     0, "experts: 1 expert is a dense model"},
    {"--model", "{\"name\":\"m\",\"layers\":24,\"hidden\":1024,\"heads\":16,\"seq_len\":2048,\"vocab\":51200,\"experts\":8,\"top_k\":9}",
     0, "top_k: must be 1..experts (8)"},
    {"--model", "{\"name\":\"m\",\"layers\":24,\"hidden\":1024,\"heads\":16,\"seq_len\":2048,\"vocab\":51200,\"top_k\":2}",
     0, "top_k: only for MoE models"},
    {"--model", "{\"name\":\"m\",\"layers\":24,\"hidden\":1024,\"heads\":16,\"seq_len\":2048,\"vocab\":true}",
     0, "vocab: must be an integer, got a boolean"},
    {"--model", "{\"name\":\"m\",\"layers\":24,\"hidden\":1024,\"heads\":16,\"seq_len\":null,\"vocab\":51200}",
     0, "seq_len: must be an integer, got null"},
    {"--model", "{\"name\":\"my model\",\"layers\":24,\"hidden\":1024,\"heads\":16,\"seq_len\":2048,\"vocab\":51200}",
     0, "name: character 3 is not a letter"},
    {"--model", "{\"name\":\"m\",\"layers\":24,\"hidden\":1024,\"heads\":16,\"seq_len\":2048,\"vocab\":51200,\"dtype\":\"fp8\"}",
     0, "dtype: fp8 needs fp8 tensor cores, which a100-80g lacks", "--cluster", "dgx-a100"},
    {"--model", "{\"name\":\"m\",\"layers\":24,\"hidden\":1024,\"name\":\"n\",\"heads\":16,\"seq_len\":2048,\"vocab\":51200}",
     0, "malformed JSON: duplicate object key"},
    {"--model", "{\"name\":\"m\",\"layers\":24,\"hidden\":1024,\"heads\":16,\"seq_len\":20", 0,
     "malformed JSON"},
    {"--model", "[1, 2, 3]", 0, "top level: must be an object, got an array"},
    {"--model", "", 0, "empty file"},
    {"--model", NULL, GEN_NONUTF8, "malformed JSON: unable to decode byte 0xff"},
    {"--model", NULL, GEN_DEEP, "malformed JSON: maximum parsing depth reached"},
    {"--model", NULL, GEN_BIGSTRING, "name: too long (1048576 bytes, at most 63)"},
    {"--model", NULL, GEN_MISSING_FILE, "cannot open model spec: No such file or directory"},
    /* clusters */
    {"--cluster", "{\"name\":\"c\",\"gpu\":\"h300\",\"gpus\":64,\"gpus_per_node\":8," NVL8 "," NET_FT "}", 0,
     "gpu: unknown GPU 'h300'"},
    {"--cluster", "{\"name\":\"c\",\"gpu\":{\"name\":\"x\",\"hbm_gib\":80,\"hbm_tbps\":3},\"gpus\":64,\"gpus_per_node\":8," NVL8 "," NET_FT "}",
     0, "gpu.bf16_tflops: missing"},
    {"--cluster", "{\"name\":\"c\",\"gpu\":\"h100-sxm\",\"gpus\":64,\"gpus_per_node\":8," NVL8
                  ",\"network\":{\"kind\":\"fat-tree\",\"nic_gbps\":-400,\"nics_per_node\":8,\"latency_us\":2.7}}",
     0, "network.nic_gbps: must be > 0 Gbit/s, got -400"},
    {"--cluster", "{\"name\":\"c\",\"gpu\":\"h100-sxm\",\"gpus\":12,\"gpus_per_node\":8," NVL8 "," NET_FT "}", 0,
     "gpus: 12 is not a multiple of gpus_per_node 8"},
    {"--cluster", "{\"name\":\"c\",\"gpu\":\"h100-sxm\",\"gpus\":64,\"gpus_per_node\":8," NVL8 "}", 0,
     "network: kind none, but 64 GPUs span 8 NVLink domains of 8"},
    {"--cluster", "{\"name\":\"c\",\"gpu\":\"h100-sxm\",\"gpus\":64,\"gpus_per_node\":8," NVL8
                  ",\"network\":{\"kind\":\"fat_tree\"}}",
     0, "network.kind: must be one of none, fat-tree, torus"},
    {"--cluster", "{\"name\":\"t\",\"gpu\":\"tpu-v4\",\"gpus\":64,\"gpus_per_node\":4,"
                  "\"network\":{\"kind\":\"torus\",\"dims\":[4,4,8],\"link_gbps\":50,\"latency_us\":1}}",
     0, "network.dims: 4x4x8 = 128 chips, but gpus is 64"},
    {"--cluster", "{\"name\":\"c\",\"gpu\":\"h100-sxm\",\"gpus\":64,\"gpus_per_node\":8,"
                  "\"nvlink\":{\"domain_gpus\":8,\"gbps_per_gpu\":450,\"latency_us\":0.6,\"taper\":0.5}," NET_FT "}",
     0, "nvlink.taper: must be >= 1, got 0.5"},
    {"--cluster", "{\"name\":\"c\",\"gpu\":\"h100-sxm\",\"gpus\":64,\"gpus_per_node\":8," NVL8
                  ",\"network\":{\"kind\":\"fat-tree\",\"dims\":[4,4,4],\"nic_gbps\":400,\"nics_per_node\":8,\"latency_us\":2.7}}",
     0, "network.dims: does not apply to this kind"},
    {"--cluster", "{\"name\":\"c\",\"gpu\":\"h100-sxm\",\"gpus\":8192,\"gpus_per_node\":8," NVL8
                  ",\"network\":{\"kind\":\"fat-tree\",\"nic_gbps\":400,\"nics_per_node\":8,\"latency_us\":2.7,\"switch_radix\":16}}",
     0, "network.switch_radix: a 3-tier fat tree of radix-16 switches connects at most 1024 NICs"},
    {"--cluster", "{\"name\":\"c\",\"gpu\":\"h100-sxm\",\"gpus_per_node\":8," NVL8 "," NET_FT "}", 0,
     "gpus: missing (give it in the spec or with --gpus)"},
    /* NVLink partitions: whole nodes of one domain that divide the job; defaults exist only
     * for listed GPU and NIC generations */
    {"--cluster", "{\"name\":\"g\",\"gpu\":\"gb200\",\"gpus\":96,\"gpus_per_node\":4," GB_NVL("64")
                  "," GB_NET "}",
     0, "nvlink.domain_gpus_used: 96 GPUs exceed one NVLink domain partition of 64"},
    {"--cluster", "{\"name\":\"g\",\"gpu\":\"gb200\",\"gpus\":132,\"gpus_per_node\":4," GB_NVL("66")
                  "," GB_NET "}",
     0, "nvlink.domain_gpus_used: 66 does not split the 72-GPU domain into whole nodes of 4"},
    {"--cluster", "{\"name\":\"g\",\"gpu\":\"gb200\",\"gpus\":160,\"gpus_per_node\":4," GB_NVL("80")
                  "," GB_NET "}",
     0, "nvlink.domain_gpus_used: 80 is more than the 72 GPUs of the NVLink domain"},
    {"--cluster", "{\"name\":\"g\",\"gpu\":\"gb200\",\"gpus\":128,\"gpus_per_node\":4," GB_NVL("0")
                  "," GB_NET "}",
     0, "nvlink.domain_gpus_used: must be >= 1 GPUs, got 0"},
    {"--cluster", "{\"name\":\"v\",\"gpu\":{\"name\":\"mi300x\",\"bf16_tflops\":1307,"
                  "\"hbm_gib\":192,\"hbm_tbps\":5.3},\"gpus\":64,\"gpus_per_node\":8,"
                  "\"nvlink\":{\"domain_gpus\":8,\"gbps_per_gpu\":448}," NET_FT "}",
     0, "nvlink.latency_us: missing, and GPU 'mi300x' has no listed default"},
    {"--cluster", "{\"name\":\"c\",\"gpu\":\"h100-sxm\",\"gpus\":64,\"gpus_per_node\":8," NVL8
                  ",\"network\":{\"kind\":\"fat-tree\",\"nic_gbps\":56,\"nics_per_node\":8}}",
     0, "network.latency_us: missing, and 56 Gbit/s NICs have no listed default (NICs with "
        "defaults, Gbit/s: hdr 200, ndr 400, xdr 800, roce-400g 400, edr 100, opa-100 100"},
    {"--cluster", "{\"name\":\"c\",\"gpu\":\"h100-sxm\",\"gpus\":64,\"gpus_per_node\":8," NVL8
                  ",\"network\":{\"kind\":\"fat-tree\",\"nic\":\"hdr\",\"nic_gbps\":400,\"nics_per_node\":8}}",
     0, "network.nic_gbps: 400 Gbit/s, but network.nic hdr runs at 200"},
    {"--cluster", "{\"name\":\"c\",\"gpu\":\"h100-sxm\",\"gpus\":64,\"gpus_per_node\":8," NVL8
                  ",\"network\":{\"kind\":\"fat-tree\",\"nic\":\"ib-ndr\",\"nics_per_node\":8}}",
     0, "network.nic: 'ib-ndr' is not one of"},
    {"--cluster", "{\"name\":\"c\",\"gpu\":\"h100-sxm\",\"gpus\":64,\"gpus_per_node\":8," NVL8
                  ",\"network\":{\"kind\":\"fat-tree\",\"nics_per_node\":8}}",
     0, "network.nic_gbps: missing (give it, or network.nic"},
    /* plans given as JSON files (checked against gpt3-1.3b on dgx-h100, 64 GPUs) */
    {"--plan", "{\"tp\":\"8\",\"gbs\":64}", 0, "tp: must be an integer, got a string",
     "--model", "gpt3-1.3b"},
    {"--plan",
     "{\"gbs\":64,\"microbatches\":8,\"stages\":[{\"layers\":[0,12],\"gpus\":[0,1,2,3],\"dp\":4},"
     "{\"layers\":[12,24],\"gpus\":[3,4,5,6],\"dp\":4}]}",
     0, "stage 1: rule 'a GPU serves one stage': gpu 3 is used twice", "--model", "gpt3-1.3b"},
};
#define NCASES (sizeof cases / sizeof cases[0])

static long long count(const char *db, const char *table) {
  char sql[64];
  snprintf(sql, sizeof sql, "SELECT count(*) FROM %s", table);
  return tu_sql_int(db, sql);
}

static char *generate(int gen, size_t *len) {
  char *buf = NULL;
  if (gen == GEN_NONUTF8) {
    const char s[] = "{\"name\":\"m\xff\xfe\",\"layers\":24}";
    *len = sizeof s - 1;
    buf = malloc(*len);
    memcpy(buf, s, *len);
  } else if (gen == GEN_DEEP) {
    size_t depth = 5000;
    *len = 2 * depth + 16;
    buf = malloc(*len);
    size_t n = (size_t)sprintf(buf, "{\"name\":");
    for (size_t i = 0; i < depth; i++) buf[n++] = '[';
    for (size_t i = 0; i < depth; i++) buf[n++] = ']';
    buf[n++] = '}';
    *len = n;
  } else if (gen == GEN_BIGSTRING) {
    size_t big = 1 << 20;
    buf = malloc(big + 128);
    size_t n = (size_t)sprintf(buf, "{\"name\":\"");
    memset(buf + n, 'a', big);
    n += big;
    n += (size_t)sprintf(buf + n, "\",\"layers\":24,\"hidden\":1024,\"heads\":16,\"seq_len\":2048,\"vocab\":51200}");
    *len = n;
  }
  return buf;
}

int main(int argc, char **argv) {
  if (argc < 2) return 2;
  char *bin = argv[1];
  char *dir = tu_tmpdir("specjson");
  char *db = tu_path(dir, "t.db");
  tu_run r;
  CHECK(NCASES >= 25);

  /* a database with one model, one cluster and one plan */
  char *seed[] = {bin, "check", "--model", "gpt3-1.3b", "--cluster", "dgx-h100", "--plan",
                  "tp=2,pp=2,mbs=1,gbs=64", "--db", db, NULL};
  tu_exec(seed, &r);
  CHECK_EQ(r.status, 0);
  tu_run_free(&r);
  const char *tables[] = {"models", "clusters", "plans", "scores", "measurements"};
  long long before[5];
  for (int t = 0; t < 5; t++) before[t] = count(db, tables[t]);
  CHECK_EQ(before[0], 1);
  CHECK_EQ(before[1], 1);
  CHECK_EQ(before[2], 1);

  for (size_t i = 0; i < NCASES; i++) {
    const bad_case *c = &cases[i];
    char name[32];
    snprintf(name, sizeof name, "case%02zu.json", i);
    char *file;
    if (c->gen == GEN_MISSING_FILE) {
      file = tu_path(dir, "does-not-exist.json");
    } else if (c->gen) {
      size_t len = 0;
      char *buf = generate(c->gen, &len);
      file = tu_write(dir, name, buf, len);
      free(buf);
    } else {
      file = tu_write(dir, name, c->text, strlen(c->text));
    }
    char *a[16] = {bin, "check", (char *)c->opt, file, "--db", db};
    int n = 6;
    if (strcmp(c->opt, "--plan") == 0) {
      a[n++] = "--cluster";
      a[n++] = "dgx-h100";
    }
    if (c->extra1) a[n++] = (char *)c->extra1, a[n++] = (char *)c->extra2;
    a[n] = NULL;
    tu_exec(a, &r);
    if (r.status != 2 || !strstr(r.err ? r.err : "", c->expect))
      fprintf(stderr, "case %zu (%s): status %d, stderr: %s", i, c->expect, r.status, r.err);
    CHECK_EQ(r.status, 2);
    CHECK_CONTAINS(r.err, c->expect);
    CHECK_EQ(tu_lines(r.err), 1);
    CHECK_STREQ(r.out, "");
    /* the message names the file (pairs and plan rules name the spec or the plan instead) */
    if (!c->extra1 && strcmp(c->opt, "--plan") != 0)
      CHECK_CONTAINS(r.err, c->gen == GEN_MISSING_FILE ? "does-not-exist.json" : name);
    tu_run_free(&r);
    for (int t = 0; t < 5; t++) CHECK_EQ(count(db, tables[t]), before[t]);
    free(file);
  }

  /* an unknown preset name is bad input too */
  char *unk[] = {bin, "check", "--model", "gpt-5", "--db", db, NULL};
  tu_exec(unk, &r);
  CHECK_EQ(r.status, 2);
  CHECK_CONTAINS(r.err, "model: unknown preset 'gpt-5' (presets: gpt3-1.3b");
  tu_run_free(&r);
  /* so is a size the fabric cannot have (a partition given in the spec stays when --gpus
   * resizes it) */
  char *size[] = {bin, "check", "--cluster",
                  "{\"name\":\"g\",\"gpu\":\"gb200\",\"gpus\":128,\"gpus_per_node\":4," GB_NVL("64")
                  "," GB_NET "}",
                  "--gpus", "144", "--db", db, NULL};
  tu_exec(size, &r);
  CHECK_EQ(r.status, 2);
  CHECK_CONTAINS(r.err, "<inline>: nvlink.domain_gpus_used: 144 GPUs exceed one NVLink domain "
                        "partition of 64; beyond one the count must be a multiple of 64");
  CHECK_EQ(tu_lines(r.err), 1);
  tu_run_free(&r);
  for (int t = 0; t < 5; t++) CHECK_EQ(count(db, tables[t]), before[t]);

  /* valid files: stored once by hash; a file equal to a preset has the preset's hash */
  char *mf = tu_write(dir, "m.json", MODEL_OK, strlen(MODEL_OK));
  char *cf = tu_write(dir, "c.json", CLUSTER_OK, strlen(CLUSTER_OK));
  for (int rep = 0; rep < 2; rep++) {
    char *ok[] = {bin, "check", "--model", mf, "--cluster", cf, "--db", db, NULL};
    tu_exec(ok, &r);
    CHECK_EQ(r.status, 0);
    tu_run_free(&r);
    CHECK_EQ(count(db, "models"), before[0] + 1);
    CHECK_EQ(count(db, "clusters"), before[1] + 1);
  }
  const char *same = "{\"name\":\"dgx-h100\",\"gpu\":\"h100-sxm\",\"gpus\":64,\"gpus_per_node\":8,"
                     "\"nvlink\":{\"domain_gpus\":8,\"gbps_per_gpu\":450,\"latency_us\":0.6,"
                     "\"in_network_reduce\":true}," NET_FT ",\"_comment\":\"as the preset\"}";
  char *sf = tu_write(dir, "same.json", same, strlen(same));
  char *h1[] = {bin, "check", "--cluster", sf, "--json", NULL};
  char *h2[] = {bin, "check", "--cluster", "dgx-h100", "--json", NULL};
  tu_run r2;
  tu_exec(h1, &r);
  tu_exec(h2, &r2);
  CHECK_EQ(r.status, 0);
  CHECK_EQ(r2.status, 0);
  /* the same hash and canonical JSON; the file's output also lists the figures it left out
   * (switch radix, SHARP, oversubscription from NDR and assumptions) */
  const char *hk = r2.out ? strstr(r2.out, "\"hash\": \"") : NULL;
  CHECK(hk != NULL);
  if (hk) {
    char hash[40];
    snprintf(hash, sizeof hash, "%.28s", hk);
    CHECK_CONTAINS(r.out, hash);
  }
  const char *spec2 = r2.out ? strstr(r2.out, "\"spec\"") : NULL;
  CHECK(spec2 != NULL);
  if (spec2) CHECK_CONTAINS(r.out, spec2);
  CHECK_CONTAINS(r.out, "\"field\": \"network.switch_radix\"");
  CHECK(!strstr(r2.out ? r2.out : "", "\"defaults\""));
  tu_run_free(&r);
  tu_run_free(&r2);

  /* a database another process is writing: one line, exit 1 after the wait, nothing written */
  sqlite3 *lock;
  CHECK_EQ(sqlite3_open(db, &lock), SQLITE_OK);
  CHECK_EQ(sqlite3_exec(lock, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK);
  long long models = count(db, "models");
  char *locked[] = {bin, "check", "--model", "llama3-8b", "--db", db, NULL};
  tu_exec(locked, &r);
  CHECK_EQ(r.status, 1);
  CHECK_CONTAINS(r.err, "t.db: starting a write: database is locked by another writer");
  CHECK_EQ(tu_lines(r.err), 1);
  tu_run_free(&r);
  sqlite3_exec(lock, "ROLLBACK", NULL, NULL, NULL);
  sqlite3_close(lock);
  CHECK_EQ(count(db, "models"), models);

  free(mf);
  free(cf);
  free(sf);
  tu_rmtree(dir);
  free(db);
  free(dir);
  return check_status();
}
