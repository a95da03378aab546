#!/usr/bin/env bash
# Two copies of the Python CTR demo against each other and against the C++
# demo, on one build, interleaved: per round, ctr_compare.sh (its flags)
# with IMPLS="hb_cpp hb_py" for B_SRC, then IMPLS=hb_py for A_SRC (e.g.
# main's tree). Prints every RESULT line tagged src=A / src=B and, per world
# size, the medians of the samples/s and of the per-round ratios B / A and
# Python / C++. Run from the repository root:
#   bench/ctr_py/py_ab.sh BUILD_DIR A_SRC [B_SRC]
# A_SRC / B_SRC: trees holding examples/ctr_train_py (B_SRC default: this
# one). Environment: NPS="1 2 4", ROUNDS=3, and ctr_compare.sh's SAMPLES,
# VOCAB, LOAD; CTR_COMPARE (default ../shared/peers/ctr_compare.sh).
set -u
B=$(cd "$1" && pwd); A_SRC=$(cd "$2" && pwd); B_SRC=$(cd "${3:-.}" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
cmp=${CTR_COMPARE:-$here/../../../shared/peers/ctr_compare.sh}
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
for r in $(seq 1 "${ROUNDS:-3}"); do
  echo "# round $r: $(uptime)" >&2
  HB_SRC=$B_SRC NPS=${NPS:-"1 2 4"} IMPLS="hb_cpp hb_py" REPEATS=1 \
    "$cmp" "$B" | sed -n "s/^RESULT /RESULT round=$r src=B /p" | tee -a "$W/all"
  HB_SRC=$A_SRC NPS=${NPS:-"1 2 4"} IMPLS=hb_py REPEATS=1 \
    "$cmp" "$B" | sed -n "s/^RESULT /RESULT round=$r src=A /p" | tee -a "$W/all"
done
# Per world size: medians of samples/s and of the per-round ratios.
awk '{ for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
       k = v["src"] "/" v["impl"]; s[v["round"], v["np"], k] = v["samples_per_s"]; nps[v["np"]] = 1
       rounds[v["round"]] = 1 }
     function med(a, n,   i, j, t) { for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++)
       if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
       return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
     END { for (np in nps) { n = 0; delete c; delete pa; delete pb; delete ba; delete rb; delete ra
         for (r in rounds) { if (!(s[r, np, "B/hb_cpp"] && s[r, np, "B/hb_py"] && s[r, np, "A/hb_py"])) continue
           n++; c[n] = s[r, np, "B/hb_cpp"]; pb[n] = s[r, np, "B/hb_py"]; pa[n] = s[r, np, "A/hb_py"]
           ba[n] = pb[n] / pa[n]; rb[n] = pb[n] / c[n]; ra[n] = pa[n] / c[n] }
         if (n) printf "SUMMARY np=%s rounds=%d cpp=%.0f py_A=%.0f py_B=%.0f B/A=%.3f py_B/cpp=%.3f py_A/cpp=%.3f (medians; ratios per round)\n",
           np, n, med(c, n), med(pa, n), med(pb, n), med(ba, n), med(rb, n), med(ra, n) } }' "$W/all"
