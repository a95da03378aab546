"""A running hbrun (or any launcher) for the recovery tests and benches:
its output collected line by line (with arrival times) on a thread, waits
for a line, and its workers' pids."""
import random
import re
import socket
import subprocess
import sys
import threading
import time


def free_port(count=1, rng=random):
    """A loopback port p with p .. p + count - 1 free a moment ago (e.g.
    torchrun's MASTER_PORT and hb's store beside it), below the kernel's
    ephemeral range as hbrun picks them (src/common/free_port.h): a port
    from that range can be taken by any connect() of the tests running
    beside this one (CI saw 'address already in use' on a random port in
    20000-40000)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    low = max(low, 10000 + count)
    for _ in range(200):
        port = rng.randrange(10000, low - count + 1)
        socks = []
        try:
            for p in range(port, port + count):
                s = socket.socket()
                socks.append(s)
                s.bind(("127.0.0.1", p))
            return port
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError("no %d free loopback port(s) below %d" % (count, low))


class Job:
    def __init__(self, cmd, env=None, echo=False):
        self.lines, self.times = [], []
        self.echo = echo
        self.cond = threading.Condition()
        self.p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True)
        self.t = threading.Thread(target=self._read, daemon=True)
        self.t.start()

    def _read(self):
        for line in self.p.stdout:
            if self.echo:
                sys.stdout.write("  | " + line)
            with self.cond:
                self.lines.append(line.rstrip("\n"))
                self.times.append(time.time())
                self.cond.notify_all()
        with self.cond:
            self.cond.notify_all()

    def wait_line(self, pattern, since, timeout=600):
        """Index of the first line at or after `since` matching pattern;
        None if the job ended or the timeout passed first."""
        rx = re.compile(pattern)
        end = time.time() + timeout
        with self.cond:
            while True:
                for i in range(since, len(self.lines)):
                    if rx.search(self.lines[i]):
                        return i
                if self.p.poll() is not None or time.time() > end:
                    return None
                self.cond.wait(0.05)

    def workers(self):
        """The launcher's children (its workers); [] once it is gone."""
        try:
            with open("/proc/%d/task/%d/children" % (self.p.pid, self.p.pid)) as f:
                return [int(x) for x in f.read().split()]
        except OSError:
            return []

    def wait(self, timeout):
        """The exit status; kills the launcher and raises TimeoutError
        after timeout seconds."""
        try:
            rc = self.p.wait(timeout)
        except subprocess.TimeoutExpired:
            self.p.kill()
            raise TimeoutError("still running after %d s" % timeout)
        self.t.join(5)
        return rc


if __name__ == "__main__":  # for shell tests: prints one free port
    print(free_port())
