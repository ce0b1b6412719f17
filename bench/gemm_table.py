# Turns gemm_bench --benchmark_format=json output (with --benchmark_repetitions, median
# aggregates) into the markdown table of docs/results-kernels.md:
#   python3 bench/gemm_table.py result.json
import json, sys, re, collections
def load(path):
    d = json.load(open(path))
    out = {}
    for b in d["benchmarks"]:
        if b.get("aggregate_name") != "median": continue
        m = re.match(r"gemm/(\w+)/(.*)/threads:(\d)/real_time", b["run_name"])
        lib, shape, thr = m.group(1), m.group(2), int(m.group(3))
        out[(shape, lib, thr)] = b["GFLOP/s"]
    return d["context"], out
ctx, r = load(sys.argv[1])
shapes = list(collections.OrderedDict.fromkeys(k[0] for k in r))
print(f"openblas_core={ctx.get('openblas_core')}, OPENBLAS_CORETYPE={ctx.get('OPENBLAS_CORETYPE')}\n")
print("| shape | pass | oneDNN 1t | OpenBLAS 1t | oneDNN/OpenBLAS 1t | oneDNN 2t | OpenBLAS 2t | oneDNN/OpenBLAS 2t |")
print("|---|---|---:|---:|---:|---:|---:|---:|")
tot = collections.defaultdict(list)
for s in shapes:
    parts = s.split("/")
    name = "/".join(parts[:-1]) if len(parts) > 1 else s
    pas = parts[-1] if len(parts) > 1 else "NN"
    row = [name, pas]
    for t in (1, 2):
        a, b = r[(s, "onednn", t)], r[(s, "openblas", t)]
        row += [f"{a:.1f}", f"{b:.1f}", f"{a/b:.2f}"]
        tot[t].append(a / b)
    print("| " + " | ".join(row) + " |")
import math
for t in (1, 2):
    g = math.exp(sum(math.log(x) for x in tot[t]) / len(tot[t]))
    print(f"\nGeometric mean oneDNN/OpenBLAS at {t} thread(s): {g:.2f} (over {len(tot[t])} shapes)")
