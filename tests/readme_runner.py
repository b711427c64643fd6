"""Runs README groups (tests/test_readme_blocks.py) each in a process forked from this one, which
has done nothing but ``import sgmcmc`` — what every README group does first.

Why: a fresh interpreter spends 6.5–8 CPU s importing TensorFlow, TFP and Keras before the
group's first line; ten groups spent a third of the file's time on it. A forked child starts
with that import done, so it sees what a fresh process sees after ``import sgmcmc`` (the same
modules, settings and log filters, no TensorFlow runtime yet: this process has run no op and has
one thread when it forks). The import's own stderr is the parent's, checked by the test once.

Protocol (lines on stdin and stdout): ``READY`` once imported; then per request, a JSON object
``{"script", "cwd", "cache"}`` in, ``{"returncode"}`` out. The child runs ``script`` as
``__main__`` in ``cwd`` with ``XDG_CACHE_HOME=cache``, its stdout and stderr written to
``cwd/stdout.txt`` and ``cwd/stderr.txt``; an alarm ends it after ``TIMEOUT`` seconds.
"""

from __future__ import annotations

import json
import os
import runpy
import signal
import sys
import traceback

import sgmcmc  # noqa: F401  (the one import every group starts with)

TIMEOUT = int(os.environ.get("README_RUNNER_TIMEOUT", "600"))


def child(request: dict) -> None:
    """In the forked child: become ``python script`` in ``cwd``, and exit with its code."""
    os.chdir(request["cwd"])
    os.environ["XDG_CACHE_HOME"] = request["cache"]
    for fd, name in ((1, "stdout.txt"), (2, "stderr.txt")):
        os.dup2(os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644), fd)
    sys.argv = [request["script"]]
    sys.path[0] = request["cwd"]
    signal.alarm(TIMEOUT)
    code = 0
    try:
        runpy.run_path(request["script"], run_name="__main__")
    except SystemExit as done:
        code = done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
    except BaseException:  # noqa: BLE001 - what the interpreter does with an uncaught one
        traceback.print_exc()
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    sys.exit(code)  # through the interpreter's own shutdown (atexit, threads), as a script ends


def main() -> None:
    sys.stderr.flush()
    print("READY", flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        sys.stdout.flush()
        pid = os.fork()
        if pid == 0:
            child(request)
        _, status = os.waitpid(pid, 0)
        print(json.dumps({"returncode": os.waitstatus_to_exitcode(status)}), flush=True)


if __name__ == "__main__":
    main()
