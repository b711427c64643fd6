"""checkpoint_dir under a tf.distribute strategy (SPEC §12; issue 21, item 4): rows sharded
across two worker processes (the chief writes, every worker resumes from its checkpoint) and
chains split over two logical CPU devices (each replica checkpoints and resumes its own chains).

The processes are tests/checkpoint_worker.py (its docstring lists what each scenario runs): one
launch of a two-worker cluster on 127.0.0.1 and one fresh process with two logical devices.
An interrupted run is resumed in the same processes: the resume reads only the files (new
samplers, restored from the chief's checkpoint), as a restarted job would; the SIGKILL of a
single process is tests/test_checkpoints.py's. The
model is tests/distributed_worker.py's (x_i ~ N(1, 1), N = 1000, sorted rows split 603 / 397).

Broken variants run (patched copies of the package), each failing the tests named:
* the chief's fingerprint stands for the run's (the others' digests not combined):
  ``test_changed_rows_on_one_worker_are_refused_by_both`` (both workers returned the stored
  samples of other rows);
* worker 1 writes in the chief's place: ``test_sharded_checkpointed_run_equals_…`` and
  ``test_both_workers_interrupted_…`` (files of mode 700/600); every worker writing: worker 1
  died in a concurrent state write (MergeV2Checkpoints: the other's temporary file gone), every
  cluster test failed;
* no agreement on the directory: ``test_a_directory_the_workers_see_differently_…`` (worker 0
  returned the stored result while worker 1, seeing no manifest, started afresh);
* a seed=None run resuming without the manifest's seed: ``test_both_workers_interrupted_…``
  (another seed, other samples);
* resuming by rerunning from the start (no restore): the two ``interrupted`` tests (the
  iteration counts; the samples are the same, the chains being deterministic);
* every replica in one directory: the mirrored scenario fails (no replica-1 directory).
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

HERE = Path(__file__).parent
WORKER = str(HERE / "checkpoint_worker.py")
ROOT = str(HERE.resolve().parent)


def _env() -> dict:
    return dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]))


def _launch(scenario: str, out: Path, timeout: float) -> list:
    from sgmcmc.distribute.launcher import run_workers

    with open(out / f"{scenario}.log", "w") as log:
        return run_workers([WORKER, scenario, str(out)], 2, timeout=timeout, grace=40.0, env=_env(), stdout=log, stderr=log)


def _load(out: Path, name: str, worker: int | None = None) -> dict:
    with np.load(out / (f"{name}.w{worker}.npz" if worker is not None else f"{name}.npz")) as f:
        return {k: f[k] for k in f.files}


def _assert_same_run(a: dict, b: dict) -> None:
    np.testing.assert_array_equal(a["mu"], b["mu"])
    np.testing.assert_array_equal(a["log_posterior"], b["log_posterior"])


# -- rows sharded across two workers ----------------------------------------------------------------


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> dict:
    """One launch of two workers runs every sharded scenario (start-up is most of the cost)."""
    out = tmp_path_factory.mktemp("ckpt_cluster")
    codes = _launch("cluster", out, timeout=400)
    assert codes == [0, 0], (out / "cluster.log").read_text()[-3000:]
    return {"out": out, **{w: json.loads((out / f"cluster.w{w}.json").read_text()) for w in (0, 1)}}


def _only_the_chiefs_files(directory: Path) -> list[str]:
    """The directory's files, checked to be exactly a single-process run's (the manifest, the
    shards it lists, its state's files) and all created by worker 0 (mode 644; worker 1's would
    be 600)."""
    manifest = json.loads((directory / "manifest.json").read_text())
    names = sorted(os.listdir(directory))
    states = [n for n in names if n.startswith(manifest["state"] + ".")]
    assert states and sorted(["manifest.json", *manifest["shards"], *states]) == names
    for path in [directory, *directory.iterdir()]:
        mode = stat.S_IMODE(path.stat().st_mode)
        assert mode & 0o044 == 0o044, f"{path.name} has mode {mode:o}: created by worker 1 (umask 077)"
    return names


@pytest.mark.multiworker
def test_sharded_checkpointed_run_equals_the_plain_run_and_only_the_chief_writes(cluster):
    """Rows 603 / 397: with checkpoint_dir (every 100 iterations, 600 in all) each worker's
    result is, bit for bit, the run without it; the directory holds exactly a single-process
    run's files, all created by worker 0."""
    out = cluster["out"]
    for w in (0, 1):
        _assert_same_run(_load(out, "checkpointed", w), _load(out, "plain", w))
    _assert_same_run(_load(out, "plain", 0), _load(out, "plain", 1))
    names = _only_the_chiefs_files(out / "sharded")
    manifest = json.loads((out / "sharded" / "manifest.json").read_text())
    assert manifest["finished"] and manifest["iteration"] == 600 and len(manifest["shards"]) >= 5, names


@pytest.mark.multiworker
def test_both_workers_interrupted_then_rerun_resume_the_uninterrupted_run(cluster):
    """seed=None, both workers failing in the run's 5th chunk, after four checkpoints: the same
    call again resumes on both workers from the chief's checkpoint (only the iterations after it
    run), with the seed the first call drew, and gives exactly the uninterrupted run with that
    seed; only the chief wrote, before and after."""
    out = cluster["out"]
    for w in (0, 1):
        assert cluster[w]["interrupted"]["error"] == "SamplingError", cluster[w]["interrupted"]
    saved = cluster[0]["manifest"]
    assert saved["checkpoints"] >= 2 and 0 < saved["iteration"] < 600 and not saved["finished"]
    for w in (0, 1):
        resumed = _load(out, "resumed", w)
        assert int(resumed["seed"]) == saved["seed"]
        _assert_same_run(resumed, _load(out, "reference", w))
        assert cluster[w]["resumed_iterations"] == 600 - saved["iteration"]
    _assert_same_run(_load(out, "resumed", 0), _load(out, "resumed", 1))
    _only_the_chiefs_files(out / "interrupted")


