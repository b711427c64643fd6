"""The model checks of the trial evaluation (SPEC §4): the user's functions evaluated on a few
rows before anything is compiled, their errors translated into messages naming the fix."""

from __future__ import annotations

import difflib
import inspect
import os
import re
import traceback
from typing import Any, Callable, Mapping

import numpy as np
import tensorflow as tf

from .._quiet import trial_lines_filtered
from ..graph_options import own_function
from ..data.rows import take_rows
from .data import SCAN_CHUNK_BYTES


#: Rows used for the trial evaluation of the user's functions.
TRIAL_ROWS = 10


def _is_dtype_clash(error: Exception) -> bool:
    text = str(error).lower().replace("float64", "double")
    return "double" in text and "float" in text


#: Rows in each of the two disjoint sets of the additivity check.
ADDITIVITY_ROWS = 5

#: Largest |log_lik(A u B) - log_lik(A) - log_lik(B)| accepted, relative to
#: max(|log_lik(A)| + |log_lik(B)|, |log_lik(A u B)|); the same for each parameter's gradient
#: (Euclidean norms). Honest models (tests/test_model_checks.py::test_honest_models_pass_*:
#: logistic regression on covertype-shaped data, a two-component Gaussian mixture, a softmax
#: network with tf.gather of integer labels, the Gaussian and regression models of the test
#: suite; at the start and at 4 random points) stayed below 4.1e-7 in float32 and 2.3e-16 in
#: float64 (worst: the softmax network, 4.1e-7); a log_lik that closes over the
#: full data or takes a mean over rows is off by ~0.5 (the sum counted once instead of twice,
#: or halved). 1e-3 leaves three orders of magnitude on each side, whatever the dtype.
ADDITIVITY_RTOL = 1e-3

_OPT_OUT = (
    "If the model is right as it is (e.g. a deliberately unused parameter, or a log_lik that is "
    "knowingly not a sum over rows), pass check_model=False to skip this check."
)


