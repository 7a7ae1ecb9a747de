"""The README 'From Python' job, N times on one plane under CPU load; failures and container restarts counted."""
import faulthandler, signal, argparse, json, os, subprocess, sys, time, glob, socket
from concurrent.futures import ThreadPoolExecutor
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from trainyard import TrainingClient
from hello import train

def main():
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=10)
    ap.add_argument("-j", type=int, default=2)
    ap.add_argument("--burners", type=int, default=2)
    ap.add_argument("--home", default=os.environ.get("TRAINYARD_HOME", os.path.expanduser("~/.trainyard")))
    ap.add_argument("--tag", default="yard")
    ap.add_argument("--env", action="append", default=[])
    a = ap.parse_args()
    client = TrainingClient(config_file=os.path.join(a.home, "kubeconfig"))
    stamp = time.strftime("%H%M%S")
    env_vars = dict(kv.split("=", 1) for kv in a.env) or None
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(a.burners)]
    def one(i):
        client = TrainingClient(config_file=os.path.join(a.home, "kubeconfig"))
        name = f"{a.tag}-{stamp}-{i}"
        print("start", name, flush=True)
        t0 = time.time()
        client.create_job(name=name, train_func=train, parameters={"greeting": "hello"}, num_workers=2,
                          num_procs_per_worker=1, env_vars=env_vars)
        try:
            print("created", name, flush=True)
            client.wait_for_job_conditions(name, timeout=600)
            print("done", name, flush=True)
            ok = True
        except Exception as exc:
            print(name, "FAILED", repr(exc)[:300], flush=True)
            ok = False
        pods = client.get_job_pods(name)
        restarts = {p["metadata"]["name"]: sum(c.get("restartCount", 0) for c in p["status"].get("containerStatuses") or []) for p in pods}
        return dict(name=name, ok=ok, restarts=restarts, secs=round(time.time() - t0, 1))
    try:
        with ThreadPoolExecutor(a.j) as ex:
            res = list(ex.map(one, range(a.n)))
    finally:
        for b in burners: b.kill(); b.wait()
    refused = subprocess.run(f"grep -rl 'Connection refused' {a.home} --include='*.log' | grep {a.tag}-{stamp} || true", shell=True, capture_output=True, text=True).stdout.split()
    print(json.dumps(dict(tag=a.tag, n=a.n, failed=sum(not r["ok"] for r in res), with_restarts=sum(any(r["restarts"].values()) for r in res), refused_logs=refused)))
    for r in res:
        if not r["ok"] or any(r["restarts"].values()): print(r)
main()
