#!/usr/bin/env python3
"""Writes the seed inputs of the fuzz harnesses into fuzz/corpus/<name>/seed-*: every model
and cluster preset as JSON (from tests/fixtures/golden/presets.json, the output of
`podplan presets --json`, without its extra keys), clusters with and without a --gpus header,
the plans written in tests/*.c and README.md plus a few for the MoE harness, the
nccl-tests fixtures, the study data files (benchmarks/data/*.csv) and broken CSVs, and stored
study cases, pillar and capacity, real and broken. Rerun after changing presets or fixtures;
inputs found by fuzzing (other names) are left alone. The real study cases (seed-stored-*)
are rewritten only when a podplan binary is given: it runs both studies on small cases into a
temporary store (about 30 s) and their result_json become seeds.
Usage: fuzz/make_seeds.py [PODPLAN] (from anywhere)."""
import json, os, re, sqlite3, struct, subprocess, sys, tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = os.path.join(ROOT, "fuzz", "corpus")


def write(name, idx, data):
    d = os.path.join(CORPUS, name)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "seed-%s" % idx), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def clean(name, keep=None):
    d = os.path.join(CORPUS, name)
    for f in os.listdir(d) if os.path.isdir(d) else []:
        if f.startswith("seed-") and not (keep and f.startswith(keep)):
            os.remove(os.path.join(d, f))


def canon(obj):
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))


def c_strings(text):
    """C string literals, adjacent ones joined, escapes undone (enough for our tests)."""
    out = []
    for m in re.finditer(r'"((?:[^"\\\n]|\\.)*)"(?:\s*"((?:[^"\\\n]|\\.)*)")*', text):
        parts = re.findall(r'"((?:[^"\\\n]|\\.)*)"', m.group(0))
        out.append("".join(p.encode().decode("unicode_escape") for p in parts))
    return out


def main():
    for n in ("model", "cluster", "plan", "nccltests"):
        clean(n)
    presets = json.load(open(os.path.join(ROOT, "tests/fixtures/golden/presets.json")))
    for m in presets["models"]:
        for k in ("source", "params", "active_params"):
            m.pop(k, None)
        write("model", m["name"], canon(m))
    for c in presets["clusters"]:
        c.pop("source", None)
        write("cluster", c["name"], b"\x00\x00" + canon(c).encode())
        for gpus in (8, 16, 72, 256):  # with --gpus N: header 0x8000 | (N - 1)
            write("cluster", "%s-gpus%d" % (c["name"], gpus),
                  struct.pack(">H", 0x8000 | (gpus - 1)) + canon(c).encode())
    # a cluster whose GPU is a preset name
    c = dict(presets["clusters"][1], gpu="h100-sxm", name="named-gpu")
    write("cluster", "named-gpu", b"\x00\x00" + canon(c).encode())

    plans = set()
    srcs = [os.path.join(ROOT, "tests", f) for f in os.listdir(os.path.join(ROOT, "tests"))
            if f.endswith(".c")]
    for path in srcs:
        for s in c_strings(open(path).read()):
            if ("gbs" in s and ("=" in s and not s.startswith("{") or s.startswith("{\"gbs"))) \
                    and len(s) < 4000 and " " not in s.strip():
                plans.add(s)
    for m in re.finditer(r"--plan\s+'?([a-z0-9=,_]+)'?", open(os.path.join(ROOT, "README.md")).read()):
        plans.add(m.group(1))
    # the MoE harness's own cases: mixtral-8x7b (32 layers, 8 experts) on 1..64 H100s
    moe = [
        (8, "tp=2,ep=4,mbs=1,gbs=8,sp=1"),
        (16, "tp=2,pp=2,ep=4,mbs=1,gbs=16,sp=1,recompute=selective,zero=1"),
        (32, "tp=4,pp=2,ep=4,cp=1,mbs=1,gbs=64,sp=1,zero=1"),
        (16, "tp=2,cp=2,ep=2,mbs=1,gbs=16,sp=1"),
        (64, "tp=2,pp=4,vpp=2,ep=8,mbs=1,gbs=128,sp=1,recompute=full,zero=1"),
        (8, "tp=1,pp=1,dp=8,ep=8,mbs=2,gbs=64,zero=3"),
        (4, "tp=4,pp=1,mbs=1,gbs=4,schedule=gpipe"),
        (2, '{"gbs":2,"microbatches":1,"stages":[{"layers":[0,32],"gpus":[0,1],"cp":2}]}'),
        (8, '{"gbs":16,"microbatches":8,"zero":1,"stages":[{"layers":[0,16],"gpus":[0,1,2,3],'
            '"tp":2,"dp":2,"ep":2},{"layers":[16,32],"gpus":[4,5,6,7],"tp":4,"recompute":"full"}]}'),
        (16, '{"gbs":32,"microbatches":4,"sp":1,"stages":[{"layers":[0,10],"gpus":[8,9,10,11,12,13,14,15],'
             '"tp":2,"dp":4,"ep":4},{"layers":[10,32],"gpus":[0,1,2,3,4,5,6,7],"tp":2,"cp":2,"dp":2,"ep":2}]}'),
    ]
    i = 0
    for gpus, text in moe:
        write("plan", "moe%02d" % i, bytes([gpus - 1]) + text.encode())
        i += 1
    for k, text in enumerate(sorted(plans)):
        write("plan", "%03d" % k, bytes([(7, 15, 31, 63)[k % 4]]) + text.encode())

    fx = os.path.join(ROOT, "tests/fixtures/nccl-tests")
    for f in sorted(os.listdir(fx)):
        write("nccltests", os.path.splitext(f)[0], open(os.path.join(fx, f), "rb").read())

    studies(sys.argv[1] if len(sys.argv) > 1 else None)


