"""Run 2-node static torchrun worlds on 127.0.0.1 many times; count failures; keep logs of failures."""
import argparse, json, os, random, shutil, socket, subprocess, sys, time
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
TORCHRUN = os.environ.get("TORCHRUN", "/work/wt-gloo/.venv/bin/torchrun")

def free_port(rng):
    while True:
        p = rng.randint(20000, 32767)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", p)); return p
            except OSError:
                continue

def one(i, a, outdir, rng):
    port = free_port(rng)
    d = os.path.join(outdir, f"run{i:04d}")
    os.makedirs(d, exist_ok=True)
    delays = [rng.uniform(0, a.stagger), rng.uniform(0, a.stagger)]
    if a.order == "worker-first":
        delays = sorted(delays)[::-1]  # node0 (master) gets the larger delay
    elif a.order == "master-first":
        delays = sorted(delays)
    env = dict(os.environ)
    env.pop("MASTER_ADDR", None); env.pop("MASTER_PORT", None)
    for kv in a.env:
        k, _, v = kv.partition("="); env[k] = v
    procs = []
    start = time.monotonic()
    for rank in (0, 1):
        cmd = [TORCHRUN, "--nnodes=2", f"--node-rank={rank}", f"--nproc-per-node={a.nproc}",
               "--master-addr", "127.0.0.1", "--master-port", str(port), *a.extra, os.path.join(HERE, "train.py")]
        procs.append((rank, cmd, delays[rank]))
    running = {}
    logs = {}
    pending = sorted(procs, key=lambda p: p[2])
    for rank, cmd, delay in pending:
        now = time.monotonic() - start
        if delay > now: time.sleep(delay - now)
        logs[rank] = open(os.path.join(d, f"node{rank}.log"), "w")
        running[rank] = subprocess.Popen(cmd, env=env, stdout=logs[rank], stderr=subprocess.STDOUT, start_new_session=True)
    rcs = {}
    for rank, p in running.items():
        try:
            rcs[rank] = p.wait(timeout=a.timeout)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, 9); rcs[rank] = "timeout"; p.wait()
    for f in logs.values(): f.close()
    ok = all(rc == 0 for rc in rcs.values())
    text = "".join(open(os.path.join(d, f"node{r}.log")).read() for r in (0, 1))
    kind = "ok" if ok else ("refused" if "Connection refused" in text else ("timeout" if "timeout" in str(rcs) else "other"))
    res = dict(i=i, port=port, delays=[round(x, 2) for x in delays], rcs=rcs, kind=kind, secs=round(time.monotonic() - start, 1))
    if ok and not a.keep:
        shutil.rmtree(d)
    return res

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=20)
    ap.add_argument("-j", type=int, default=1, help="concurrent worlds")
    ap.add_argument("--nproc", type=int, default=1)
    ap.add_argument("--stagger", type=float, default=3.0)
    ap.add_argument("--order", default="random", choices=["random", "worker-first", "master-first"])
    ap.add_argument("--env", action="append", default=[])
    ap.add_argument("--extra", action="append", default=[])
    ap.add_argument("--burners", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=180)
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--out", default=os.path.join("/tmp", "gloo-runs"))
    ap.add_argument("--tag", default="base")
    ap.add_argument("--seed", type=int, default=None)
    a = ap.parse_args()
    outdir = os.path.join(a.out, a.tag + time.strftime("-%H%M%S"))
    os.makedirs(outdir)
    rng = random.Random(a.seed)
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(a.burners)]
    try:
        with ThreadPoolExecutor(a.j) as ex:
            results = list(ex.map(lambda i: one(i, a, outdir, random.Random(rng.random())), range(a.n)))
    finally:
        for b in burners: b.kill(); b.wait()
    with open(os.path.join(outdir, "results.json"), "w") as f:
        json.dump(results, f, indent=1)
    kinds = {}
    for r in results: kinds[r["kind"]] = kinds.get(r["kind"], 0) + 1
    print(json.dumps(dict(tag=a.tag, n=a.n, j=a.j, nproc=a.nproc, order=a.order, env=a.env, kinds=kinds, out=outdir)))
    for r in results:
        if r["kind"] != "ok": print(r)

if __name__ == "__main__":
    main()
