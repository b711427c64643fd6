"""Long runs (SPEC §10): continuing, save/restore and whole-chain checkpoints are bit-identical
to uninterrupted runs, including after a SIGKILL.

Broken variants checked when these tests were written: restoring without the random generator
(dropping ``generator`` from ``Sampler._checkpoint``) fails every save/restore case; a manifest
committed before its shard (swapping the order in ``CheckpointDirectory.commit``) is caught by
the kill test only when the kill lands between the two writes, so the atomic order is argued in
sgmcmc/checkpoints.py rather than tested.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf
from checkpoint_model import RUN, X, log_lik, run

import sgmcmc
import sgmcmc.run.sampler
from sgmcmc.run import saved_state

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = {"x": X}
SMALL = dict(minibatch_size=100, seed=9, n_chains=2)
SETTINGS = {
    "sgld": dict(stepsize=1e-4),
    "sghmc": dict(stepsize=1e-5, L=2),
    "sgnht": dict(stepsize=1e-5),
    "sgldcv": dict(stepsize=1e-4, opt_stepsize=1e-5, n_iters_opt=50),
    "sghmccv": dict(stepsize=1e-5, L=2, opt_stepsize=1e-5, n_iters_opt=50),
    "sgnhtcv": dict(stepsize=1e-5, opt_stepsize=1e-5, n_iters_opt=50),
    "psgld": dict(stepsize=1e-4),
    "hamcmc": dict(stepsize=1e-4, memory=2),
}


@pytest.fixture(scope="module")
def uninterrupted():
    return run()


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """``saved(name)``: a sampler of ``name`` (SMALL, seed 9) that ran 129 iterations (thin 3),
    saved to its directory, then ran 171 more (``first``, with gradients). Shared by the
    save/restore, adopted-seed and old-checkpoint tests of the same method; each restores what it
    uses first, so their order does not matter (one sampler per method instead of one per test).
    129 and 171 are whole groups of 3, so both calls run one compiled program (130 and 170, as
    before, compiled a partial-group program too)."""
    done = {}

    def get(name):
        if name not in done:
            sampler = getattr(sgmcmc, f"{name}_setup")(log_lik, DATA, {"m": 0.0}, **SMALL, **SETTINGS[name])
            sgmcmc.sample_chain(sampler, 129, verbose=False, thin=3, store_gradients=True)
            path = tmp_path_factory.mktemp(f"saved-{name}")
            sampler.save(str(path))
            first = sgmcmc.sample_chain(sampler, 171, verbose=False, thin=3, store_gradients=True)
            done[name] = (sampler, path, first)
        return done[name]

    return get


@pytest.mark.parametrize("name", list(SETTINGS))
def test_save_restore_continues_exactly(name, saved):
    """A sampler runs 129 iterations, saves, runs 171 more; restored to its save it runs the same
    171 again, bit for bit (draws and stored gradients): the save holds every kernel's and
    estimator's state. (Restoring into a new sampler, as a new process does, is the same
    ``tf.train.Checkpoint`` object: covered by the whole-chain tests below, incl. a SIGKILL.)"""
    sampler, path, first = saved(name)
    sampler.restore(str(path))
    assert sampler.iteration == 129
    again = sgmcmc.sample_chain(sampler, 171, verbose=False, thin=3, store_gradients=True)
    np.testing.assert_array_equal(again["m"], first["m"])
    np.testing.assert_array_equal(again.gradients["m"], first.gradients["m"])


@pytest.mark.parametrize(
    "name, other_seed", [("sgld", 123), ("sgld", None), ("sghmccv", 123)],
    ids=["seed123-sgld", "seedNone-sgld", "seed123-sghmccv"],
)
def test_restore_adopts_the_saved_seed(name, other_seed, saved):
    """Issue 29.6: the minibatches and noise are keyed by the seed, so a sampler set up with
    another seed (or none) that restores a state saved from ``seed=9`` must continue the saved
    chain, not its own (before: max diff 0.03 after 150 iterations). Fails when ``restore`` does
    not adopt the saved seed (checked: removing ``adopt_seed`` from ``saved_state.restore``).
    seed=None is run for sgld only: ``Sampler.__init__`` turns None into a drawn 63-bit int
    (``secrets.randbits``) and nothing after it sees whether the seed was given — the setup
    path (``Setup``, ``_checked_construction``) passes it through untouched — so sghmccv with
    seed=None is the seed123-sghmccv case with another int (the method-specific state) plus the
    seedNone-sgld case (the drawn seed)."""
    _, path, first = saved(name)
    kw = dict(SETTINGS[name])
    other = getattr(sgmcmc, f"{name}_setup")(log_lik, DATA, {"m": 0.0}, **dict(SMALL, seed=other_seed), **kw)
    sgmcmc.init_sess(other, verbose=False)
    sgmcmc.sample_chain(other, 7, verbose=False)  # its own seed's functions are compiled and fed
    other.restore(str(path))
    assert other.seed == 9 and other.iteration == 129
    again = sgmcmc.sample_chain(other, 171, verbose=False, thin=3, store_gradients=True)
    np.testing.assert_array_equal(again["m"], first["m"])
    np.testing.assert_array_equal(again.gradients["m"], first.gradients["m"])


def test_restore_of_a_checkpoint_without_its_seed_keeps_the_setup_seed(tmp_path, saved):
    """A checkpoint written before the seed was saved restores as before (same seed: exact)."""
    sampler, path, _ = saved("sgld")
    sampler.restore(str(path))
    saved_state.state_checkpoint(sampler, with_seed=False).write(str(tmp_path / "sampler"))
    first = sgmcmc.sample_chain(sampler, 40, verbose=False)
    other = sgmcmc.sgld_setup(log_lik, DATA, {"m": 0.0}, **SMALL, **SETTINGS["sgld"])
    other.restore(str(tmp_path))
    assert other.seed == 9 and other.iteration == 129
    np.testing.assert_array_equal(sgmcmc.sample_chain(other, 40, verbose=False)["m"], first["m"])


@pytest.fixture(scope="module")
def resumed(tmp_path_factory):
    """A checkpointed run (checkpoint_every=500) that failed at its 12th compiled sampling call,
    the manifest it left, and the same call again (resumed to the end): ``(directory, manifest,
    resumed)``. The directory is then a finished run's, which the ``finished`` tests read."""
    path = tmp_path_factory.mktemp("resumed")
    original = sgmcmc.run.sampler.Sampler.sample_groups
    calls = []

    def failing(self, *args, **kwargs):
        calls.append(1)
        if len(calls) == 12:
            raise tf.errors.InternalError(None, None, "simulated failure")
        return original(self, *args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sgmcmc.run.sampler.Sampler, "sample_groups", failing)
        with pytest.raises(sgmcmc.SamplingError):
            run(str(path), 500)
    manifest = json.loads((path / "manifest.json").read_text())
    return path, manifest, run(str(path), 500)


