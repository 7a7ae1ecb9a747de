#!/usr/bin/env bash
# usage: elastic_once.sh OUTDIR [VAR=value ...]
# Two c10d-rendezvous torchrun agents on 127.0.0.1 with --max-restarts=1 run train_restart.py;
# prints "refused" when the second attempt's gloo connect was refused (the stale shared store of
# pytorch/pytorch#135712), "ok" when both ranks finished the second attempt, else "other".
# Try: elastic_once.sh /tmp/a; elastic_once.sh /tmp/b TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1
set -u
here=$(cd "$(dirname "$0")" && pwd)
out=$1; shift; mkdir -p "$out"
torchrun=${TORCHRUN:-torchrun}
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
for rank in 0 1; do
  env "$@" timeout 150 "$torchrun" --nnodes=2 --nproc-per-node=1 --max-restarts=1 --rdzv-backend=c10d \
    --rdzv-endpoint="127.0.0.1:$port" --rdzv-id=job --monitor-interval=0.5 "$here/train_restart.py" \
    > "$out/node$rank.log" 2>&1 &
  sleep 0.5
done
wait
if grep -q "Connection refused" "$out"/node*.log; then
  echo refused
elif [ "$(cat "$out"/node*.log | grep -c "attempt 1 rank . ok")" = 2 ]; then
  echo ok
else
  echo other
fi
