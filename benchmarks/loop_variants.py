"""Design variants of the compiled SGLD loop, in plain TensorFlow (not the package), on the
benchmark task (N = 581,012, d = 54, n = 500, float32). Each run is one variant in a fresh
process; compare variants measured in one session.

    python benchmarks/loop_variants.py MODE [N]

MODE is a '_'-joined set of flags:
  state:   carry (loop-carried tensors; the package) | vars (read/assign variables each step)
  batch:   rej (i.i.d. draws, redraw on repeats; the package's choice while n(n-1)/2N <= 1 —
           never use it at N = 10^4, n = 500, where a draw is accepted with probability 4e-6)
           | shuffle (index_shuffle)
           | repl (with replacement: a lower bound, not a valid choice)
  xla:     compile the whole loop with jit_compile=True (needs rej or repl)
  oldrt:   with XLA_FLAGS=--xla_cpu_use_thunk_runtime=false
Threads and oneDNN are set from the environment (TF_NUM_INTEROP_THREADS, TF_ENABLE_ONEDNN_OPTS).
Prints the first call (trace + 10^4 its), the per-iteration time of a 10^4 call and the
marginal cost (3·10^4 − 10^4 calls), medians of 3, wall and process CPU time.
"""

import os
import sys
import time

MODE = sys.argv[1] if len(sys.argv) > 1 else "carry_rej"
if "oldrt" in MODE:
    os.environ["XLA_FLAGS"] = "--xla_cpu_use_thunk_runtime=false"
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

N = int(sys.argv[2]) if len(sys.argv) > 2 else 581_012
n, d, eps = 500, 54, 5e-6
rng = np.random.default_rng(0)
X = tf.constant(rng.random((N, d), dtype=np.float32))
y = tf.constant((rng.random(N) < 0.5).astype(np.float32))
gen = tf.random.Generator.from_seed(1)


def log_post_grad(b, w, idx):
    xb, yb = tf.gather(X, idx), tf.gather(y, idx)
    with tf.GradientTape() as tape:
        tape.watch([b, w])
        z = b + tf.linalg.matvec(xb, w)
        lp = N / n * tf.reduce_sum(yb * z - tf.math.softplus(z)) - tf.reduce_sum(tf.abs(w)) - tf.abs(b)
    return tape.gradient(lp, [b, w])


def indices():
    if "repl" in MODE:
        return gen.uniform([n], 0, N, dtype=tf.int64)
    if "rej" in MODE:
        def draw():
            return gen.uniform([n], 0, N, dtype=tf.int64)

        def repeats(i):
            s = tf.sort(i)
            return tf.reduce_any(tf.equal(s[1:], s[:-1]))

        return tf.while_loop(repeats, lambda _: draw(), [draw()])[0]
    seed = gen.uniform_full_int([2], tf.int64)
    return tf.random.experimental.index_shuffle(tf.range(n, dtype=tf.int64), seed, tf.constant(N - 1, tf.int64))


bv, wv = tf.Variable(0.0), tf.Variable(tf.zeros(d))


def sgld(b, w):
    gb, gw = log_post_grad(b, w, indices())
    noise = gen.normal([d + 1])
    return b + eps / 2 * gb + eps**0.5 * noise[0], w + eps / 2 * gw + eps**0.5 * noise[1:]


def chunk(k):
    samples = tf.TensorArray(tf.float32, size=k, element_shape=[d])
    if "vars" in MODE:
        for i in tf.range(k):
            b, w = sgld(bv.read_value(), wv.read_value())
            bv.assign(b)
            wv.assign(w)
            samples = samples.write(i, w)
    else:
        b, w = bv.read_value(), wv.read_value()
        for i in tf.range(k):
            b, w = sgld(b, w)
            samples = samples.write(i, w)
        bv.assign(b)
        wv.assign(w)
    return samples.stack()


run = tf.function(chunk, jit_compile="xla" in MODE)
t = time.perf_counter()
run(tf.constant(10_000)).numpy()
first = time.perf_counter() - t
wall, cpu = [], []
for k in [10_000, 30_000] * 3:
    t, c = time.perf_counter(), time.process_time()
    run(tf.constant(k)).numpy()
    wall.append(time.perf_counter() - t)
    cpu.append(time.process_time() - c)
marginal = np.median([(wall[i + 1] - wall[i]) / 2e4 * 1e6 for i in range(0, 6, 2)])
cpu_marginal = np.median([(cpu[i + 1] - cpu[i]) / 2e4 * 1e6 for i in range(0, 6, 2)])
print(
    f"{MODE:18s} N={N}  first {first:.2f} s  10^4-call {np.median(wall[::2]) / 1e4 * 1e6:.0f} µs/it  "
    f"marginal {marginal:.0f} µs/it  (CPU {cpu_marginal:.0f} µs/it)"
)
