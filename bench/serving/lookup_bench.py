"""The Python line of bench/serving/lookup_compare.sh: one thread's lookups
on an exported table through the Python binding, with serving_bench's id
stream (xorshift64, 65536 ids, BATCH copied per call), for SECONDS of the
thread's CPU time.

    python3 lookup_bench.py PATH BATCH SECONDS   ->   calls/s <x> ids/s <y>
"""
import sys
import time

import numpy as np

import hb


def main():
    path, batch, secs = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    with hb.Embedding.open(path) as s:
        rows = s.local_rows
        stream = np.empty(65536, np.int64)
        x, mask = 88172645463325252, (1 << 64) - 1
        for i in range(65536):
            x ^= (x << 13) & mask
            x ^= x >> 7
            x ^= (x << 17) & mask
            stream[i] = x % rows
        stream = np.resize(stream, 65536 + batch)  # a call's ids are one slice
        ids = np.empty(batch, np.int64)
        out = np.empty((batch, s.dim), np.float32)
        at, calls = 0, 0
        t0 = time.thread_time()
        while True:
            for _ in range(1024):
                ids[:] = stream[at:at + batch]
                at = (at + batch) & 65535
                s.lookup_version(ids, out)
            calls += 1024
            el = time.thread_time() - t0
            if el >= secs:
                break
        print("calls/s %.0f ids/s %.0f" % (calls / el, calls * batch / el))


if __name__ == "__main__":
    main()
