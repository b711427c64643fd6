r"""Run W copies of a script as one ``tf.distribute.MultiWorkerMirroredStrategy`` cluster on
this machine.

``python -m sgmcmc.distribute --workers W [--timeout SECONDS] [--grace SECONDS] script.py
[script args]`` starts W processes of this Python (``sys.executable``), worker ``i`` with

* ``TF_CONFIG={"cluster": {"worker": ["127.0.0.1:p0", ...]}, "task": {"type": "worker",
  "index": i}}``, on W ports that were free on 127.0.0.1 (each found by binding to port 0; the
  sockets are held until just before the workers start, which narrows but cannot close the
  window in which another program may take a port);
* ``SGMCMC_WORKER=i``, ``SGMCMC_WORKERS=W``, ``PYTHONUNBUFFERED=1``;
* ``CUDA_VISIBLE_DEVICES=-1`` and ``TF_CPP_MIN_LOG_LEVEL=2`` unless the environment already
  sets them (W local workers must not fight over one GPU).

Each line a worker writes is passed on as it comes, prefixed ``[worker i] ``, its stdout to
the launcher's stdout and its stderr to the launcher's stderr (one thread per pipe, so no
worker ever blocks on a full pipe); so is each ``\r``-separated segment, so that a progress
bar's redraws (tqdm writes ``"\r" + bar``) keep the prefix and move as they are drawn, and two
workers' text never shares a line (:class:`Sink`). The launcher's own lines go to stderr, prefixed
``[launcher] ``, and end with one line per worker: ``worker i: exit code c`` or
``worker i: killed after timeout``.

When a worker fails (a non-zero exit code, or death by a signal), the others get ``--grace``
seconds (30 by default) to finish on their own; a well-behaved sgmcmc worker raises its own
error within its collective timeout. Those still running then are terminated: SIGTERM, and
SIGKILL 5 s later. ``--timeout`` bounds the whole run: when it has passed, the workers still
running are terminated the same way, at once. Ctrl-C in the launcher sends SIGINT to every
worker and gives them the grace period (an sgmcmc worker raises ``Interrupted`` with its samples
at the end of its running chunk). A second Ctrl-C, SIGTERM to the launcher, or an error in it,
ends them at once: SIGTERM, and SIGKILL 1 s later (TensorFlow's multi-worker processes do not
die of SIGTERM: its preemption notifier catches it, so before this they ran on for the 5 s).
Each worker runs in a session (and so a process group) of its own: a Ctrl-C at the terminal
reaches the workers once, through the launcher, and the signals the launcher sends reach a
worker's own child processes too. A launcher killed without a chance to act (SIGKILL, or a
Python process that called :func:`run_workers` and dies of an unhandled signal) takes its
workers with it on Linux: each is started with ``prctl(PR_SET_PDEATHSIG, SIGKILL)``, so the
kernel kills it when the launcher's thread that started it ends (:func:`die_with_parent`;
elsewhere they would run on, in sessions of their own). POSIX only.

The exit code is 0 if every worker exited with 0, else the first failure in order of exit (a
worker killed by signal s counts as 128 + s); if the only failures are workers the launcher
killed, it is 124 after ``--timeout`` or a failure's grace period, 130 after Ctrl-C, 143 after
SIGTERM.

This module imports no TensorFlow, and nothing outside the standard library. ``python -m
sgmcmc.distribute`` imports the package ``sgmcmc`` first, and with it TensorFlow (see
``sgmcmc/distribute/__main__.py`` for the cost); ``python path/to/sgmcmc/distribute/launcher.py
...`` runs the same command line without it.
"""

from __future__ import annotations

import argparse
import codecs
import contextlib
import ctypes
import json
import math
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from typing import IO, Callable, Iterator, TextIO