# A stored case of each study as the code writes it (pres_json in study/study_pillar.c,
# point_json in study/study_capacity.c; real rows of the runs below): the broken seeds start
# from these.
PILLAR_ROW = (
    '{"bound_s":0.028013274310886582,"cm_s":0.028293407053995447,"complete":true,'
    '"evaluations":2534,"found":true,"gap":0.0099999999999999707,"mem_gib":6.2770614624023438,'
    '"mfu":0.44965570685878625,"plan":"tp=1,pp=1,dp=16,cp=1,ep=1,mbs=4,gbs=64,vpp=1,sp=0,'
    'recompute=none,zero=1,schedule=1f1b","run_id":6,"sim_cm_s":0.028293407053995447,'
    '"sim_s":0.028293407053995443,"space":185588240772.0,"tflops":140.29258053994133,'
    '"traits":"no full recompute (Alpa\'s defaults recompute every layer)",'
    '"wall_s":2.3782797270000628,"why":""}')
CAPACITY_ROW = (
    '{"bound_s":0.18375375544192143,"brief":"1 stage tp1 dp32 mb1 z1",'
    '"cm_s":0.18375375544192143,"complete":true,"gap":0.0,"mem_gib":18.510444641113281,'
    '"mfu":0.60599716174196083,"plan":"1 stages, 1 microbatches, zero=1: [L0-23 32 GPUs tp1 '
    'cp1 dp32]","run_id":26,"sim_s":0.18375375544192141,"simulated":true,"status":"ok",'
    '"wall_s":1.0403732510000054,"why":""}')

TINY = ('"{""name"":""gpt-tiny"",""layers"":8,""hidden"":1024,""heads"":16,""seq_len"":1024,'
        '""vocab"":51200}"')


def stored_rows(podplan):
    """The result_json of every study case of a pillar study (tests/test_pillar.c's grid: a GPT
    of 8 layers on 16 GPUs of dgx-a100 and h100-nvl256, 8 of p3.16xlarge; once more on dgx-a100
    with every simulation stopped: sim_stopped) and a capacity study (GPT-3 1.3B on dgx-a100
    and dgx-h100 up to 32 GPUs), by study."""
    with tempfile.TemporaryDirectory() as tmp:
        grid = os.path.join(tmp, "grid.csv")
        with open(grid, "w") as f:
            f.write("set,fabric,model,gpus,gbs\nfull,dgx-a100,%s,16,64\nfull,h100-nvl256,%s,16,64\n"
                    "ablation,p3.16xlarge,%s,8,64\n" % (TINY, TINY, TINY))
        db = os.path.join(tmp, "s.db")
        pillar = [podplan, "study", "pillar", "--grid", grid, "--db", db, "--simulate", "1",
                  "--gap", "0.01"]
        for cmd in (pillar + ["--out", os.path.join(tmp, "p1")],
                    pillar + ["--out", os.path.join(tmp, "p2"), "--fabrics", "dgx-a100",
                              "--sim-time-limit", "0.001"],
                    [podplan, "study", "capacity", "--model", "gpt3-1.3b", "--tokens", "1e9",
                     "--clusters", "dgx-a100,dgx-h100", "--gpus-max", "32", "--gbs", "64",
                     "--db", db, "--out", os.path.join(tmp, "c")]):
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        con = sqlite3.connect(db)
        rows = {}
        for study, js in con.execute("SELECT study, result_json FROM study_cases ORDER BY id"):
            if js not in rows.setdefault(study, []):
                rows[study].append(js)
        con.close()
        return rows


