"""python -m hb.run [hbrun options] -- program [args...]

Launches the ranks through hbrun (the launcher of libhb), as HybridBackend's
``python -m hybridbackend.run``: one worker per visible GPU or ``-n N`` CPU
workers, the rendezvous, HB_* variables, rank-prefixed output, and every
worker stopped when one fails. A program ending in ``.py`` is run with this
interpreter (sys.executable): ``python3 -m hb.run -n 4 -- train.py`` runs
``python3 train.py`` on 4 ranks with the same python3, so the ranks see the
same packages (a virtual environment's, for instance). hbrun is found through $HB_HBRUN, the path recorded at build
time, then $PATH.
"""

import os
import shutil
import sys


def hbrun_path():
    """Path of the hbrun executable, or None."""
    candidates = [os.environ.get("HB_HBRUN")]
    try:
        from ._config import HBRUN
        candidates.append(HBRUN)
    except ImportError:
        pass
    candidates.append(shutil.which("hbrun"))
    for path in candidates:
        if path and os.access(path, os.X_OK):
            return path
    return None


def command(argv):
    """hbrun's argv for python -m hb.run's argv."""
    argv = list(argv)
    if "--" in argv:
        i = argv.index("--") + 1
        if i < len(argv) and argv[i].endswith(".py"):
            argv.insert(i, sys.executable)
    return argv


def main(argv=None):
    """Replace this process with hbrun (argv: sys.argv[1:] by default)."""
    path = hbrun_path()
    if path is None:
        sys.exit("hb.run: hbrun not found (set HB_HBRUN or put hbrun on PATH)")
    args = command(sys.argv[1:] if argv is None else argv)
    os.execv(path, [path] + args)  # hbrun forwards signals and exit status


if __name__ == "__main__":
    main()