#: Seconds the other workers get to finish on their own after one fails (``--grace``).
DEFAULT_GRACE = 30.0
#: Seconds between SIGTERM and SIGKILL when the launcher terminates a worker after ``--timeout``
#: or a failure's grace period.
KILL_AFTER = 5.0
#: The same when the launcher itself is being ended (SIGTERM, a second Ctrl-C, an error in it):
#: whoever ends it may not wait, and a TensorFlow multi-worker process ignores SIGTERM.
KILL_AFTER_ENDED = 1.0
#: Why the launcher kills workers (``Outcome.reason``) when it is itself being ended (or the
#: grace after a Ctrl-C has passed).
ENDED = ("interrupt", "terminate", "error")
#: ``prctl`` option: the signal the kernel sends a process when its parent (thread) dies.
PR_SET_PDEATHSIG = 1
#: Seconds between two looks at the workers.
POLL_INTERVAL = 0.05
#: Seconds to wait, after a worker has exited, for the last of its output.
DRAIN_TIMEOUT = 5.0
LOCALHOST = "127.0.0.1"
PROG = "python -m sgmcmc.distribute"

#: Exit codes of the launcher when the only failures are workers it killed.
EXIT_TIMEOUT = 124
EXIT_INTERRUPTED = 128 + signal.SIGINT
EXIT_TERMINATED = 128 + signal.SIGTERM


class LauncherTerminated(Exception):
    """Raised in the launcher's main thread when it receives SIGTERM (command line only)."""


# --------------------------------------------------------------------------- cluster spec


@contextlib.contextmanager
def held_ports(n: int) -> Iterator[list[int]]:
    """Hold ``n`` free TCP ports on 127.0.0.1 for the length of a ``with`` block.

    Parameters
    ----------
    n : int
        How many ports.

    Yields
    ------
    list of int
        The ports of ``n`` sockets bound to port 0 (bound, not listening), so distinct; no
        other program can bind them until the block ends and the sockets are closed.
    """
    with contextlib.ExitStack() as stack:
        ports = []
        for _ in range(n):
            sock = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            sock.bind((LOCALHOST, 0))
            ports.append(sock.getsockname()[1])
        yield ports


def free_ports(n: int) -> list[int]:
    """``n`` distinct TCP ports that are free on 127.0.0.1 now (:func:`held_ports`, released).

    Another program may take one before the caller binds it; :func:`run_workers` holds its
    ports until just before the workers start.
    """
    with held_ports(n) as ports:
        return ports


def tf_config(addresses: list[str], index: int) -> str:
    """The ``TF_CONFIG`` of one worker of a cluster of workers only.

    Parameters
    ----------
    addresses : list of str
        ``host:port`` of every worker, in worker order (the same list on every worker).
    index : int
        This worker's index in ``addresses``.

    Returns
    -------
    str
        JSON: ``{"cluster": {"worker": addresses}, "task": {"type": "worker", "index": index}}``.
    """
    if not 0 <= index < len(addresses):
        raise ValueError(f"worker index {index} is outside the cluster of {len(addresses)} workers")
    return json.dumps({"cluster": {"worker": list(addresses)}, "task": {"type": "worker", "index": index}})


def worker_env(base: dict[str, str], addresses: list[str], index: int) -> dict[str, str]:
    """The environment of worker ``index``: ``base`` with the cluster's variables set.

    Parameters
    ----------
    base : dict of str to str
        The environment the workers inherit.
    addresses : list of str
        ``host:port`` of every worker.
    index : int
        This worker's index.

    Returns
    -------
    dict of str to str
        A new dict; ``CUDA_VISIBLE_DEVICES`` and ``TF_CPP_MIN_LOG_LEVEL`` are kept if ``base``
        sets them.
    """
    env = dict(base)
    env["TF_CONFIG"] = tf_config(addresses, index)
    env["SGMCMC_WORKER"] = str(index)
    env["SGMCMC_WORKERS"] = str(len(addresses))
    env["PYTHONUNBUFFERED"] = "1"
    env.setdefault("CUDA_VISIBLE_DEVICES", "-1")
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    return env


# --------------------------------------------------------------------------- checks


