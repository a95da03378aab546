"""The lock step's cost in a multi-rank run, from its HB_TIMELINE traces
(lock_step.sh runs the C++ CTR demo and calls this):

    lock_step.py TRACE_DIR RANKS STEPS LABEL

Every collective is called in the same order on every rank, so the k-th
span of one name and thread on each rank is one call. A rank's time in a
call splits into the wait for the last rank to arrive (the latest start
minus its own, at most its time in the call) and the rest after everyone
arrived (the transfer, the owners' work inside the round, and the wake-up
of a rank that slept). Calls that start inside rank 0's training window
(its first to its last embedding update) count; printed per collective
and thread as ms per step, averaged over the ranks, beside the step's wall
time; rows of the Markdown table lock_step.sh prints."""

import json
import sys
from collections import defaultdict


def spans(path):
    events = [e for e in json.load(open(path)) if e.get("ph") == "X"]
    events.sort(key=lambda e: e["ts"])
    return events


def main():
    d, ranks, steps, label = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    per_rank = [spans("%s/trace.%d.json" % (d, r)) for r in range(ranks)]
    updates = [e["ts"] for e in per_rank[0] if e["name"] == "emb.optimizer"]
    if not updates or steps <= 0:
        sys.exit("lock_step.py: no training steps in %s" % d)
    lo, hi = updates[0], updates[-1]
    step_ms = (hi - lo) / 1e3 / max(1, len(updates) - 1)
    calls = []  # per rank: (name, thread) -> its comm spans in order
    for events in per_rank:
        c = defaultdict(list)
        for e in events:
            if e.get("cat") == "comm":
                c[(e["name"], e["tid"])].append(e)
        calls.append(c)
    rows = []
    for key in sorted(calls[0]):
        counts = [len(c.get(key, [])) for c in calls]
        n = min(counts)
        if max(counts) != n:  # a call one rank made and another did not
            print("# %s thread %d: %s calls per rank; the first %d matched"
                  % (key[0], key[1], counts, n), file=sys.stderr)
        total = late = rest = 0.0
        counted = 0
        for k in range(n):
            mine = [c[key][k] for c in calls]
            if not lo <= mine[0]["ts"] <= hi:
                continue
            counted += 1
            last = max(e["ts"] for e in mine)
            for e in mine:
                total += e["dur"]
                late += min(e["dur"], last - e["ts"])
                rest += max(0.0, e["ts"] + e["dur"] - last)
        if counted:
            per = 1e3 * ranks * steps  # us summed over ranks -> ms per rank-step
            rows.append((key, counted / steps, total / per, late / per, rest / per))
    main_late = sum(r[3] for r in rows if r[0][1] == 0)
    for (name, tid), n, total, late, rest in rows:
        print("| %s | %d | %s | %s | %.2f | %.3f | %.3f | %.3f |"
              % (label, ranks, name, "main" if tid == 0 else "helper %d" % tid, n, total, late, rest))
    print("| %s | %d | **main thread, all** | step %.3f ms | | | **%.3f (%.0f %% of the step)** | |"
          % (label, ranks, step_ms, main_late, 100 * main_late / step_ms))


if __name__ == "__main__":
    main()