def _integer_ranges(dataset: dict[str, Any]) -> dict[str, tuple[int, int, int, int]]:
    """For each integer entry: its min, max, and a row holding each (read in blocks)."""
    out = {}
    for name, array in dataset.items():
        if np.dtype(array.dtype).kind not in "iu" or len(array) == 0:
            continue
        row_bytes = max(1, int(np.prod(array.shape[1:], dtype=np.int64)) * np.dtype(array.dtype).itemsize)
        step = max(1, SCAN_CHUNK_BYTES // row_bytes)
        low = high = None
        for start in range(0, len(array), step):
            block = np.asarray(array[start : start + step]).reshape(min(step, len(array) - start), -1)
            lows, highs = block.min(axis=1), block.max(axis=1)
            i, j = int(np.argmin(lows)), int(np.argmax(highs))
            if low is None or lows[i] < low[0]:
                low = (int(lows[i]), start + i)
            if high is None or highs[j] > high[0]:
                high = (int(highs[j]), start + j)
        out[name] = (low[0], high[0], low[1], high[1])
    return out


def rows_as_tensors(dataset: dict[str, Any], rows: np.ndarray) -> dict[str, tf.Tensor]:
    """The given rows of every entry as small tensors (only those rows are read)."""
    return {name: tf.constant(np.ascontiguousarray(take_rows(array, rows))) for name, array in dataset.items()}


def _value_and_grads(fn: Callable, params: dict[str, tf.Tensor]) -> tuple[tf.Tensor, dict]:
    with tf.GradientTape() as tape:
        tape.watch(params)
        value = fn(params)
    grads = tape.gradient(value, params, unconnected_gradients=tf.UnconnectedGradients.NONE)
    return value, grads


def _dense(gradient, like: tf.Tensor) -> np.ndarray:
    if gradient is None:
        return np.zeros(like.shape, like.dtype.as_numpy_dtype)
    return tf.convert_to_tensor(gradient).numpy()


def _perturbed(params: dict[str, np.ndarray]) -> dict[str, tf.Tensor]:
    """The start nudged by about 1% of each value (0.01 where it is 0), in a fixed irregular
    pattern, so a symmetric start (zeros, equal components) cannot hide a wrong model."""
    out, offset = {}, 0
    for name, value in params.items():
        pattern = np.sin(1.0 + 2.39996 * (offset + np.arange(value.size))).reshape(value.shape)
        offset += value.size
        nudged = np.where(value == 0, 0.01 * pattern, value * (1 + 0.01 * pattern))
        out[name] = tf.constant(nudged.astype(value.dtype))
    return out


def _relative_gap(whole: np.ndarray, a: np.ndarray, b: np.ndarray) -> float:
    gap = float(np.linalg.norm(np.ravel(whole.astype(np.float64) - a - b)))
    scale = max(
        float(np.linalg.norm(np.ravel(a.astype(np.float64)))) + float(np.linalg.norm(np.ravel(b.astype(np.float64)))),
        float(np.linalg.norm(np.ravel(whole.astype(np.float64)))),
    )
    return 0.0 if gap == 0 else (gap / scale if scale > 0 else np.inf)


def additivity_gaps(log_lik: Callable, dataset: dict[str, np.ndarray], params: dict[str, np.ndarray]) -> dict[str, float]:
    """Relative gaps of log_lik(A u B) - log_lik(A) - log_lik(B) for the value (key ``""``)
    and each parameter's gradient, on two disjoint sets of :data:`ADDITIVITY_ROWS` rows taken
    from the first and second halves of the data, at the nudged start (the start itself
    if the nudged one is not finite). Empty if there are fewer than 2 rows."""
    n = len(next(iter(dataset.values())))
    if n < 2:
        return {}
    half = n // 2
    first = np.unique(np.linspace(0, half - 1, ADDITIVITY_ROWS).round().astype(np.int64))
    second = np.unique(np.linspace(half, n - 1, ADDITIVITY_ROWS).round().astype(np.int64))
    sets = [rows_as_tensors(dataset, first), rows_as_tensors(dataset, second), rows_as_tensors(dataset, np.concatenate([first, second]))]
    for point in (_perturbed(params), {k: tf.constant(v) for k, v in params.items()}):
        results = [_value_and_grads(lambda p, batch=batch: log_lik(p, batch), point) for batch in sets]
        if all(np.isfinite(value.numpy()) for value, _ in results):
            break
    (va, ga), (vb, gb), (vab, gab) = results
    gaps = {"": _relative_gap(vab.numpy(), va.numpy(), vb.numpy())}
    for name, like in point.items():
        gaps[name] = _relative_gap(_dense(gab[name], like), _dense(ga[name], like), _dense(gb[name], like))
    return gaps


def _integer_arithmetic(call: Callable, batch: dict[str, tf.Tensor], dtype: tf.DType) -> list[str] | None:
    """The integer entries whose cast to ``dtype`` makes ``call(batch)`` work (one at a time,
    then all together), or None if no such cast does."""
    integers = [name for name, value in batch.items() if value.dtype.is_integer]
    trials = [[name] for name in integers] + ([integers] if len(integers) > 1 else [])
    for names in trials:
        try:
            call({k: tf.cast(v, dtype) if k in names else v for k, v in batch.items()})
        except Exception:  # the user's code may raise anything
            continue
        return names
    return None


_OUT_OF_RANGE = re.compile(r"indices\S* = (-?\d+) is not in \[0, (\d+)\)")


def _out_of_range_message(error: Exception, ranges: dict, params: Mapping[str, Any]) -> str | None:
    """What an out-of-range ``tf.gather`` in the trial evaluation means: labels outside
    [0, size) — or, when the labels are 0-based and a parameter's first axis has exactly that
    size, a start too short for them."""
    match = _OUT_OF_RANGE.search(str(error))
    if match is None:
        return None
    value, size = int(match.group(1)), int(match.group(2))
    suspects = [n for n, (lo, hi, _, _) in ranges.items() if (lo < 0 or hi >= size) and lo <= value <= hi]
    if not suspects:
        suspects = [n for n, (lo, hi, _, _) in ranges.items() if lo < 0 or hi >= size]
    if not suspects:
        return None
    described = ", ".join(f"dataset[{n!r}] holds {ranges[n][0]}..{ranges[n][1]}" for n in suspects)
    short = [n for n, v in params.items() if np.ndim(v) > 0 and np.shape(v)[0] == size]
    if short and all(ranges[n][0] == 0 for n in suspects):
        needed = max(ranges[n][1] for n in suspects) + 1
        starts = ", ".join(f"params[{n!r}] has shape {tuple(np.shape(params[n]))}" for n in short)
        fixed = ", ".join(f"{(needed, *np.shape(params[n])[1:])}" for n in short)
        return (
            f"log_lik indexes something of size {size} (tf.gather or similar) with the value {value}: "
            f"{described} (0-based labels of {needed} groups) but {starts}. A parameter's shape is its "
            f"starting value's: give a start with one entry per group, shape {fixed}"
        )
    one_based = all(ranges[n][0] >= 1 and ranges[n][1] == size for n in suspects)
    hint = " They look 1-based (as labels from R are): pass labels - 1." if one_based else ""
    return (
        f"log_lik indexes something of size {size} (tf.gather or similar) with the value {value}, out of "
        f"range: {described}. Integer entries used as indices must be 0-based, in [0, {size}).{hint}"
    )


def _float_indices(call: Callable, batch: dict[str, tf.Tensor]) -> list[str] | None:
    """The float entries whose cast to int32 makes ``call(batch)`` work (one at a time, then all
    together): float labels used as indices. None if no such cast does."""
    floats = [name for name, value in batch.items() if value.dtype.is_floating]
    trials = [[name] for name in floats] + ([floats] if len(floats) > 1 else [])
    for names in trials:
        try:
            call({k: tf.cast(v, tf.int32) if k in names else v for k, v in batch.items()})
        except Exception:  # the user's code may raise anything
            continue
        return names
    return None


_SHAPE_CLASH = re.compile(
    r"Incompatible shapes|size-incompatible|Dimensions must be equal|shapes must be equal|are incompatible"
    r"|Cannot reshape|Input to reshape is a tensor with|must have the same shape|cannot be broadcast"
)


def _shape_clash_message(error: Exception, batch: dict[str, tf.Tensor], params: Mapping[str, Any]) -> str | None:
    """A shape mismatch in the trial evaluation, said with the starts' and rows' shapes; the
    parameters with none of the sizes the error names are the likeliest culprits."""
    text = str(error)
    if not _SHAPE_CLASH.search(text):
        return None
    sizes = {int(d) for d in re.findall(r"\d+", text)}
    starts = {n: tuple(np.shape(v)) for n, v in params.items()}
    rows = {n: tuple(v.shape[1:]) for n, v in batch.items()}
    data_sizes = {d for shape in rows.values() for d in shape}
    odd = [n for n, shape in starts.items() if shape and any(d in sizes and d not in data_sizes for d in shape)]
    lead = f"params {odd} have sizes the data do not: " if odd else ""
    return (
        f"log_lik failed with a shape mismatch on a trial minibatch ({type(error).__name__}: {error}). "
        f"{lead}the starting values have shapes {starts} and the dataset's rows {rows}. A parameter's shape "
        f"is its starting value's: give each start the shape log_lik expects (e.g. one coefficient per "
        f"column of a data entry)"
    )


def _closest(name: str, names: list[str]) -> str | None:
    """The name in ``names`` closest to ``name``: equal ignoring case, else difflib's best match."""
    same = [n for n in names if n.lower() == name.lower()]
    if same:
        return same[0]
    by_lower = {n.lower(): n for n in names}
    close = difflib.get_close_matches(name.lower(), list(by_lower), n=1, cutoff=0.6)
    return by_lower[close[0]] if close else None


def _missing_name_message(
    error: Exception, what: str, dataset: Mapping[str, Any] | None, params: Mapping[str, Any]
) -> str | None:
    """A ``KeyError`` of a name that is neither a dataset entry nor a parameter (a misspelling,
    ``d["y"]`` for ``{"Y": y}``), said with the names there are and the closest one."""
    if not isinstance(error, KeyError) or len(error.args) != 1 or not isinstance(error.args[0], str):
        return None
    name = error.args[0]
    entries = [] if dataset is None else [str(k) for k in dataset]
    names = [str(k) for k in params]
    if name in entries or name in names:
        return None  # the key exists: the KeyError came from elsewhere in the user's code
    listed = f"params has {names}" if dataset is None else f"the dataset has entries {entries} and params has {names}"
    closest = _closest(name, entries + names)
    hint = ""
    if closest is not None:
        where = f"dataset[{closest!r}]" if closest in entries else f"params[{closest!r}]"
        hint = f" Did you mean {where}?"
    return (
        f"{what} failed on a trial evaluation (KeyError: {name!r}): there is no {name!r}; {listed}.{hint} "
        f"Read the data as dataset[name] and the parameters as params[name], with the names you passed"
    )


def trial_evaluation(
    log_lik: Callable,
    log_prior: Callable | None,
    dataset: dict[str, np.ndarray],
    params: dict[str, np.ndarray],
    dtype: tf.DType,
    check_model: bool = True,
) -> None:
    """Evaluate the user's functions eagerly, on the CPU, before anything is compiled.

    Always: ``log_lik`` on the first :data:`TRIAL_ROWS` rows plus, for each integer entry,
    the rows holding its min and its max (so an out-of-range ``tf.gather`` index fails here),
    and ``log_prior`` once: catches a non-scalar result, a dtype clash, an integer entry used
    in float arithmetic, an out-of-range index, a non-finite value at the start.

    With ``check_model`` (the default), also the mistakes that would otherwise give a wrong
    posterior silently: a parameter with no gradient path to ``log_lik`` or ``log_prior``
    (graph connectivity, not a zero value), and a ``log_lik`` that is not additive over rows
    (:func:`additivity_gaps`: a mean instead of a sum, or one that ignores its ``dataset``
    argument and closes over the full data).

    Last, always: each function traced once into a graph, as the samplers compile it
    (:func:`_check_traceable`), so that Python control flow on a tensor that AutoGraph cannot
    convert is explained here rather than mid-set-up. A misspelt name (a ``KeyError``) is
    reported with the names there are and the closest one."""
    if not callable(log_lik):
        raise TypeError("log_lik must be a function log_lik(params, dataset) returning a scalar tensor")
    if log_prior is not None and not callable(log_prior):
        raise TypeError("log_prior must be a function log_prior(params) returning a scalar tensor, or None")
    # On a GPU an out-of-range tf.gather returns zeros instead of failing.
    # Failures provoked here would log TensorFlow's "Local rendezvous is aborting" W line when the
    # log level lets W through (TensorFlow imported before sgmcmc): dropped, our message says more.
    with tf.device("/CPU:0"), trial_lines_filtered():
        _trial(log_lik, log_prior, dataset, params, dtype, check_model)


def _trial(log_lik, log_prior, dataset, params, dtype, check_model) -> None:
    n = len(next(iter(dataset.values())))
    ranges = _integer_ranges(dataset)
    rows = set(range(min(TRIAL_ROWS, n)))
    for _, _, low_row, high_row in ranges.values():
        rows.update((low_row, high_row))
    batch = rows_as_tensors(dataset, np.array(sorted(rows), dtype=np.int64))
    tensors = {k: tf.constant(v) for k, v in params.items()}
    checks = [("log_lik", lambda data=batch: log_lik(tensors, data))]
    if log_prior is not None:
        checks.append(("log_prior", lambda: log_prior(tensors)))
    for what, call in checks:
        try:
            value = tf.convert_to_tensor(call())
        except Exception as error:  # the user's code may raise anything
            if what == "log_lik":
                culprits = _integer_arithmetic(lambda data: log_lik(tensors, data), batch, dtype)
                if culprits:
                    entries = " and ".join(f"dataset[{n!r}]" for n in culprits)
                    casts = ", ".join(f"tf.cast(dataset[{n!r}], tf.{dtype.name})" for n in culprits)
                    raise TypeError(
                        f"{entries} holds integers but log_lik uses it in floating-point arithmetic "
                        f"({type(error).__name__}: {error}). Cast it inside log_lik with {casts}, or pass "
                        f"it as floats (e.g. y.astype(np.{dtype.name})); keep integers only for entries used "
                        f"as indices (tf.gather, tf.one_hot)"
                    ) from error
                message = _out_of_range_message(error, ranges, params)
                if message:
                    raise ValueError(f"{message} ({type(error).__name__}: {error})") from error
                labels = _float_indices(lambda data: log_lik(tensors, data), batch)
                if labels:
                    entries = " and ".join(f"dataset[{n!r}]" for n in labels)
                    raise TypeError(
                        f"{entries} holds floats but log_lik uses it as indices (tf.gather, tf.one_hot, ...), "
                        f"which must be integers ({type(error).__name__}: {error}). Pass the labels as 0-based integers, "
                        f"e.g. labels.astype(np.int32), or cast inside log_lik with tf.cast(..., tf.int32)"
                    ) from error
                message = _shape_clash_message(error, batch, params)
                if message:
                    raise ValueError(message) from error
            if _is_dtype_clash(error):
                other = tf.float32 if dtype == tf.float64 else tf.float64
                raise TypeError(
                    f"{what} mixes {other.name} and {dtype.name} tensors ({type(error).__name__}: {error}). "
                    f"The model runs in {dtype.name}: create constants with dtype=tf.{dtype.name} "
                    f"(e.g. tf.constant(x, dtype=tf.{dtype.name})), or run the sampler with "
                    f"dtype=tf.{other.name}"
                ) from error
            message = _missing_name_message(error, what, dataset if what == "log_lik" else None, params)
            if message:
                raise RuntimeError(message) from error
            raise RuntimeError(
                f"{what} failed on a trial evaluation ({type(error).__name__}: {error}); check that it "
                f"uses params[name] and dataset[name] with the names you passed"
            ) from error
        if value.shape.rank != 0:
            raise ValueError(
                f"{what} must return a scalar (the sum over observations), but returned shape "
                f"{value.shape.as_list()}: wrap the result in tf.reduce_sum"
            )
        if value.dtype != dtype:
            raise TypeError(
                f"{what} returned a {value.dtype.name} value but the model runs in {dtype.name}: "
                f"create constants with dtype=tf.{dtype.name}, or run the sampler with dtype=tf.{value.dtype.name}"
            )
        if not np.isfinite(value.numpy()):
            raise ValueError(
                f"{what} is {value.numpy()} at the starting values: start inside the support of the model"
            )
    if check_model:  # eager, like everything above: the mistakes they find are reported first
        _check_connected(log_lik, log_prior, batch, tensors)
        _check_additive(log_lik, dataset, params)
    _check_traceable("log_lik", log_lik, (tensors, batch))
    if log_prior is not None:
        _check_traceable("log_prior", log_prior, (tensors,))


def _has_source(fn: Callable) -> bool:
    """Whether AutoGraph can read ``fn``'s source (not for code piped to ``python -``, typed at
    an interactive prompt or made by ``exec``)."""
    try:
        inspect.getsource(fn)
    except (OSError, TypeError):
        return False
    return True


def _user_line(error: BaseException) -> str:
    """`` at <file>, line <n> (in <function>)``: the innermost frame of ``error``'s traceback outside
    TensorFlow and this package, or ``""``."""
    library = (os.path.dirname(tf.__file__), os.path.dirname(os.path.dirname(__file__)))
    frames = [f for f in traceback.extract_tb(error.__traceback__) if not f.filename.startswith(library)]
    if not frames:
        return ""
    frame = frames[-1]
    return f" at {frame.filename}, line {frame.lineno} (in {frame.name})"


#: (code, argument specs) of the functions found traceable: a second sampler of the same model
#: (a reused compiled program, ``api/reuse.py``) traces nothing again.
_TRACEABLE: set = set()


def _check_traceable(what: str, user_fn: Callable, args: tuple) -> None:
    """Trace ``user_fn(*args)`` into a graph, as the samplers' compiled functions do, and
    explain the failure the eager evaluation cannot see: Python control flow on a tensor.

    The samplers trace the user's functions without AutoGraph and convert them with AutoGraph
    only when that trace fails (``graph_options.AutographIfNeeded``). So this trace is one plain
    trace (a few milliseconds, nothing run); only when it fails is the function traced again with
    AutoGraph — AutoGraph's own "could not transform" warning silenced — and, if that fails
    too, the sampler would fail the same way mid-set-up with ~60 lines of AutoGraph's traceback:
    raised here instead as a ValueError saying what to change. The user's function is traced
    itself (not a lambda around it: AutoGraph converts a ``def`` it can read, and a wrapping
    lambda made it fail on test_autograph's models). Done once per code and argument types."""
    specs = tuple({k: tf.type_spec_from_value(v) for k, v in a.items()} for a in args)  # sparse/ragged too
    key = (getattr(user_fn, "__code__", None) or id(user_fn), repr(specs))
    if key in _TRACEABLE:
        return
    try:
        # own_function: no "triggered retracing" notice from the fifth sampler of a process on
        own_function(user_fn, autograph=False).get_concrete_function(*specs)
        _TRACEABLE.add(key)
        return
    except tf.errors.OpError:
        return  # an op that fails when run: the eager evaluation above ran it
    except Exception as error:  # noqa: BLE001 — the user's code under tracing may raise anything
        plain_error = error
    logger = tf.get_logger()
    level = logger.level
    logger.setLevel("ERROR")  # AutoGraph's "could not transform ... will run it as-is" warning
    try:
        own_function(user_fn, autograph=True).get_concrete_function(*specs)
        _TRACEABLE.add(key)
        return  # AutoGraph converts it: the samplers will do the same
    except Exception as error:  # noqa: BLE001
        converted_error = error
    finally:
        logger.setLevel(level)
    first_line = str(converted_error).strip().splitlines()[-1] if str(converted_error).strip() else ""
    if isinstance(plain_error, tf.errors.OperatorNotAllowedInGraphError):
        why = (
            "AutoGraph, which converts such code, cannot read its source (a function defined in code piped "
            "to `python -`, typed at an interactive prompt or made by exec)"
            if not _has_source(user_fn)
            else f"AutoGraph could not convert it ({type(converted_error).__name__}: {first_line})"
        )
        # The cause's traceback is TensorFlow's tracing machinery: the user's line is named instead.
        raise ValueError(
            f"{what} uses Python control flow on a tensor{_user_line(plain_error)} (`if`, `while`, `and`/`or` or "
            f"`assert` on a tensor value, `for` over a tensor): it ran eagerly on a trial evaluation, but the "
            f"samplers compile it into a graph, where a tensor has no Python truth value, and {why}. Write the "
            f"choice with tensor ops (tf.where(cond, a, b) for values, tf.cond / tf.while_loop for computations), "
            f"or define {what} in a .py file so that AutoGraph can convert it"
        ) from None
    raise ValueError(
        f"{what} runs eagerly but cannot be traced into a graph, which the samplers compile it into "
        f"({type(plain_error).__name__}: {plain_error}). Use TensorFlow operations on the tensors it is given: "
        f"no .numpy(), no numpy functions or Python conversions (float(), int()) of a tensor"
    ) from plain_error


def _check_connected(log_lik, log_prior, batch, tensors) -> None:
    def log_post(p):
        value = log_lik(p, batch)
        return value if log_prior is None else value + log_prior(p)

    _, grads = _value_and_grads(log_post, tensors)
    unused = [name for name, g in grads.items() if g is None]
    if unused:
        where = "log_lik or log_prior" if log_prior is not None else "log_lik (there is no log_prior)"
        raise ValueError(
            f"params {unused} have no gradient path to {where}: they are never used (a misspelt "
            f"name such as params['thta'], or a parameter left over), or only through operations "
            f"without a gradient (tf.round, tf.argmax, a cast to integers). The sampler would move "
            f"them by noise alone. Use every parameter in log_lik or log_prior through "
            f"differentiable operations, or remove it from params. {_OPT_OUT}"
        )


def _check_additive(log_lik, dataset, params) -> None:
    gaps = additivity_gaps(log_lik, dataset, params)
    failed = {name: gap for name, gap in gaps.items() if not gap <= ADDITIVITY_RTOL}
    if not failed:
        return
    parts = [("its value" if name == "" else f"the gradient of {name!r}") + f" by {gap:.2g}" for name, gap in failed.items()]
    raise ValueError(
        f"log_lik is not additive over rows: on two disjoint sets A and B of {ADDITIVITY_ROWS} rows, "
        f"log_lik(A and B together) differs from log_lik(A) + log_lik(B) in {', '.join(parts)} "
        f"(relative; at most {ADDITIVITY_RTOL:g} is float rounding). The package expects log_lik(params, "
        f"dataset) to be the SUM of the log-likelihood over the rows it is given, computed from those "
        f"rows only: it scales a minibatch's value by N/n. Use tf.reduce_sum, not tf.reduce_mean, and "
        f"read the data from the dataset argument, not from arrays closed over from outside. "
        f"{_OPT_OUT}"
    )


# -- storage -----------------------------------------------------------------------------------