def check_request(argv: list[str], workers: int, timeout: float | None, grace: float) -> None:
    """Refuse a request that cannot run, before anything starts.

    Parameters
    ----------
    argv : list of str
        What follows the interpreter: ``script.py args``, ``-c CODE args`` or ``-m MODULE args``.
    workers : int
        How many workers.
    timeout : float or None
        Seconds for the whole run, or None.
    grace : float
        Seconds the others get after a worker fails.

    Raises
    ------
    ValueError
        With the reason and what to do instead.
    """
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"the number of workers must be a whole number >= 1, got {workers!r}")
    if timeout is not None and not timeout > 0:
        raise ValueError(f"the timeout must be a number of seconds > 0 (or none), got {timeout!r}")
    if not grace >= 0:
        raise ValueError(f"the grace period must be a number of seconds >= 0, got {grace!r}")
    if not argv:
        raise ValueError("no script given: name a Python script (or -c CODE, or -m MODULE) for the workers to run")
    first = argv[0]
    if first in ("-c", "-m") and len(argv) < 2:
        raise ValueError(f"{first} needs an argument ({'code' if first == '-c' else 'a module name'})")
    if not first.startswith("-") and not os.path.exists(first):
        raise ValueError(f"script not found: {first!r} (from {os.getcwd()})")


# --------------------------------------------------------------------------- output


#: What ends a segment of a worker's output: a line end, or a carriage return (after which a
#: progress bar redraws its line: tqdm writes ``"\r" + bar`` at each update).
SEGMENT_END = re.compile(r"\r\n|\r|\n")
LINE_ENDS = ("\n", "\r\n")


class Sink:
    r"""One stream the workers' output is merged into, each piece prefixed by its worker.

    Parameters
    ----------
    stream : text file
        Where the output goes; flushed after each write.
    lock : threading.Lock
        Held while writing, so that pieces of different workers never mix.

    Attributes
    ----------
    open_by : str or None
        The prefix of the worker whose text the stream's last line ends with (the cursor is
        after it); None at the start of a line (after a line end or a ``"\r"``).
    unended : set of str
        The workers whose text was written and not yet ended by a line end or a ``"\r"`` of
        their own (another worker's output may have ended or overwritten it since).
    """

    def __init__(self, stream: TextIO, lock: threading.Lock) -> None:
        self.stream, self.lock = stream, lock
        self.open_by: str | None = None
        self.unended: set[str] = set()
        self.writable = True

    def write(self, prefix: str, pieces: list[str]) -> None:
        r"""Pass on pieces of one worker's output, in order, at once.

        Parameters
        ----------
        prefix : str
            The worker's, e.g. ``"[worker 0] "``.
        pieces : list of str
            Each a line end (``"\n"``, ``"\r\n"``), a carriage return ``"\r"``, or a text
            without either.

        Notes
        -----
        A text gets the prefix unless it continues this worker's text on the current line; if
        another worker's text ends that line, a ``"\n"`` comes first, so two workers' text never
        shares a line. So after a ``"\r"`` every redraw of a progress bar has its prefix. A
        carriage return is passed on as it is. A line end ends this worker's text; one whose
        text another worker already ended or overwrote is dropped, and an empty line is
        prefixed. If the stream can no longer be written (a closed pipe), nothing more is.
        """
        out = []
        with self.lock:
            for piece in pieces:
                mine = self.open_by == prefix
                if piece == "\r":
                    out.append(piece)
                    self.open_by = None
                    self.unended.discard(prefix)
                elif piece in LINE_ENDS:
                    if mine:
                        out.append(piece)
                        self.open_by = None
                    elif prefix not in self.unended:  # an empty line (else: one already ended)
                        out += ["\n" if self.open_by else "", prefix, piece]
                        self.open_by = None
                    self.unended.discard(prefix)
                elif piece:
                    if not mine:
                        out += ["\n" if self.open_by else "", prefix]
                    out.append(piece)
                    self.open_by = prefix
                    self.unended.add(prefix)
            self._emit("".join(out))

    def end(self, prefix: str) -> None:
        """The worker's pipe has closed: end its text with a line end if it is still open."""
        self.write(prefix, ["\n"] if prefix in self.unended else [])

    def _emit(self, text: str) -> None:
        """Write and flush (the lock held)."""
        if not self.writable or not text:
            return
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):
            self.writable = False


