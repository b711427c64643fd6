"""Collective operations across the workers of a ``MultiWorkerMirroredStrategy`` cluster.

The sampler's compiled loop needs one all-reduce per gradient evaluation *inside* a
``tf.while_loop``; ``ReplicaContext.all_reduce`` cannot be used there (on CPU it goes through
``merge_call``, which TensorFlow refuses inside control flow). So the loop uses TensorFlow's
collective ops directly — ``CollectiveReduceV2`` / ``CollectiveGatherV2``, the ops
``MultiWorkerMirroredStrategy`` itself runs — on the cluster the strategy has connected. No
communication of our own: the strategy's collective executor and its coordination service carry
every byte and detect dead peers.

Keys: every collective op has a ``group_key`` (the cluster's workers, one CPU device each) and
an ``instance_key`` that must name the same op on every worker. Instance keys are handed out in
creation order from one counter per process: the workers run the same code on the same
arguments, so they create the same ops in the same order (a worker that traced a function its
peers did not would mismatch; the sampler creates its collective ops only in functions every
worker calls).

Failures: a peer that dies is reported by the coordination service within its heartbeat timeout
(about 10 s here): the op raises ``UnavailableError`` and :func:`failed_worker` reads which
worker stopped answering from the message. The all-reduces inside the compiled loop have no
timeout of their own: TensorFlow arms a timed collective with a sleeping thread per execution
(``Env::SchedClosureAfter``), and one per iteration exhausted the process's threads within a
few thousand iterations (``std::system_error: Resource temporarily unavailable``, measured). The
few collectives outside the loop (set-up, gathering samples) wait at most
:data:`DEFAULT_TIMEOUT_SECONDS` (``SGMCMC_COLLECTIVE_TIMEOUT`` in the environment). A peer that
is alive but stuck inside the loop is therefore not timed out; the launcher's ``--timeout`` is
the bound there.
"""

from __future__ import annotations

import itertools
import os
import re

import numpy as np
import tensorflow as tf

#: Seconds a collective waits for its peers before it fails (the first call of a compiled
#: function waits for every worker's tracing and compilation, so this is generous).
DEFAULT_TIMEOUT_SECONDS = 300.0
#: The group key of the sampler's collectives (TensorFlow's own keys start at 1 and count up).
GROUP_KEY = 0x5C3C
_INSTANCE_KEYS = itertools.count(1 << 20)


def timeout_seconds() -> float:
    """The collective timeout: ``SGMCMC_COLLECTIVE_TIMEOUT`` seconds if set, else the default."""
    value = os.environ.get("SGMCMC_COLLECTIVE_TIMEOUT")
    if value is None:
        return DEFAULT_TIMEOUT_SECONDS
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not seconds > 0:
        raise ValueError(f"SGMCMC_COLLECTIVE_TIMEOUT={value!r}: give a number of seconds > 0")
    return seconds


class Collective:
    """Sum and gather over ``n_workers`` workers (one participant per worker).

    Parameters
    ----------
    n_workers
        The cluster's size.
    worker
        This process's index in the cluster.
    timeout
        Seconds each op waits for its peers (default :func:`timeout_seconds`).
    """

    def __init__(self, n_workers: int, worker: int, timeout: float | None = None):
        self.n_workers = int(n_workers)
        self.worker = int(worker)
        self.timeout = timeout_seconds() if timeout is None else float(timeout)

    def all_reduce_sum(self, tensors: list[tf.Tensor]) -> list[tf.Tensor]:
        """The element-wise sums over the workers of ``tensors`` (one dtype), as one collective
        op on their concatenation, without a timeout (it runs inside compiled loops: module
        docstring); usable in eager code too."""
        shapes = [tf.shape(t) for t in tensors]
        sizes = [tf.size(t) for t in tensors]
        flat = tf.concat([tf.reshape(t, [-1]) for t in tensors], axis=0)
        total = tf.raw_ops.CollectiveReduceV2(
            input=flat, group_size=self.n_workers, group_key=GROUP_KEY, instance_key=next(_INSTANCE_KEYS),
            ordering_token=[], merge_op="Add", final_op="Id", communication_hint="ring",
            timeout_seconds=0.0,
        )
        parts = tf.split(total, tf.stack(sizes), axis=0)
        return [tf.reshape(p, s) for p, s in zip(parts, shapes)]

    def all_gather(self, array: np.ndarray) -> np.ndarray:
        """Eager: the workers' ``array`` s (same shape and dtype on every worker) stacked in
        worker order on a new leading axis."""
        value = tf.convert_to_tensor(np.asarray(array)[None])
        gathered = tf.raw_ops.CollectiveGatherV2(
            input=value, group_size=self.n_workers, group_key=GROUP_KEY, instance_key=next(_INSTANCE_KEYS),
            ordering_token=[], communication_hint="ring", timeout_seconds=self.timeout,
        )
        return gathered.numpy()


_TASK = re.compile(r"/job:\w+/(?:replica:\d+/)?task:(\d+)")


def failed_worker(error: BaseException | None, this_worker: int) -> int | None:
    """The peer a collective error names, or None if it names none but this worker. Reads the
    error and its causes: the coordination service's "tasks are unhealthy (stopped sending
    heartbeats): /job:worker/replica:0/task:1" first, else any other worker's task name."""
    texts, seen = [], set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        texts.append(str(error))
        error = error.__cause__ or error.__context__
    text = "\n".join(texts)
    unhealthy = text.find("unhealthy")
    for part in ([text[unhealthy:]] if unhealthy >= 0 else []) + [text]:
        for match in _TASK.finditer(part):
            if int(match.group(1)) != this_worker:
                return int(match.group(1))
    return None


def unreached_worker(error: BaseException, collective: Collective) -> str:
    """Who a failed exchange waited for, in words: the peer the error names (:func:`failed_worker`),
    the other worker of two, else "(one of the others)"."""
    who = failed_worker(error, collective.worker)
    if who is None and collective.n_workers == 2:
        who = 1 - collective.worker
    return "(one of the others)" if who is None else str(who)


def gather_or_raise(collective: Collective, array: np.ndarray, what: str) -> np.ndarray:
    """``collective.all_gather`` whose timeout (a worker that failed before it, or stopped)
    becomes a RuntimeError naming the worker where the error names one."""
    try:
        return collective.all_gather(array)
    except (tf.errors.DeadlineExceededError, tf.errors.UnavailableError, tf.errors.CancelledError,
            tf.errors.AbortedError, tf.errors.InternalError) as error:
        raise RuntimeError(
            f"worker {unreached_worker(error, collective)} did not reach {what} (it failed "
            f"before, or stopped; see its output); this one waited {collective.timeout:g} s at most "
            f"(SGMCMC_COLLECTIVE_TIMEOUT)"
        ) from error
