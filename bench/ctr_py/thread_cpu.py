#!/usr/bin/env python3
"""CPU seconds per thread name of a command's process tree (Linux /proc),
polled every 50 ms until the command ends (the last values seen).

    thread_cpu.py -- CMD ARGS...

Prints the command's output, then per process (a descendant of CMD that
ran for more than 0.5 s of CPU) a line "threads PID: name cpu_s, ...":
which of a demo's threads spent the CPU (its main thread, hb's progress
threads, the Python demo's prefetch thread), a signal that holds on a
shared machine where wall time mostly measures the other tenants."""

import os
import subprocess
import sys
import time

TICK = os.sysconf("SC_CLK_TCK")


def children():
    """pid -> ppid of every process."""
    out = {}
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                with open("/proc/%s/stat" % p) as f:
                    s = f.read()
                out[int(p)] = int(s[s.rindex(")") + 2:].split()[1])
            except (OSError, ValueError, IndexError):
                pass
    return out


def descendants(root):
    tree, found, todo = children(), set(), [root]
    while todo:
        r = todo.pop()
        for pid, ppid in tree.items():
            if ppid == r and pid not in found:
                found.add(pid)
                todo.append(pid)
    return found


def main(argv):
    cmd = argv[argv.index("--") + 1:] if "--" in argv else argv
    proc = subprocess.Popen(cmd)
    seen = {}  # (pid, tid) -> (process name, thread name, cpu s)
    while proc.poll() is None:
        for pid in descendants(proc.pid):
            try:
                tids = os.listdir("/proc/%d/task" % pid)
                with open("/proc/%d/comm" % pid) as f:
                    pname = f.read().strip()
            except OSError:
                continue
            for tid in tids:
                try:
                    with open("/proc/%d/task/%s/stat" % (pid, tid)) as f:
                        s = f.read()
                except OSError:
                    continue
                name = s[s.index("(") + 1:s.rindex(")")]
                fields = s[s.rindex(")") + 2:].split()
                seen[(pid, int(tid))] = (pname, name, (int(fields[11]) + int(fields[12])) / TICK)
        time.sleep(0.05)
    per = {}
    for (pid, tid), (pname, name, cpu) in seen.items():
        d = per.setdefault(pid, {})
        key = "main" if tid == pid else name
        d[key] = d.get(key, 0.0) + cpu
    for pid, d in sorted(per.items()):
        if sum(d.values()) > 0.5:
            print("threads %d: %s" % (pid, ", ".join("%s %.2f" % kv for kv in
                                                      sorted(d.items(), key=lambda kv: -kv[1]))),
                  flush=True)
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
