#!/bin/bash
# usage: elastic_once.sh OUTDIR [env...]; 2 c10d-rendezvous agents, --max-restarts=1, train_restart.py
out=$1; shift; mkdir -p $out
P=$(python3 -c 'import random,socket
while True:
  p=random.randint(20000,32767); s=socket.socket()
  try: s.bind(("127.0.0.1",p)); print(p); break
  except OSError: pass')
for r in 0 1; do
  env "$@" timeout 150 /work/wt-gloo/.venv/bin/torchrun --nnodes=2 --nproc-per-node=1 --max-restarts=1 --rdzv-backend=c10d --rdzv-endpoint=127.0.0.1:$P --rdzv-id=job --monitor-interval=0.5 train_restart.py > $out/node$r.log 2>&1 &
  sleep 0.5
done
wait
if grep -q "Connection refused" $out/node*.log; then echo refused; elif [ $(grep -c "attempt 1 rank . ok" $out/node*.log | awk -F: '{s+=$2} END {print s}') = 2 ]; then echo ok; else echo other; fi