@pytest.mark.multiworker
def test_a_finished_sharded_directory_returns_its_result_on_every_worker(cluster):
    """The checkpointed call again, any sampling failing the run: both workers return the
    stored result."""
    out = cluster["out"]
    for w in (0, 1):
        _assert_same_run(_load(out, "finished", w), _load(out, "plain", w))


@pytest.mark.multiworker
def test_changed_rows_on_one_worker_are_refused_by_both(cluster):
    """Worker 1's rows + 1 on the rerun of a finished directory: BOTH workers raise the
    fingerprint refusal naming worker 1's data (worker 0's rows did not change: it must learn
    of worker 1's from the combined fingerprint), at once (no collective left waiting)."""
    for w in (0, 1):
        outcome = cluster[w]["mismatch"]
        assert outcome["error"] == "ValueError", (w, outcome)
        assert "holds a run with other arguments" in outcome["message"]
        changes = [line[4:] for line in outcome["message"].splitlines() if line.startswith("  - ")]
        assert changes == ["worker 1: data: entry 'x' has other values"], (w, changes)
        assert outcome["seconds"] < 60


@pytest.mark.multiworker
def test_a_directory_the_workers_see_differently_is_refused_by_both(cluster):
    """Worker 1 pointed at another (empty) directory, as a machine's local disk would be: both
    workers raise the same refusal asking for a shared filesystem, before any sampling."""
    messages = []
    for w in (0, 1):
        outcome = cluster[w]["unshared"]
        assert outcome["error"] == "ValueError", (w, outcome)
        messages.append(outcome["message"].replace(str(cluster["out"]), ""))
    assert "worker(s) 1 read other files there than worker 0" in messages[0] and "shared filesystem" in messages[0]
    assert messages[1].startswith(messages[0].split("'")[0])


@pytest.mark.multiworker
def test_chains_split_over_workers_checkpoint_per_replica(cluster, mirrored):
    """shard_rows=False, 4 chains over 2 workers, checkpoint_dir: every worker returns all 4
    chains, equal to one process's n_chains=4 run; each worker wrote its own replica's
    directory (replica-1's files are worker 1's), the chief the split record."""
    one = _load(mirrored["out"], "chains_reference")
    for w in (0, 1):
        split = _load(cluster["out"], "chains", w)
        _assert_same_run(split, one)
    top = cluster["out"] / "chains"
    assert sorted(os.listdir(top)) == ["replica-0", "replica-1", "replicas.json"]
    assert json.loads((top / "replicas.json").read_text())["replicas"] == 2
    for r in (0, 1):
        manifest = json.loads((top / f"replica-{r}" / "manifest.json").read_text())
        assert manifest["finished"] and manifest["iteration"] == 600
        modes = {stat.S_IMODE((top / f"replica-{r}" / n).stat().st_mode) for n in os.listdir(top / f"replica-{r}")}
        assert modes == ({0o644} if r == 0 else {0o600}), (r, modes)


# -- chains split over two logical devices (one process) ------------------------------------------


@pytest.fixture(scope="module")
def mirrored(tmp_path_factory) -> dict:
    """Logical devices must be configured before TensorFlow starts: a fresh process."""
    out = tmp_path_factory.mktemp("ckpt_mirrored")
    done = subprocess.run([sys.executable, WORKER, "mirrored", str(out)], env=_env(), timeout=600, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    return {"out": out, **json.loads((out / "mirrored.json").read_text())}


def test_mirrored_replica_interrupted_then_resumed_equals_the_uninterrupted_run(mirrored):
    """4 chains over 2 CPU devices, checkpoint_every=250 of 1,000: replica 1 fails after a
    checkpoint while replica 0 finishes (the replicas stand at different iterations); the same
    call again resumes replica 1 alone and returns, bit for bit, the uninterrupted run."""
    assert mirrored["interrupted"]["error"] == "SamplingError", mirrored["interrupted"]
    done, failed = mirrored["manifests"]["0"], mirrored["manifests"]["1"]
    assert done["finished"] and done["iteration"] == 1_000
    assert not failed["finished"] and 0 < failed["iteration"] < 1_000
    # Each replica resumed from its own checkpoint: replica 0 ran nothing, replica 1 the rest.
    assert mirrored["resumed_iterations"] == {"0": 0, "1": 1_000 - failed["iteration"]}
    resumed, uninterrupted = _load(mirrored["out"], "resumed"), _load(mirrored["out"], "uninterrupted")
    assert resumed["mu"].shape == (4, 1_000, 1)
    _assert_same_run(resumed, uninterrupted)


def test_mirrored_directory_refuses_another_split(mirrored):
    split, alone = mirrored["refused"]["split"], mirrored["refused"]["no_strategy"]
    assert split["error"] == "ValueError" and "4 chains were split over 2 replicas; this call splits 2 chains" in split["message"]
    assert "call with n_chains=4 and a strategy of 2 replicas" in split["message"]
    assert alone["error"] == "ValueError" and "resume it with n_chains=4 and a strategy of 2 replicas" in alone["message"]
