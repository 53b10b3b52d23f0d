#!/usr/bin/env python3
"""Writes the seed inputs of the fuzz harnesses into fuzz/corpus/<name>/seed-*: every model
and cluster preset as JSON (from tests/fixtures/golden/presets.json, the output of
`podplan presets --json`, without its extra keys), clusters with and without a --gpus header,
the plans written in tests/*.c and README.md plus a few for the MoE harness, and the
nccl-tests fixtures. Rerun after changing presets or fixtures; inputs found by fuzzing
(other names) are left alone. Usage: fuzz/make_seeds.py (from anywhere)."""
import json, os, re, struct

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = os.path.join(ROOT, "fuzz", "corpus")


def write(name, idx, data):
    d = os.path.join(CORPUS, name)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "seed-%s" % idx), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def clean(name):
    d = os.path.join(CORPUS, name)
    for f in os.listdir(d) if os.path.isdir(d) else []:
        if f.startswith("seed-"):
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


if __name__ == "__main__":
    main()
