"""One process of tests/test_distribute_checkpoints.py: ``checkpoint_dir`` under a strategy.

    python tests/checkpoint_worker.py SCENARIO OUT_DIR

The model and the unequal, sorted 603 / 397 split of the rows are tests/distributed_worker.py's.
Worker 1 runs with umask 077 and worker 0 with umask 022, so a file in a checkpoint directory
that worker 1 created is mode 600 where worker 0's are 644: "only the chief wrote" is read off
the files.

Scenarios (results in ``OUT_DIR/<name>.w<worker>.npz`` / ``.json``):

``cluster`` (two workers, rows sharded)
    ``plain``: SGLD, seed 11, 600 iterations, no checkpoints; ``checkpointed``: the same with
    ``checkpoint_dir=OUT/sharded``; ``chains``: 4 chains split over the two workers
    (``shard_rows=False``) with ``checkpoint_dir=OUT/chains``; ``interrupted``: seed=None with
    ``checkpoint_dir=OUT/interrupted``, both workers failing (an op error) in the run's 5th
    chunk, after four checkpoints (the manifest then is recorded); ``resumed``: that call again
    (its iterations counted); ``reference``: the uninterrupted run with the seed the resumed run
    reports; ``finished``: the ``checkpointed`` call again, with any sampling failing the run;
    ``mismatch``: that call with worker 1's rows changed (each worker records what it raised and
    how long it took); ``unshared``: that call with worker 1 pointed at another (empty)
    directory, as a local disk would be.
``mirrored`` (one process, two logical CPU devices)
    ``uninterrupted``: 4 chains over ``MirroredStrategy``, 1,000 iterations, no checkpoints;
    ``interrupted``: the same with ``checkpoint_dir=OUT/mirrored``, replica 1 failing (an op
    error) in its 4th sampling call, after its first checkpoint, while replica 0 finishes; the
    replicas' manifests then; ``resumed``: the same call again (its iterations counted per replica); ``refused``: the directory with
    another split (n_chains=2) and without a strategy; ``chains_reference``: one device's
    n_chains=4 run of the ``chains`` call (for the cluster test).
"""

from __future__ import annotations

import json
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import distributed_worker as model  # noqa: E402

import sgmcmc  # noqa: E402
import sgmcmc.api.runs  # noqa: E402
import sgmcmc.run.sampler  # noqa: E402

STARTED = time.time()
#: 600 iterations, a checkpoint every 100 (were 1,500 and 300: the same chunk and checkpoint
#: structure, ~3,600 fewer all-reduced iterations per worker; the tests compare runs bit for
#: bit and count iterations, no statistic).
SHARDED = dict(seed=11, n_iters=600, checkpoint_every=100)
CHAINS = dict(seed=5, n_iters=600, n_chains=4, shard_rows=False, checkpoint_every=200)
MIRRORED = dict(seed=7, n_iters=1_000, n_chains=4, checkpoint_every=250)


def sgld(dataset, **kwargs):
    return model.run("sgld", dataset, **kwargs)


def save(path: str, samples: sgmcmc.Samples) -> None:
    print(f"{os.path.basename(path)} saved at {time.time() - STARTED:.1f} s", flush=True)
    np.savez(path, mu=samples["mu"], log_posterior=samples.log_posterior, seed=samples.seed)


def refusal(call) -> dict:
    start = time.time()
    try:
        call()
        return {"error": None}
    except Exception as error:  # noqa: BLE001 - recorded for the test
        return {"error": type(error).__name__, "message": str(error), "seconds": time.time() - start}


def count_iterations() -> dict:
    """From here on: iterations run, by the first chain of the sampler that ran them."""
    counts: dict = {}
    groups, advance = sgmcmc.run.sampler.Sampler.sample_groups, sgmcmc.run.sampler.Sampler.advance

    def counted(self, n: int) -> None:
        counts[self.chain_ids[0]] = counts.get(self.chain_ids[0], 0) + n

    def sample_groups(self, n_groups, group_len, *args, **kwargs):
        counted(self, n_groups * group_len)
        return groups(self, n_groups, group_len, *args, **kwargs)

    def advance_(self, n, *args, **kwargs):
        counted(self, n)
        return advance(self, n, *args, **kwargs)

    sgmcmc.run.sampler.Sampler.sample_groups = sample_groups
    sgmcmc.run.sampler.Sampler.advance = advance_
    return counts


def forbid_sampling() -> None:
    def no_sampling(self, *args, **kwargs):
        raise AssertionError("a finished run sampled again")

    sgmcmc.run.sampler.Sampler.sample_groups = no_sampling
    sgmcmc.run.sampler.Sampler.advance = no_sampling