def test_interrupted_run_resumes_from_its_checkpoint(resumed, uninterrupted):
    _, manifest, resumed = resumed
    assert 0 < manifest["iteration"] < RUN["n_iters"] and not manifest["finished"]
    np.testing.assert_array_equal(resumed["m"], uninterrupted["m"])
    np.testing.assert_array_equal(resumed.gradients["m"], uninterrupted.gradients["m"])
    np.testing.assert_array_equal(resumed.log_posterior, uninterrupted.log_posterior)


def test_sigkill_then_same_call_resumes(tmp_path, uninterrupted):
    """A child process running with checkpoint_every=300 is killed with SIGKILL after its second
    checkpoint; the same call here completes the run with the uninterrupted run's arrays."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([HERE, os.environ.get("PYTHONPATH", "")]))
    child = subprocess.Popen([sys.executable, os.path.join(HERE, "checkpoint_model.py"), str(tmp_path), "300"], env=env)
    manifest = tmp_path / "manifest.json"
    deadline = time.time() + 240
    try:
        while time.time() < deadline:
            if manifest.exists() and json.loads(manifest.read_text())["checkpoints"] >= 2:
                break
            if child.poll() is not None:
                pytest.fail(f"the child exited ({child.returncode}) before its second checkpoint")
            time.sleep(0.05)
        else:
            pytest.fail("no second checkpoint within 240 s")
        child.send_signal(signal.SIGKILL)
    finally:
        child.wait()
    saved = json.loads(manifest.read_text())
    assert not saved["finished"] and saved["iteration"] < RUN["n_iters"]
    resumed = run(str(tmp_path), 300)
    np.testing.assert_array_equal(resumed["m"], uninterrupted["m"])
    np.testing.assert_array_equal(resumed.gradients["m"], uninterrupted.gradients["m"])


def forbid_sampling(monkeypatch) -> None:
    """From here on, any iteration run fails the test (a finished directory must not sample)."""

    def no_sampling(self, *args, **kwargs):
        raise AssertionError("a finished run sampled again")

    monkeypatch.setattr(sgmcmc.run.sampler.Sampler, "sample_groups", no_sampling)
    monkeypatch.setattr(sgmcmc.run.sampler.Sampler, "advance", no_sampling)


@pytest.fixture(scope="module")
def finished(resumed):
    """A directory of a finished checkpointed run: the interrupted-then-resumed run's (its arrays
    are the uninterrupted run's, test_interrupted_run_resumes_from_its_checkpoint), rather than
    a third 20,000-iteration run. The tests below only read it: a finished directory is never
    written again, and neither refusal writes. (checkpoint_every is not part of "the same
    arguments": the refusal tests call with its default.)"""
    return resumed[0]


def test_finished_directory_returns_at_once_and_other_arguments_are_refused(finished, uninterrupted, monkeypatch):
    forbid_sampling(monkeypatch)
    again = run(str(finished), 500)
    np.testing.assert_array_equal(again["m"], uninterrupted["m"])
    with pytest.raises(ValueError, match="other arguments"):
        sgmcmc.sgnht(log_lik, DATA, {"m": 0.0}, 2e-5, checkpoint_dir=str(finished), **RUN)


# ---------------------------------------------------------------- what "the same arguments" covers
# Issue 23: a finished directory returned its old samples after the data or the model changed.
# Broken variant checked: with the fingerprint call of _run_with_checkpoints back to its old
# arguments (no data=, functions=, starts=), the three refusal tests below fail (the old samples
# come back); with entry_digest hashing raw bytes (no native byte order), the big-endian
# memmap test fails.


def half_log_lik(params, dataset):
    return 0.5 * log_lik(params, dataset)


def scaled_log_lik(scale):
    def inner(params, dataset):
        return scale * -0.5 * tf.reduce_sum(tf.square(dataset["x"] - params["m"]))

    return inner


def changes(err) -> list[str]:
    """The listed changes of a refusal."""
    return [line[4:] for line in str(err.value).splitlines() if line.startswith("  - ")]


def test_changed_data_model_or_start_is_refused_naming_what_changed(finished, uninterrupted, monkeypatch):
    forbid_sampling(monkeypatch)
    call = lambda ll, data, start: sgmcmc.sgnht(ll, data, start, 1e-5, checkpoint_dir=str(finished), **RUN)  # noqa: E731
    # The same content in a new array (another object): the stored result, at once.
    again = call(log_lik, {"x": X.copy()}, {"m": 0.0})
    np.testing.assert_array_equal(again["m"], uninterrupted["m"])
    with pytest.raises(ValueError, match=r"(?s)other arguments.*data: entry 'x' has other values.*delete the directory") as err:
        call(log_lik, {"x": 2 * X}, {"m": 0.0})
    assert changes(err) == ["data: entry 'x' has other values"]
    with pytest.raises(ValueError, match=r"(?s)what changed:\n  - log_lik: its code") as err:
        call(half_log_lik, DATA, {"m": 0.0})
    assert changes(err) == ["log_lik: its code, or a value it uses (closure, default, global), changed"]
    with pytest.raises(ValueError, match=r"starting values") as err:
        call(log_lik, DATA, {"m": 0.5})
    assert len(changes(err)) == 1
    # A row appended: N and the data's shape.
    with pytest.raises(ValueError, match=r"data: entry 'x' shape/dtype \[2000\] f4 -> \[2001\] f4"):
        call(log_lik, {"x": np.append(X, np.float32(0.0))}, {"m": 0.0})


def test_function_digest_sees_closures_globals_and_defaults_not_line_numbers():
    from sgmcmc.run.checkpoints import function_digest

    assert function_digest(scaled_log_lik(1.0)) == function_digest(scaled_log_lik(1.0))
    assert function_digest(scaled_log_lik(1.0)) != function_digest(scaled_log_lik(0.5))
    assert function_digest(log_lik) != function_digest(half_log_lik)
    namespace: dict = {"tf": tf, "SCALE": 1.0}
    source = "def f(p, d, k=2):\n    return SCALE * k * tf.reduce_sum(d['x'] - p['m'])\n"
    exec(compile(source, "<a>", "exec"), namespace)
    base = function_digest(namespace["f"])
    exec(compile("\n\n# moved down, a comment\n" + source, "<b>", "exec"), namespace)
    assert function_digest(namespace["f"]) == base  # line numbers and file names do not count
    namespace["SCALE"] = 0.5
    assert function_digest(namespace["f"]) != base  # a global it reads
    namespace["SCALE"] = 1.0
    namespace["f"].__defaults__ = (3,)
    assert function_digest(namespace["f"]) != base  # a default


class _RowCounter:
    """An on-disk-like entry: numpy indexing on the first axis, counting the rows read."""

    def __init__(self, array):
        self.array, self.rows_read = array, 0
        self.shape, self.dtype = array.shape, array.dtype

    def __getitem__(self, index):
        out = self.array[index]
        self.rows_read += len(out)
        if isinstance(index, np.ndarray):
            assert np.all(np.diff(index) > 0), "indices must be sorted and distinct (h5py)"
        return out


def test_data_digest_of_memmap_h5py_and_memory_agree_and_reads_few_rows(tmp_path, monkeypatch):
    from sgmcmc.run.checkpoints import SAMPLED_ROWS, data_digest, entry_digest
    from sgmcmc.data import rows
    from sgmcmc.data.rows import CastEntry

    # An on-disk entry's rows are read by spans: needed rows closer than rows.GAP_BYTES share one
    # read, so at 64-byte rows and 4,189 of 400,000 rows needed every gap is read (395,451 rows,
    # 25 MB). With the gap set to nothing only the needed rows are read: what is counted here is
    # that the digest asks for a few thousand rows, not the whole entry.
    monkeypatch.setattr(rows, "GAP_BYTES", 0)

    x = np.random.default_rng(0).normal(size=(400_000, 8))  # 25.6 MB: above the whole-hash size
    path = str(tmp_path / "x.npy")
    np.save(path, x.astype(">f8"))  # big-endian on disk: same values, other bytes
    mapped = np.load(path, mmap_mode="r")
    assert entry_digest(mapped) == entry_digest(x)
    counter = _RowCounter(x)
    assert entry_digest(counter) == entry_digest(x)
    assert counter.rows_read < SAMPLED_ROWS + 200  # 4,189 of 400,000 rows
    # A float64 entry of a float32 model reaches the sampler as a CastEntry (sgmcmc.data.rows): its
    # digest is the stored values', read through it a few rows at a time.
    counted = _RowCounter(x)
    assert entry_digest(CastEntry(counted, np.float32)) == entry_digest(x)
    assert counted.rows_read < SAMPLED_ROWS + 200
    h5py = pytest.importorskip("h5py")
    with h5py.File(str(tmp_path / "x.h5"), "w") as f:
        f["x"] = x
    with h5py.File(str(tmp_path / "x.h5"), "r") as f:
        assert data_digest({"x": f["x"]}) == data_digest({"x": x})
    # Whole-entry changes are seen; so is any change of a small entry (hashed whole).
    assert entry_digest(x * 2) != entry_digest(x)
    small = x[:1000].copy()
    before = entry_digest(small)
    small[517, 3] += 1e-12
    assert entry_digest(small) != before


def test_memmapped_data_changed_on_disk_is_refused(tmp_path):
    """Main's data path reads a memmap in place (a float64 file in a float32 model: through a
    CastEntry). A finished directory returns its result for the same file and refuses after the
    file's values changed on disk (the same path, the same shape)."""
    path = str(tmp_path / "x.npy")
    np.save(path, X.astype(np.float64))
    data = {"x": np.load(path, mmap_mode="r")}
    call = lambda d: sgmcmc.sgld(log_lik, d, {"m": 0.0}, 1e-4, checkpoint_dir=str(tmp_path / "ck"), **RUN)  # noqa: E731
    first = call(data)
    np.testing.assert_array_equal(call({"x": np.load(path, mmap_mode="r")})["m"], first["m"])
    writable = np.load(path, mmap_mode="r+")
    writable[:] = 2 * writable
    writable.flush()
    del writable
    with pytest.raises(ValueError, match=r"data: entry 'x' has other values"):
        call({"x": np.load(path, mmap_mode="r")})