def broken(row, name):
    """Broken variants of a stored row: cut short, not JSON or not an object, each key missing
    or of the wrong type, NaN and infinities, huge and negative numbers, long strings, escapes,
    extra and repeated keys."""
    obj = json.loads(row)
    out = {"truncated": row[: len(row) // 2], "empty": "", "object": "{}", "array": "[1,2]",
           "null": "null", "text": "not json", "two": row + row, "nul": row[:20] + "\0" + row[20:]}
    for k, v in sorted(obj.items()):
        o = dict(obj)
        del o[k]
        out["missing-" + k] = canon(o)
        o = dict(obj)
        o[k] = 1.5 if isinstance(v, (str, bool)) else ("x" if isinstance(v, (int, float)) else 0)
        out["type-" + k] = canon(o)
    for k, v in sorted(obj.items()):
        if isinstance(v, float) or (isinstance(v, int) and not isinstance(v, bool)):
            for tag, lit in (("nan", "NaN"), ("inf", "Infinity"), ("huge", "1e999"),
                             ("big", "1.7976931348623157e308"), ("neg", "-1"), ("int64",
                             "9223372036854775807"), ("int65", "99999999999999999999"),
                             ("int", "7"), ("tiny", "4.9e-324")):
                out["%s-%s" % (tag, k)] = canon(obj).replace(
                    '"%s":%s' % (k, json.dumps(v)), '"%s":%s' % (k, lit), 1)
        if isinstance(v, str):
            for tag, val in (("long", "x" * 2000), ("escapes", "a\nb\r\"\\\u00e9\t"),
                             ("utf8", "\u00e9\u4e2d" * 200)):
                o = dict(obj)
                o[k] = val
                out["%s-%s" % (tag, k)] = canon(o)
    o = dict(obj, extra={"nested": [1, {"a": None}]})
    out["extra-key"] = canon(o)
    out["repeated-key"] = row[:-1] + ',"run_id":-5}'
    if name == "pillar":
        for tag, lit in (("zero", "0"), ("one", "1"), ("neg", "-1"), ("int32", "2147483648"),
                         ("int64", "9223372036854775807"), ("real", "1.5"), ("text", '"2"'),
                         ("null", "null")):
            out["sim-stopped-" + tag] = row[:-1] + ',"sim_stopped":%s}' % lit
        out["not-found"] = canon(dict(obj, found=False, why="no feasible plan: every plan "
                                      "needs more memory than a GPU has", plan="", traits=""))
    else:
        for st in ("no-plan", "cannot-fit", "OK", "", "weird"):
            out["status-" + (st or "empty")] = canon(dict(obj, status=st))
        out["no-plan"] = canon(dict(obj, status="no-plan", why="no feasible plan on 8 GPUs",
                                    plan="", brief="", simulated=False))
    return out


CSV_BROKEN = {
    "empty": b"",
    "header-only": b"set,fabric,model,gpus,gbs\n",
    "header-no-newline": b"a,b,c",
    "blank-lines": b"a,b\n\n1,2\n\n\n3,4\n",
    "crlf": b"a,b\r\n1,2\r\n3,4\r\n",
    "cr-only": b"a,b\r1,2\r3,4",
    "quoted": b'a,b\n"x,y","say ""hi"""\n"multi\nline",2\n',
    "quoted-crlf": b'a,b\r\n"x\r\ny",1\r\n',
    "empty-quoted": b'a\n""\n"",\n',
    "unterminated": b'a,b\n"open,1\n2,3\n',
    "after-quote": b'a,b\n"x"y,1\n',
    "space-after-quote": b'a,b\n"x" ,1\n',
    "too-many": b"a,b\n1,2,3\n",
    "short-rows": b"a,b,c\n1\n1,2\n",
    "one-column": b"a\n1\n\n2\n",
    "trailing-comma": b"a,b,\n1,2,\n",
    "nul": b"a,b\n1\x002,3\n",
    "bom": b"\xef\xbb\xbfa,b\n1,2\n",
    "latin1": b"a,b\n\xe9t\xe9,2\n",
    "quote-mid": b'a,b\nx"y,1\n',
    "only-newlines": b"\n\n\n",
    "only-comma": b",",
    "quote-eof": b'"',
    "doubled-quote-eof": b'a\n""""',
    "nan": b"row,time_s\n1,nan\n2,inf\n3,-1e999\n4,1e308\n",
}


def studies(podplan):
    """Seeds of studycsv, pillar and capacity."""
    clean("studycsv")
    data = os.path.join(ROOT, "benchmarks", "data")
    for f in sorted(os.listdir(data)):
        if f.endswith(".csv"):
            write("studycsv", os.path.splitext(f)[0], open(os.path.join(data, f), "rb").read())
    write("studycsv", "grid-inline-json",
          "set,fabric,model,gpus,gbs\nfull,dgx-a100,%s,16,64\n" % TINY)
    for tag, text in CSV_BROKEN.items():
        write("studycsv", tag, text)
    rows = stored_rows(podplan) if podplan else None
    for name, row in (("pillar", PILLAR_ROW), ("capacity", CAPACITY_ROW)):
        clean(name, keep=None if rows else "seed-stored-")
        for tag, text in broken(row, name).items():
            write(name, tag, text)
        for i, js in enumerate(rows.get(name, []) if rows else []):
            write(name, "stored-%02d" % i, js)


if __name__ == "__main__":
    main()
