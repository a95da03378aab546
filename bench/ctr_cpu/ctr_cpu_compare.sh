#!/usr/bin/env bash
# CPU work per sample of hb's C++ CTR demo against the PyTorch peers
# (../shared/peers/torch_ctr.py): CPU seconds (user + sys of every process
# of the job, from /usr/bin/time) at SAMPLES and at SAMPLES / 2, and their
# difference, which cancels start-up, evaluation and the checkpoint. Unlike
# wall-clock samples/s this changes little with the machine's load (cache
# sharing aside), so it can be compared on a busy machine; one run each.
#   bench/ctr_cpu/ctr_cpu_compare.sh BUILD_DIR
# Environment: NPS="1 2", SAMPLES=240000, VOCAB=2048,
# IMPLS="hb_cpp torch_ddp torch_tw", PEERS=/work/shared/peers.
set -u
B=$(cd "$1" && pwd); src=$(pwd)
NPS=${NPS:-"1 2"}; S=${SAMPLES:-240000}; V=${VOCAB:-2048}
IMPLS=${IMPLS:-"hb_cpp torch_ddp torch_tw"}; PEERS=${PEERS:-/work/shared/peers}
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
cpu() {  # impl np samples -> CPU seconds
  local n=$3 cmd
  case $1 in
    hb_cpp) cmd="$B/src/launcher/hbrun -n $2 -- $B/examples/ctr_train/ctr_train --train-samples $n --vocab $V --eval-samples 8000 --eval-every 1000000 --max-gap 1 --out $W/out";;
    torch_ddp) cmd="/usr/bin/python3 $PEERS/torch_ctr.py $src $2 --train-samples $n --vocab $V";;
    torch_tw) cmd="/usr/bin/python3 $PEERS/torch_ctr.py $src $2 --sharded --train-samples $n --vocab $V";;
    *) echo "unknown impl $1" >&2; exit 2;;
  esac
  /usr/bin/time -f "%U %S" -o "$W/t" $cmd > /dev/null 2>&1 || { echo "$1 np=$2 failed" >&2; exit 1; }
  awk '{print $1 + $2}' "$W/t"
}
echo "| ranks | impl | CPU s at $S | at $((S / 2)) | per $((S / 2)) samples | samples per CPU s |"
echo "|---|---|---|---|---|---|"
for np in $NPS; do for i in $IMPLS; do
  full=$(cpu "$i" "$np" "$S"); half=$(cpu "$i" "$np" $((S / 2)))
  awk -v np="$np" -v i="$i" -v f="$full" -v h="$half" -v n=$((S / 2)) \
    'BEGIN { d = f - h; printf "| %s | %s | %.2f | %.2f | %.2f | %s |\n", np, i, f, h, d, (d > 0 ? int(n / d) : "-") }'
done; done
