"""tf.distribute on this machine (SPEC §12; issue 21's targets), in one run:

1. ``allreduce``: SGLD on the covertype-shaped logistic regression (N = 581,012 × 54, n = 500,
   float32), one process against rows sharded over 2 local workers (``shard_rows=True``: one
   all-reduce per iteration): marginal µs/iteration, medians of --repeats.
2. ``full_gradient``: the CV anchor's full-data gradient on --big-rows rows (default 10^7), one
   process against 2 workers each holding half (each worker's pass, then one all-reduce):
   seconds, median of --repeats.
3. ``bnn``: the MNIST-shaped BNN (784-100-10) at n = 5,000, one process against 2 workers
   (2,500 rows each, one all-reduce of 79,510 gradients per iteration): µs/iteration.
4. ``devices``: 8 chains on MirroredStrategy's 2 logical CPU devices against one device
   (whole-chain ``sgld`` calls; marginal µs per chain-iteration).

This machine has 2 cores: one process already uses both (TensorFlow's intra-op threads), so two
workers add no cores — what they can show here is the cost of the collectives, and whether
splitting the work between two processes loses anything. Workers are pinned to one intra-op
thread each (``--threads``) so that two workers do not oversubscribe the two cores.

Usage: python benchmarks/bench_distribute.py [--repeats 3] [--iters 2000] [--big-rows 10000000]
(internally also: ``--role worker|devices``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def _marginal(run, iters: int, repeats: int) -> float:
    run(iters)  # warm-up: trace and compile
    short, long_ = [], []
    for _ in range(repeats):
        t = time.perf_counter()
        run(iters)
        short.append(time.perf_counter() - t)
        t = time.perf_counter()
        run(3 * iters)
        long_.append(time.perf_counter() - t)
    return (statistics.median(long_) - statistics.median(short)) / (2 * iters) * 1e6


def worker(args) -> dict:
    import numpy as np
    import tensorflow as tf

    if args.threads:
        tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    import sgmcmc
    from sgmcmc.run.mode_search import full_data_gradient_at_mode
    from logreg_model import log_lik, log_prior, make_data, start

    strategy, w, n_workers = None, 0, 1
    if "TF_CONFIG" in os.environ:
        strategy = tf.distribute.MultiWorkerMirroredStrategy(
            communication_options=tf.distribute.experimental.CommunicationOptions(
                implementation=tf.distribute.experimental.CommunicationImplementation.RING
            )
        )
        w, n_workers = strategy.cluster_resolver.task_id, strategy.num_replicas_in_sync

    def part(data):
        n = len(data["y"])
        lo, hi = w * n // n_workers, (w + 1) * n // n_workers
        return {k: v[lo:hi] for k, v in data.items()}

    result = {"workers": n_workers}
    data = part(make_data(581_012))
    sampler = sgmcmc.sgld_setup(log_lik, data, start(), 1e-5, log_prior=log_prior, minibatch_size=500, seed=1, strategy=strategy)
    sgmcmc.init_sess(sampler, verbose=False)
    result["allreduce_us_per_it"] = _marginal(lambda n: sgmcmc.sample_chain(sampler, n, verbose=False), args.iters, args.repeats)
    result["bnn_us_per_it"] = _bnn(sgmcmc, strategy, part, args)
    big = part(make_data(args.big_rows))
    cv = sgmcmc.sgldcv_setup(log_lik, big, start(), 1e-6, opt_stepsize=1e-7, n_iters_opt=0, log_prior=log_prior,
                             minibatch_size=500, seed=1, strategy=strategy, verbose=False)
    cv.reset()
    times = []
    for _ in range(args.repeats + 1):
        t = time.perf_counter()
        grad = full_data_gradient_at_mode(cv)
        times.append(time.perf_counter() - t)
    result["full_gradient_s"] = statistics.median(times[1:])
    result["full_gradient_check"] = float(np.sum(np.abs(grad["beta"].numpy())))
    return result


def _bnn(sgmcmc, strategy, part, args) -> float:
    """The MNIST-shaped BNN (784-100-10, N = 60,000 generated rows) at n = 5,000: SGLD µs/it."""
    import numpy as np
    import tensorflow as tf

    rng = np.random.default_rng(0)
    data = part({"x": rng.random((60_000, 784), np.float32), "y": rng.integers(0, 10, 60_000).astype(np.int32)})

    def log_lik(p, d):
        h = tf.nn.relu(tf.matmul(d["x"], p["W1"]) + p["b1"])
        logits = tf.matmul(h, p["W2"]) + p["b2"]
        return -tf.reduce_sum(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=d["y"], logits=logits))

    def log_prior(p):
        return -0.5 * sum(tf.reduce_sum(tf.square(v)) for v in p.values())

    start = {"W1": 0.01 * rng.standard_normal((784, 100)).astype(np.float32), "b1": np.zeros(100, np.float32),
             "W2": 0.01 * rng.standard_normal((100, 10)).astype(np.float32), "b2": np.zeros(10, np.float32)}
    sampler = sgmcmc.sgld_setup(log_lik, data, start, 1e-6, log_prior=log_prior, minibatch_size=5000, seed=1,
                                strategy=strategy, check_model=False)
    sgmcmc.init_sess(sampler, verbose=False)
    return _marginal(lambda n: sgmcmc.sample_chain(sampler, n, verbose=False), max(10, args.iters // 20), args.repeats)


def devices(args) -> dict:
    import tensorflow as tf

    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    import sgmcmc
    from logreg_model import log_lik, log_prior, make_data, start

    data = make_data(581_012)
    result = {}
    for name, strategy in [("one_device", None), ("two_devices", tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"]))]:
        def run(n):
            sgmcmc.sgld(log_lik, data, start(), 1e-5, log_prior=log_prior, minibatch_size=500, seed=1, n_chains=8,
                        n_iters=n, verbose=False, strategy=strategy)
        result[f"{name}_us_per_chain_it"] = _marginal(run, args.iters, args.repeats) / 8
    return result


def main(argv=None) -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--role", choices=["driver", "worker", "devices"], default="driver")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--iters", type=int, default=2000)
    p.add_argument("--big-rows", type=int, default=10_000_000)
    p.add_argument("--threads", type=int, default=0)
    args = p.parse_args(argv)
    if args.role != "driver":
        print("RESULT " + json.dumps(worker(args) if args.role == "worker" else devices(args)), flush=True)
        return
    from sgmcmc.distribute.launcher import run_workers

    common = [f"--repeats={args.repeats}", f"--iters={args.iters}", f"--big-rows={args.big_rows}"]
    me = os.path.abspath(__file__)

    def results_of(text: str) -> list[dict]:
        return [json.loads(line.split("RESULT ", 1)[1]) for line in text.splitlines() if "RESULT " in line]

    one = results_of(subprocess.run([sys.executable, me, "--role=worker", *common], capture_output=True, text=True).stdout)
    one_pinned = results_of(subprocess.run([sys.executable, me, "--role=worker", "--threads=1", *common], capture_output=True, text=True).stdout)
    log = os.path.join(os.environ.get("TMPDIR", "/tmp"), "bench_distribute_workers.log")
    with open(log, "w") as f:
        run_workers([me, "--role=worker", "--threads=1", *common], 2, timeout=3600, stdout=f, stderr=f)
    with open(log) as f:
        two = results_of(f.read())
    dev = results_of(subprocess.run([sys.executable, me, "--role=devices", *common], capture_output=True, text=True).stdout)
    print(json.dumps({"one_process": one, "one_process_1_thread": one_pinned, "two_workers": two, "devices": dev}, indent=1))
    if one and two:
        print(f"all-reduce: {one[0]['allreduce_us_per_it']:.0f} us/it one process, {two[0]['allreduce_us_per_it']:.0f} two workers")
        print(f"full-data gradient ({args.big_rows:,} rows): {one[0]['full_gradient_s']:.2f} s one process "
              f"({one_pinned[0]['full_gradient_s']:.2f} s on one thread), {two[0]['full_gradient_s']:.2f} s two workers: "
              f"{one[0]['full_gradient_s'] / two[0]['full_gradient_s']:.2f}x")
    if one and two:
        print(f"BNN at n = 5,000: {one[0]['bnn_us_per_it']:.0f} us/it one process, {two[0]['bnn_us_per_it']:.0f} two workers")
    if dev:
        print(f"8 chains: {dev[0]['one_device_us_per_chain_it']:.1f} us per chain-iteration on one device, "
              f"{dev[0]['two_devices_us_per_chain_it']:.1f} on two")


if __name__ == "__main__":
    main()