def split_pieces(text: str, redraw: bool) -> tuple[list[str], str, bool]:
    r"""Cut a worker's output into the pieces :meth:`Sink.write` takes.

    Parameters
    ----------
    text : str
        What was read and not yet passed on.
    redraw : bool
        Whether ``text`` follows a ``"\r"`` (no line end since).

    Returns
    -------
    tuple of (list of str, str, bool)
        The pieces to pass on now; the rest, held until more comes (a line's text until its end,
        and a final ``"\r"``, which may be half of a ``"\r\n"``); ``redraw`` after them. Text
        after a ``"\r"`` is passed on as it comes, so that a progress bar moves as it is drawn.
    """
    pieces, start = [], 0
    for match in SEGMENT_END.finditer(text):
        if match.group() == "\r" and match.end() == len(text):
            break
        pieces += [text[start : match.start()], match.group()]
        redraw, start = match.group() == "\r", match.end()
    rest = text[start:]
    if redraw:
        held = "\r" if rest.endswith("\r") else ""
        pieces.append(rest[: len(rest) - len(held)])
        rest = held
    return [p for p in pieces if p], rest, redraw


def pump_lines(pipe: IO[bytes], prefix: str, sink: Sink) -> None:
    r"""Copy ``pipe`` to ``sink`` until the pipe closes, every line and every redraw after a
    ``"\r"`` (a progress bar's) prefixed (:meth:`Sink.write`, :func:`split_pieces`).

    Parameters
    ----------
    pipe : binary file
        A worker's stdout or stderr.
    prefix : str
        Put before each line and redraw, e.g. ``"[worker 0] "``.
    sink : Sink
        Where the output goes.

    Notes
    -----
    A line is passed on once it ends (a last one without a line end gets one). Bytes that are
    not UTF-8 are replaced.
    """
    fd = pipe.fileno()
    decode = codecs.getincrementaldecoder("utf-8")("replace").decode
    rest, redraw = "", False
    with pipe:
        while data := os.read(fd, 1 << 16):
            pieces, rest, redraw = split_pieces(rest + decode(data), redraw)
            if pieces:
                sink.write(prefix, pieces)
        rest = (rest + decode(b"", final=True)).rstrip("\r")
        sink.write(prefix, [rest] if rest else [])
        sink.end(prefix)


# --------------------------------------------------------------------------- the workers


def die_with_parent() -> Callable[[], None] | None:
    """On Linux, a ``preexec_fn`` for :class:`subprocess.Popen` that makes the kernel SIGKILL
    the child when the thread that started it (here, the one running :func:`run_workers`) ends,
    even by SIGKILL; None elsewhere, or if libc's ``prctl`` cannot be loaded.

    Notes
    -----
    The function runs in the child between fork and exec, so it only calls ``prctl`` through a
    function pointer resolved here, in the parent, and ``getppid``: if the launcher died before
    the ``prctl``, no signal would come, and the child kills itself instead.
    """
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    prctl.restype = ctypes.c_int
    parent, kill = os.getpid(), int(signal.SIGKILL)

    def preexec() -> None:
        prctl(PR_SET_PDEATHSIG, kill, 0, 0, 0)
        if os.getppid() != parent:
            os.kill(os.getpid(), kill)

    return preexec


class Outcome(list[int | None]):
    """How a run ended: the exit code per worker (a list), with the order of exit and why
    the launcher killed workers.

    Parameters
    ----------
    workers : int
        How many workers; every code starts as None.

    Attributes
    ----------
    order : list of int
        The workers that exited on their own, in order of exit.
    reason : str or None
        Why the launcher killed workers: ``"timeout"``, ``"grace"``, ``"interrupt"``,
        ``"terminate"``; None if it killed none.

    Notes
    -----
    An item is the worker's exit code (negative -s: killed by signal s), or None for a
    worker the launcher killed.
    """

    def __init__(self, workers: int) -> None:
        super().__init__([None] * workers)
        self.order: list[int] = []
        self.reason: str | None = None

    def summary(self) -> list[str]:
        """One line per worker, in worker order: ``worker i: exit code c`` (:func:`describe`)
        or ``worker i: killed after timeout``."""
        return [
            f"worker {i}: {describe(code) if code is not None else 'killed after timeout'}"
            for i, code in enumerate(self)
        ]

    def exit_status(self) -> int:
        """The launcher's exit code: 0, the first failure's code in order of exit (128 + s for
        signal s), or 124, 130 or 143 when only killed workers failed (module docstring)."""
        for i in self.order:
            code = self[i]
            if code:
                return 128 - code if code < 0 else code
        if self.reason is None:
            return 0
        return {"interrupt": EXIT_INTERRUPTED, "terminate": EXIT_TERMINATED}.get(self.reason, EXIT_TIMEOUT)


