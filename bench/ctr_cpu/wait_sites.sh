#!/usr/bin/env bash
# Which waits of the C++ CTR demo sleep, on which thread, and where
# (docs/performance.md, "Which waits sleep at 2 ranks"): every rank runs
# under `perf record -e sched:sched_switch --call-graph dwarf` (one sample
# per context switch, a few % slower than a plain run; strace -f -k slows
# the step ~30x and moves the waits), and each voluntary switch (prev_state
# S/D: the thread went to sleep) is attributed to its thread role and to
# the wait and call site on its user stack. Printed per rank-step (steps of
# the run x ranks), with start-up, evaluation and export rows kept apart
# (they are one-off). Also: how often the main thread was preempted, and by
# whom (its own helper threads or other processes). Run from the repository
# root:  NP=2 bench/ctr_cpu/wait_sites.sh BUILD_DIR
# Environment: NP=2, SAMPLES=60000, VOCAB=2048; HB_* options pass through.
set -u
B=$(cd "$1" && pwd)
NP=${NP:-2}; S=${SAMPLES:-60000}; V=${VOCAB:-2048}
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
command -v perf > /dev/null || { echo "perf not found" >&2; exit 1; }
cat > "$W/rank.sh" <<'RANK'
#!/usr/bin/env bash
exec perf record -q -e sched:sched_switch --call-graph dwarf,16384 \
  -o "$PERF_OUT.${HB_RANK:-0}" -- "$@"
RANK
chmod +x "$W/rank.sh"
PERF_OUT="$W/perf" "$B/src/launcher/hbrun" -n "$NP" -- "$W/rank.sh" \
  "$B/examples/ctr_train/ctr_train" --train-samples "$S" --vocab "$V" \
  --eval-samples 8000 --eval-every 1000000 --max-gap 1 --out "$W/out" \
  > "$W/log" 2>&1 || { echo "np $NP failed:" >&2; tail -5 "$W/log" >&2; exit 1; }
steps=$(sed -n 's/.*\[0\] final: \([0-9]*\) steps.*/\1/p' "$W/log" | head -1)
echo "# np $NP: $steps steps x $NP ranks; load $(cut -d' ' -f1-3 /proc/loadavg)"
for f in "$W"/perf.*; do
  echo "@@FILE"
  perf script -i "$f" 2> /dev/null
done | /usr/bin/python3 -c '
import collections, re, sys
rank_steps = int(sys.argv[1]) * int(sys.argv[2])
ONE_OFF = ("save_and_export", "create_model", "evaluate", "rdv::", "~hb_context",
           "form_world", "Trainer::Trainer")
def clean(fn):
    fn = re.sub(r"\+0x[0-9a-f]+$", "", fn).replace("(anonymous namespace)::", "")
    fn = fn.replace("hb::comm::", "").replace("hb::emb::", "")
    return re.sub(r"[(<].*", "", fn)
def frames(lines):
    out = []
    for l in lines:
        m = re.match(r"\s*[0-9a-f]+ (.*) \((.*)\)$", l)
        if m and not re.search(r"kernel|libc\.so|libstdc\+\+|ld-linux", m.group(2)):
            out.append(m.group(1))
    return out
def site(raw):
    fr = [clean(x) for x in raw]
    # The wait: the first frame that names one; the call site: the first
    # caller in the collection, the trainer or the C API above it.
    wait = fr[0] if fr else "?"
    for i, x in enumerate(fr):
        if x == "ShmTransport::board_wait" and i + 2 < len(fr):
            wait = "board_wait (" + fr[i + 2].replace("GlooBackend::", "") + ")"; break
        if x in ("Progress::settle", "AsyncCall::wait", "ShmP2P::wait_until"):
            wait = x; break
        if "Progress::loop" in raw[i] or "Progress::Progress" in raw[i] or "Prefetcher" in raw[i]:
            return "idle: condition variable", "thread loop (woken by a post)"
    for x, r in zip(fr, raw):
        if "allreduce_async" in r and x != wait:
            return wait, "allreduce_async job"
        if x != wait and re.search(r"Collection|Trainer::|hb_|rdv::|^main$", x):
            return wait, x
    return wait, fr[-1] if fr else "?"
def roles(recs):
    tids = sorted({int(t) for t, _, _, _ in recs})
    role = {str(tids[0]): "main"}
    for t, _, _, fr in recs:
        s = " ".join(fr)
        if t in role: continue
        if "Prefetcher" in s: role[t] = "prefetch"
        elif "allreduce_async" in s and "Progress" in s: role[t] = "progress (allreduce)"
        elif "Progress" in s and ("lookup_start" in s or "CollectionBase" in s): role[t] = "progress (collection)"
        elif "io_loop" in s: role[t] = "rendezvous io"
    return role
sleeps, pre = collections.Counter(), collections.Counter()
def account(recs):
    role = roles(recs)
    tids = {t for t, _, _, _ in recs}
    for t, state, nxt, fr in recs:
        r = role.get(t, "other")
        if state.startswith("R"):
            if r == "main":
                pre["own thread" if nxt in tids else "another process"] += 1
            continue
        w, s = site(fr)
        sleeps[(any(k in " ".join(fr) for k in ONE_OFF), r, w, s)] += 1
recs = []
for blk in sys.stdin.read().split("\n\n"):
    lines = blk.strip("\n").split("\n")
    if lines and lines[0] == "@@FILE":
        if recs: account(recs)
        recs = []; lines = lines[1:]
    if not lines or "sched_switch" not in lines[0]: continue
    m = re.search(r"prev_pid=(\d+) .*prev_state=(\S+) ==> .*next_pid=(\d+)", lines[0])
    if m: recs.append((m.group(1), m.group(2), m.group(3), frames(lines[1:])))
if recs: account(recs)
print("| one-off | thread | wait | call site | sleeps | per rank-step |")
print("|---|---|---|---|---|---|")
step_total = 0
for k, v in sorted(sleeps.items(), key=lambda kv: (kv[0][0], -kv[1])):
    if v * 50 < rank_steps: continue  # under 0.02 per rank-step
    if not k[0]: step_total += v
    print("| %s | %s | %s | %s | %d | %.2f |" % ("yes" if k[0] else "", k[1], k[2], k[3], v, v / rank_steps))
print("steady-state sleeps per rank-step: %.2f" % (step_total / rank_steps))
print("main preempted per rank-step: " + ", ".join("%s %.2f" % (k, v / rank_steps) for k, v in pre.items()))
' "$steps" "$NP"