def cluster(scenario: str, out: str) -> None:
    worker = json.loads(os.environ["TF_CONFIG"])["task"]["index"]
    os.umask(0o077 if worker == 1 else 0o022)
    strategy = tf.distribute.MultiWorkerMirroredStrategy(
        communication_options=tf.distribute.experimental.CommunicationOptions(
            implementation=tf.distribute.experimental.CommunicationImplementation.RING
        )
    )
    assert strategy.cluster_resolver.task_id == worker
    x = model.data()
    rows = model.shard(x, worker)
    path = lambda name: os.path.join(out, f"{name}.w{worker}")  # noqa: E731
    sharded = lambda **kw: sgld(rows, strategy=strategy, **{**SHARDED, **kw})  # noqa: E731
    if scenario != "cluster":
        raise SystemExit(f"unknown scenario {scenario!r}")
    save(path("plain"), sharded(checkpoint_every=10_000))
    save(path("checkpointed"), sharded(checkpoint_dir=os.path.join(out, "sharded")))
    save(path("chains"), sgld({"x": x}, strategy=strategy, checkpoint_dir=os.path.join(out, "chains"), **CHAINS))
    # Both workers fail (an op error) in the same chunk, the run's 5th (chunks of 100 at most: the
    # checkpoint interval; a checkpoint every 100 iterations: after four checkpoints).
    original, calls = sgmcmc.run.sampler.Sampler.sample_groups, []

    def failing(self, *args, **kwargs):
        calls.append(1)
        if len(calls) == 5:
            raise tf.errors.InternalError(None, None, "simulated failure")
        return original(self, *args, **kwargs)

    sgmcmc.run.sampler.Sampler.sample_groups = failing
    outcomes = {"interrupted": refusal(lambda: sharded(seed=None, checkpoint_dir=os.path.join(out, "interrupted")))}
    sgmcmc.run.sampler.Sampler.sample_groups = original
    with open(os.path.join(out, "interrupted", "manifest.json")) as f:
        outcomes["manifest"] = {k: v for k, v in json.load(f).items() if k != "fingerprint"}
    counts = count_iterations()
    resumed = sharded(seed=None, checkpoint_dir=os.path.join(out, "interrupted"))
    outcomes["resumed_iterations"] = counts.get(0, 0)
    save(path("resumed"), resumed)
    save(path("reference"), sharded(seed=resumed.seed, checkpoint_every=10_000))
    forbid_sampling()
    save(path("finished"), sharded(checkpoint_dir=os.path.join(out, "sharded")))
    changed = {"x": rows["x"] + (1.0 if worker == 1 else 0.0)}
    outcomes["mismatch"] = refusal(
        lambda: sgld(changed, strategy=strategy, checkpoint_dir=os.path.join(out, "sharded"), **SHARDED)
    )
    elsewhere = os.path.join(out, "sharded" if worker == 0 else "local-disk-of-worker-1")
    outcomes["unshared"] = refusal(lambda: sharded(checkpoint_dir=elsewhere))
    with open(path("cluster") + ".json", "w") as f:
        json.dump(outcomes, f)


def mirrored(out: str) -> None:
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    x = {"x": model.data()}
    directory = os.path.join(out, "mirrored")
    save(os.path.join(out, "uninterrupted"), sgld(x, strategy=strategy, **{**MIRRORED, "checkpoint_every": 10_000}))
    original = sgmcmc.run.sampler.Sampler.sample_groups
    calls = []

    def failing(self, *args, **kwargs):
        if self.chain_ids[0] == 2:  # replica 1's sampler
            calls.append(1)
            if len(calls) == 4:
                raise tf.errors.InternalError(None, None, "simulated failure")
        return original(self, *args, **kwargs)

    sgmcmc.run.sampler.Sampler.sample_groups = failing
    result = {"interrupted": refusal(lambda: sgld(x, strategy=strategy, checkpoint_dir=directory, **MIRRORED))}
    sgmcmc.run.sampler.Sampler.sample_groups = original
    result["manifests"] = {}
    for r in (0, 1):
        with open(os.path.join(directory, f"replica-{r}", "manifest.json")) as f:
            manifest = json.load(f)
        result["manifests"][r] = {k: manifest[k] for k in ("iteration", "finished", "checkpoints")}
    counts = count_iterations()
    save(os.path.join(out, "resumed"), sgld(x, strategy=strategy, checkpoint_dir=directory, **MIRRORED))
    result["resumed_iterations"] = {r: counts.get(2 * r, 0) for r in (0, 1)}
    result["refused"] = {
        "split": refusal(lambda: sgld(x, strategy=strategy, checkpoint_dir=directory, **{**MIRRORED, "n_chains": 2})),
        "no_strategy": refusal(lambda: sgld(x, checkpoint_dir=directory, **MIRRORED)),
    }
    save(os.path.join(out, "chains_reference"), sgld(x, **{**CHAINS, "shard_rows": None}))
    with open(os.path.join(out, "mirrored.json"), "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    if sys.argv[1] == "mirrored":
        mirrored(sys.argv[2])
    else:
        cluster(sys.argv[1], sys.argv[2])