class Workers:
    """The worker processes of one run, their output threads, and what became of them.

    Parameters
    ----------
    workers : int
        How many workers the run has.
    """

    def __init__(self, workers: int) -> None:
        self.procs: list[subprocess.Popen] = []
        self.threads: list[threading.Thread] = []
        self.outcome = Outcome(workers)
        self.finished: set[int] = set()
        self.lock = threading.Lock()
        self.sinks: dict[int, Sink] = {}

    def sink(self, stream: TextIO) -> Sink:
        """The :class:`Sink` of ``stream`` (one per stream: stdout and stderr may be one file;
        all of them share one lock)."""
        return self.sinks.setdefault(id(stream), Sink(stream, self.lock))

    def start(self, argv: list[str], envs: list[dict[str, str]], stdout: TextIO, stderr: TextIO) -> None:
        """Start one worker per environment, each in a session of its own (on Linux killed with
        the calling thread: :func:`die_with_parent`), with its output threads.

        Parameters
        ----------
        argv : list of str
            What follows ``sys.executable`` on each worker's command line.
        envs : list of dict of str to str
            One environment per worker.
        stdout : text file
            Where the workers' stdout lines go.
        stderr : text file
            Where the workers' stderr lines go.
        """
        preexec = die_with_parent()
        for index, env in enumerate(envs):
            proc = subprocess.Popen(
                [sys.executable, *argv],
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
                preexec_fn=preexec,
            )
            self.procs.append(proc)
            for pipe, stream in ((proc.stdout, stdout), (proc.stderr, stderr)):
                thread = threading.Thread(target=pump_lines, args=(pipe, f"[worker {index}] ", self.sink(stream)), daemon=True)
                thread.start()
                self.threads.append(thread)

    def running(self) -> list[int]:
        """The indices of the workers not yet finished."""
        return [i for i in range(len(self.procs)) if i not in self.finished]

    def reap(self) -> list[int]:
        """Record the workers that have exited since the last call.

        Returns
        -------
        list of int
            Their indices, in the order they were found.
        """
        exited = []
        for i in self.running():
            code = self.procs[i].poll()
            if code is not None:
                self.finished.add(i)
                self.outcome[i] = code
                self.outcome.order.append(i)
                exited.append(i)
        return exited

    def send(self, sig: int) -> None:
        """Send ``sig`` to the process group of every worker still running.

        Parameters
        ----------
        sig : int
            The signal.
        """
        for i in self.running():
            if self.procs[i].poll() is None:
                try:
                    os.killpg(self.procs[i].pid, sig)
                except ProcessLookupError:
                    pass

    def terminate(self, reason: str) -> None:
        """Kill the workers still running: SIGTERM, then SIGKILL after :data:`KILL_AFTER` s
        (:data:`KILL_AFTER_ENDED` s when the launcher itself is being ended: ``reason`` in
        :data:`ENDED`).

        Parameters
        ----------
        reason : str
            Recorded as the outcome's ``reason``; the killed workers' codes stay None.
        """
        self.reap()
        victims = self.running()
        if not victims:
            return
        self.outcome.reason = reason
        self.send(signal.SIGTERM)
        deadline = time.monotonic() + (KILL_AFTER_ENDED if reason in ENDED else KILL_AFTER)
        while time.monotonic() < deadline and any(self.procs[i].poll() is None for i in victims):
            time.sleep(POLL_INTERVAL)
        self.send(signal.SIGKILL)
        for i in victims:
            self.procs[i].wait()
            self.finished.add(i)

    def drain(self) -> None:
        """Wait (a bounded time) for the output threads to pass on the workers' last lines."""
        deadline = time.monotonic() + DRAIN_TIMEOUT
        for thread in self.threads:
            thread.join(max(0.0, deadline - time.monotonic()))


