#!/usr/bin/env bash
# The PyTorch CTR demo over hb.torch (examples/ctr_train_torch) beside the
# peers' ctr_compare.sh (hb's C++ and numpy demos, PyTorch DDP dense and
# sparse): same data, model, batch per rank and flags, interleaved per
# world size. Prints one RESULT line per launch (global train samples/s,
# evaluation excluded) and then a table.
# Run from the repository root:
#   bench/ctr_torch/ctr_compare_torch.sh BUILD_DIR
# Environment: NPS="1 2 4", SAMPLES=240000, REPEATS=1, PEERS=1 (0: only the
# hb.torch demo), PEERS_SCRIPT=../shared/peers/ctr_compare.sh.
# Needs a build with examples and the Python binding, and python3-torch
# (python3-sklearn too for the peers).
set -u
B=$(cd "$1" && pwd); HB_SRC=${HB_SRC:-$(pwd)}
NPS=${NPS:-"1 2 4"}; S=${SAMPLES:-240000}; R=${REPEATS:-1}
PEERS=${PEERS:-1}; PEERS_SCRIPT=${PEERS_SCRIPT:-$HB_SRC/../shared/peers/ctr_compare.sh}
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
common="--train-samples $S --eval-samples 8000 --eval-every 1000000 --max-gap 1"
for rep in $(seq 1 "$R"); do for np in $NPS; do
  if [ "$PEERS" = 1 ] && [ -x "$PEERS_SCRIPT" ]; then
    (cd "$HB_SRC" && NPS=$np SAMPLES=$S REPEATS=1 "$PEERS_SCRIPT" "$B") | grep RESULT | tee -a "$W/results"
  fi
  out=$(PYTHONPATH="$B/bindings/python" timeout 900 "$B/src/launcher/hbrun" -n "$np" -- \
        /usr/bin/python3 "$HB_SRC/examples/ctr_train_torch/ctr_train_torch.py" $common --out "$W/t" 2>&1)
  echo "$out" | sed -n 's/.*final: \([0-9]*\) steps in \([0-9.]*\) s; held-out exact AUC \([0-9.]*\).*/\2 \3/p' |
    awk -v np="$np" -v S="$S" '{printf "RESULT impl=hb_torch np=%s seconds=%s samples_per_s=%d final_auc=%s\n", np, $1, S / $1, $2}' |
    tee -a "$W/results"
  echo "$out" | grep -q "final:" || { echo "hb_torch np=$np failed:"; echo "$out" | tail -5; }
done; done
# Table: median samples/s over the repeats, per implementation and world size.
awk '{for (i = 2; i <= NF; i++) {split($i, kv, "="); v[kv[1]] = kv[2]}
      key = v["impl"] " " v["np"]; n[key]++; r[key, n[key]] = v["samples_per_s"]; a[key] = v["final_auc"]}
     END {for (k in n) {m = n[k]; for (i = 1; i <= m; i++) s[i] = r[k, i]
            for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (s[j] < s[i]) {t = s[i]; s[i] = s[j]; s[j] = t}
            split(k, p, " "); printf "%-18s %4s %14d %10s %5d\n", p[1], p[2], s[int((m + 1) / 2)], a[k], m}}' \
  "$W/results" | sort -k1,1 -k2,2n | sed '1i impl                 np      samples/s  final_auc  runs' 