def supervise(workers: Workers, timeout: float | None, grace: float, log: Callable[[str], None]) -> None:
    """Wait for the workers; after a failure, the timeout or Ctrl-C, end them (module docstring).

    Parameters
    ----------
    workers : Workers
        The running workers.
    timeout : float or None
        Seconds for the whole run from now, or None.
    grace : float
        Seconds the others get after a failure or a Ctrl-C.
    log : callable
        Takes one line of the launcher's own output.
    """
    deadline = time.monotonic() + timeout if timeout is not None else math.inf
    stop_at, why = math.inf, None
    interrupted = False
    while True:
        # Everything, the loop's own test included, inside the try: a Ctrl-C or SIGTERM lands
        # at any bytecode, and one that escaped here left the workers unsignalled (seen under
        # load: the launcher died of KeyboardInterrupt in workers.running()).
        try:
            if not workers.running():
                break
            for i in workers.reap():
                code = workers.outcome[i]
                if code != 0 and why is None:
                    log(f"worker {i} failed ({describe(code)}); the others have {grace:g} s to finish")
                    stop_at, why = time.monotonic() + grace, "grace"
            if not workers.running():
                break
            now = time.monotonic()
            if now >= deadline:
                log(f"the timeout of {timeout:g} s has passed; terminating workers {workers.running()}")
                workers.terminate("timeout")
                break
            if now >= stop_at:
                log(f"the grace period of {grace:g} s has passed; terminating workers {workers.running()}")
                workers.terminate(why)
                break
            time.sleep(POLL_INTERVAL)
        except KeyboardInterrupt:
            if interrupted:
                log("interrupted again; terminating the workers")
                workers.terminate("interrupt")
                break
            interrupted = True
            log(f"interrupted; SIGINT sent to the workers, which have {grace:g} s to finish")
            workers.send(signal.SIGINT)
            stop_at, why = min(stop_at, time.monotonic() + grace), "interrupt"
        except LauncherTerminated:
            log("terminated; terminating the workers")
            workers.terminate("terminate")
            break


def run_workers(
    argv: list[str],
    workers: int,
    *,
    timeout: float | None = None,
    grace: float = DEFAULT_GRACE,
    env: dict[str, str] | None = None,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
) -> Outcome:
    """Run ``workers`` copies of a Python program as one cluster on 127.0.0.1, and wait.

    Parameters
    ----------
    argv : list of str
        What follows the interpreter on each worker's command line, as is: ``[script, *args]``,
        ``["-c", code, *args]`` or ``["-m", module, *args]``.
    workers : int
        How many workers (>= 1).
    timeout : float or None, optional
        Seconds for the whole run; then the workers still running are terminated.
    grace : float, optional
        Seconds the others get to finish after a worker fails, or after Ctrl-C.
    env : dict of str to str or None, optional
        The environment the workers start from (default: this process's); the cluster's
        variables are set on top (module docstring).
    stdout : text file or None, optional
        Where the workers' prefixed stdout lines go (default: ``sys.stdout`` at call time).
    stderr : text file or None, optional
        Where their stderr lines and the launcher's own lines go (default: ``sys.stderr``).

    Returns
    -------
    Outcome
        A list: the exit code per worker, in worker order (negative -s: killed by signal s);
        None for a worker the launcher killed. Its ``order`` and ``reason`` say in which
        order the workers exited and why any were killed.

    Raises
    ------
    ValueError
        For a request that cannot run (no script, ``workers < 1``, ...), before anything starts.
    """
    check_request(argv, workers, timeout, grace)
    out = stdout if stdout is not None else sys.stdout
    err = stderr if stderr is not None else sys.stderr

    running = Workers(workers)

    def log(line: str) -> None:  # through the sink: a worker's progress bar may be open on err
        running.sink(err).write("[launcher] ", [line, "\n"])

    base = dict(os.environ if env is None else env)
    with held_ports(workers) as ports:
        addresses = [f"{LOCALHOST}:{port}" for port in ports]
        envs = [worker_env(base, addresses, i) for i in range(workers)]
    try:
        running.start(argv, envs, out, err)
        supervise(running, timeout, grace, log)
    finally:
        running.terminate(running.outcome.reason or "error")
        running.drain()
    return running.outcome


# --------------------------------------------------------------------------- reporting


def describe(code: int) -> str:
    """``exit code c``, with the signal's name when ``c`` is negative.

    Parameters
    ----------
    code : int
        An exit code as :class:`subprocess.Popen` gives it.

    Returns
    -------
    str
        E.g. ``exit code 3`` or ``exit code -9 (SIGKILL)``.
    """
    if code < 0:
        try:
            return f"exit code {code} ({signal.Signals(-code).name})"
        except ValueError:
            return f"exit code {code} (signal {-code})"
    return f"exit code {code}"


# --------------------------------------------------------------------------- command line

#: The launcher's options that take a value; the first other word starts the workers' argv.
VALUE_OPTIONS = ("--workers", "--timeout", "--grace")


def split_argv(args: list[str]) -> tuple[list[str], list[str]]:
    """Split the command line into the launcher's options and the workers' argv.

    Parameters
    ----------
    args : list of str
        The arguments after ``python -m sgmcmc.distribute``.

    Returns
    -------
    tuple of (list of str, list of str)
        The launcher's options; the rest, from the first word that is not one of them (or
        after ``--``), so that ``-c CODE`` and ``-m MODULE`` reach the interpreter as they are.
    """
    i = 0
    while i < len(args):
        word = args[i]
        if word == "--":
            return args[:i], args[i + 1 :]
        if word in VALUE_OPTIONS:
            i += 2
        elif word in ("-h", "--help") or word.split("=", 1)[0] in VALUE_OPTIONS:
            i += 1
        else:
            break
    return args[:i], args[i:]


def parser() -> argparse.ArgumentParser:
    """The launcher's option parser (the workers' argv is split off first: :func:`split_argv`)."""
    p = argparse.ArgumentParser(
        prog=PROG,
        usage=f"{PROG} --workers W [--timeout SECONDS] [--grace SECONDS] script.py [args ...]",
        description="Run W copies of a Python script as one tf.distribute.MultiWorkerMirroredStrategy "
        "cluster on 127.0.0.1 (TF_CONFIG, SGMCMC_WORKER and SGMCMC_WORKERS set for each).",
        epilog="Instead of script.py, -c CODE or -m MODULE (with their arguments) are passed to the "
        "interpreter as they are. Exit code: 0 if every worker exited 0, else the first failure's.",
    )
    p.add_argument("--workers", type=int, required=True, metavar="W", help="number of worker processes")
    p.add_argument("--timeout", type=float, default=None, metavar="SECONDS", help="bound on the whole run (default: none)")
    p.add_argument(
        "--grace",
        type=float,
        default=DEFAULT_GRACE,
        metavar="SECONDS",
        help=f"time the others get after a worker fails or after Ctrl-C (default: {DEFAULT_GRACE:g})",
    )
    return p


def raise_terminated(signum: int, frame) -> None:
    """SIGTERM handler of the command line: end the workers, then exit."""
    raise LauncherTerminated()


def main(args: list[str] | None = None) -> int:
    """The command line (module docstring).

    Parameters
    ----------
    args : list of str or None, optional
        The arguments (default: ``sys.argv[1:]``).

    Returns
    -------
    int
        The exit code.
    """
    own, argv = split_argv(sys.argv[1:] if args is None else list(args))
    p = parser()
    options = p.parse_args(own)
    try:
        check_request(argv, options.workers, options.timeout, options.grace)
    except ValueError as error:
        p.error(str(error))
    previous = signal.signal(signal.SIGTERM, raise_terminated)
    try:
        outcome = run_workers(argv, options.workers, timeout=options.timeout, grace=options.grace)
    except LauncherTerminated:  # while the workers were starting; those started are ended
        return EXIT_TERMINATED
    finally:
        signal.signal(signal.SIGTERM, previous)
    for line in outcome.summary():
        print(line, file=sys.stderr, flush=True)
    return outcome.exit_status()


if __name__ == "__main__":
    sys.exit(main())
