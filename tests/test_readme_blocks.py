"""Every ```python block of README.md runs in a process of its own, as a newcomer would run it:
no warning, nothing on stderr but progress bars, and the numbers the README quotes (issue 44).

The README's conventions (its "README examples are tests" paragraph says the same to readers):

* **Groups.** A block whose first code line (comments and blank lines aside) is an ``import``
  starts a group; a block whose first code line is not continues the group before it, in the
  same process, after it. Each group runs as one script file (so AutoGraph and tracebacks see
  its source), as ``__main__`` of its own process, in a temporary directory (files the examples
  write land there). That process is forked from one that has only run ``import sgmcmc``
  (tests/readme_runner.py: one import of TensorFlow for all groups instead of one per group,
  6.5-8 CPU s each): what it printed is checked as every group's, and a group that imports
  TensorFlow, TFP or Keras before sgmcmc fails (a fresh process would print TensorFlow's
  start-up lines; :func:`import_order_problem`).
* **Skipped blocks.** A block whose first line is a comment containing "skip" or "not run" and
  a reason is not run (only for blocks that need the network, another machine or many minutes);
  it starts a group of its own, and a block continuing it must carry its own marker.
* **Quoted output.** A ```text block right after a python block (only blank lines between) is
  what that block prints to stdout. Text must match exactly up to runs of whitespace; ``...``
  stands for any text; a number written without a decimal point or exponent (a count, a shape)
  must match exactly, any other within :data:`RTOL` relative or half a unit of its last quoted
  digit, whichever is larger (seeded runs are bit-for-bit on one machine; the tolerance is for
  another machine's rounding, which changes a chain's path).
* **Declared warnings.** A comment ``# <Name>Warning: <message>`` (continued on the comment lines
  right after it) says that the block deliberately shows that warning: the run must print it,
  its message matching as quoted output does. Any other warning fails the test.

What counts as "what a user sees": the process runs with the user's environment minus
``TF_CPP_MIN_LOG_LEVEL`` (``tasks.py`` and the conftest set it to 2; a newcomer has not set it,
and ``import sgmcmc`` must then quiet TensorFlow by itself) and with Python's default warning
filters: a warning counts when it is printed to stderr. Running with ``-W default`` or ``-W
error`` instead was tried: it fails at ``import tensorflow_probability`` on TFP's own distutils
DeprecationWarning, which no user sees (Python hides DeprecationWarnings raised outside
``__main__``); warnings raised by the README's code itself (``__main__``) are shown by the
default filters, so they fail the test. stderr may hold, besides declared warnings, only tqdm
progress bars, the samplers' verbose report lines (``<sampler>: ...``), and TensorFlow's
``cuInit`` ERROR line on machines without a GPU (``sgmcmc/_quiet.py`` says why it is not hidden).

The README's statistical claims for two examples are checked against exact posteriors on the
run's own variables (:data:`CHECKS`; the hierarchical and first-example checks came from
test_readme_example.py).
"""

from __future__ import annotations

import dataclasses
import decimal
import json
import os
import pickle
import re
import subprocess
import sys
from pathlib import Path
from typing import Callable

import numpy as np
import pytest

from sgmcmc.datasets import cache_dir

README = Path(__file__).resolve().parents[1] / "README.md"

#: Relative tolerance for a quoted non-integer number (see the module docstring).
RTOL = 0.02

#: What separates the blocks of a group on stdout and stderr.
SENTINEL = "@@README-BLOCK-END@@"

#: Wall-clock limit for one group (the slowest, the Keras example, takes ~40 s on 2 cores): the
#: runner's alarm in the group's process (tests/readme_runner.py).
TIMEOUT = 600

_NUMBER = r"-?(?:\d+(?:\.\d+)?|\.\d+)(?:[eE][-+]?\d+)?"
_IMPORT = re.compile(r"^(import|from)\s")
_SKIP = re.compile(r"^#.*\b(skip|skipped|not run)\b", re.I)
_WARNING_COMMENT = re.compile(r"^#\s*(\w*Warning): (.*)$")
#: A warning as Python prints it: ``<file>:<line>: <Category>: <message>``.
_WARNING_LINE = re.compile(r"^(?P<file>.+?):(?P<line>\d+): (?P<category>\w+): (?P<message>.*)$")
#: A tqdm progress bar (what is left of a line after the carriage returns), with a total
#: (``desc:  42%|████▏ | 2100/5000 [00:01<00:01, 2638.84it/s]``) or without
#: (``desc: 1.00krows [00:00, 496krows/s]``).
_PROGRESS = re.compile(
    r"^.*(\d+%\|.*\|\s*[\d.?]+[kMGT]?/[\d.?]+[kMGT]?|: [\d.]+[kMGT]?\w*) \[[^\]]*\]\s*$"
)
#: TensorFlow's ERROR line at the first op on a machine without a GPU (see the module docstring).
_CUINIT = re.compile(r"^E\d{4} [\d:. ]+\d+ cuda_platform\.cc:\d+\] failed call to cuInit")


@dataclasses.dataclass
class Block:
    """One ```python block: its first line's number in README.md, the section it is under, its
    code, its quoted stdout (the ```text block after it, or None) and declared warnings."""

    line: int
    section: str
    code: str
    output: str | None = None
    warnings: list[tuple[str, str]] = dataclasses.field(default_factory=list)

    @property
    def first_code_line(self) -> str:
        return next((s for s in (l.strip() for l in self.code.splitlines()) if s and not s.startswith("#")), "")

    @property
    def skip_reason(self) -> str | None:
        first = self.code.lstrip().splitlines()[0].strip() if self.code.strip() else ""
        return first if _SKIP.search(first) else None

    @property
    def starts_group(self) -> bool:
        return bool(_IMPORT.match(self.first_code_line))


def parse_blocks(text: str) -> list[Block]:
    """The ```python blocks of a Markdown text, each with the ```text block right after it."""
    lines = text.splitlines()
    blocks: list[Block] = []
    section, i = "", 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("#") and not line.startswith("#!"):
            section = line.lstrip("#").strip()
        fence = line.strip()
        if fence.startswith("```"):
            lang = fence[3:].strip()
            j = i + 1
            while j < len(lines) and lines[j].strip() != "```":
                j += 1
            body = "\n".join(lines[i + 1 : j]) + "\n"
            if lang == "python":
                blocks.append(Block(i + 1, section, body, warnings=declared_warnings(body)))
            elif lang == "text" and blocks and blocks[-1].output is None and _only_blank_between(lines, blocks[-1], i):
                blocks[-1].output = body
            i = j
        i += 1
    return blocks


def _only_blank_between(lines: list[str], block: Block, start: int) -> bool:
    end = block.line + len(block.code.splitlines())  # the closing fence's index
    return end < start and all(not l.strip() for l in lines[end + 1 : start])


def declared_warnings(code: str) -> list[tuple[str, str]]:
    """The ``# <Name>Warning: message`` comments of a block, a message continued on the comment
    lines right after it."""
    found: list[tuple[str, str]] = []
    lines = [l.strip() for l in code.splitlines()]
    for i, line in enumerate(lines):
        m = _WARNING_COMMENT.match(line)
        if m:
            parts = [m.group(2)]
            for more in lines[i + 1 :]:
                if not more.startswith("#") or _WARNING_COMMENT.match(more):
                    break
                parts.append(more.lstrip("#").strip())
            found.append((m.group(1), " ".join(parts)))
    return found


def group_blocks(blocks: list[Block]) -> list[list[Block]]:
    """Blocks in runnable groups (module docstring); raises on a block that cannot be placed."""
    groups: list[list[Block]] = []
    for block in blocks:
        if block.starts_group or block.skip_reason:
            groups.append([block])
        elif not groups:
            raise ValueError(f"README.md line {block.line}: the first python block must start with an import")
        else:
            if groups[-1][0].skip_reason and not block.skip_reason:
                raise ValueError(
                    f"README.md line {block.line}: this block continues a skipped block (line {groups[-1][0].line}); "
                    f"mark it skipped with its reason too, or make it start with its imports"
                )
            groups[-1].append(block)
    return groups


def _compare_numbers(expected: str, actual: str) -> str | None:
    """None when ``actual`` equals the quoted ``expected`` number (module docstring), else why not."""
    e, a = float(expected), float(actual)
    if not re.search(r"[.eE]", expected):
        return None if e == a else f"{actual} is not {expected} (exact)"
    unit = 10.0 ** decimal.Decimal(expected).as_tuple().exponent
    tolerance = max(RTOL * abs(e), unit / 2)
    return None if abs(a - e) <= tolerance * (1 + 1e-9) else f"{actual} is not {expected} (± {tolerance:.3g})"


def output_mismatch(expected: str, actual: str) -> str | None:
    """None when ``actual`` matches the quoted ``expected`` text, else what differs."""
    pattern, numbers = [], []
    for token in re.finditer(rf"(\.\.\.|…)|(?<![\w.])({_NUMBER})(?![\d])|(\s+)|(.)", expected.strip(), re.S):
        wild, number, space, char = token.groups()
        if wild:
            pattern.append(".*?")
        elif number is not None:
            numbers.append(number)
            pattern.append(rf"(?<![\d.])({_NUMBER})(?!\d)")
        elif space:
            pattern.append(r"\s+")
        else:
            pattern.append(re.escape(char))
    match = re.fullmatch("".join(pattern), actual.strip(), re.S)
    if match is None:
        return f"the text differs:\n--- quoted\n{expected.strip()}\n--- printed\n{actual.strip()}"
    problems = [p for p in map(_compare_numbers, numbers, match.groups()) if p]
    return "; ".join(problems) or None


def stderr_problems(stderr: str, declared: list[tuple[str, str]]) -> list[str]:
    """The stderr lines a user should not see, and the declared warnings that were not printed."""
    problems, printed = [], []
    lines = [seg for line in stderr.split("\n") for seg in line.split("\r")]
    i = 0
    while i < len(lines):
        line = lines[i].rstrip()
        i += 1
        if not line.strip() or _PROGRESS.match(line) or _CUINIT.match(line) or _is_report(line):
            continue
        m = _WARNING_LINE.match(line)
        if m and m.group("category").endswith("Warning"):
            while i < len(lines) and lines[i].startswith("  "):  # the source line Python shows under it
                i += 1
            printed.append((m.group("category"), m.group("message")))
            continue
        problems.append(f"stderr line: {line!r}")
    unmatched = list(printed)
    for category, message in declared:
        hit = next((w for w in unmatched if w[0] == category and output_mismatch(message, w[1]) is None), None)
        if hit is None:
            near = [w for w in unmatched if w[0] == category]
            problems.append(f"declared {category} not printed as quoted: {message!r}"
                            + (f"; printed: {near[0][1]!r} ({output_mismatch(message, near[0][1])})" if near else ""))
        else:
            unmatched.remove(hit)
    problems += [f"{c}: {m}" for c, m in unmatched]
    return problems


def _sampler_names() -> set[str]:
    """The samplers' names and ``tune_stepsize``, which prefix their verbose report lines (e.g.
    the CV mode search's distance from the mode, a tuning round's best stepsize)."""
    names = set(re.findall(r"^(\w+)\(", README.read_text(), re.M))
    return names | {"sample", "tune_stepsize", "sgld", "sghmc", "sgnht", "sgldcv", "sghmccv", "sgnhtcv", "psgld", "hamcmc", "osgld", "baoab",
                    "csgld", "csghmc", "scir", "sgrld"}


_REPORT = re.compile(r"^(\w+): ")


def _is_report(line: str) -> bool:
    m = _REPORT.match(line)
    return bool(m) and m.group(1) in _SAMPLERS and "Warning" not in line and "Error" not in line


_SAMPLERS = _sampler_names()


# -- the statistical checks on the runs' own variables -------------------------------------


def _check_hierarchical(ns: dict) -> None:
    """Issue 23.5's hierarchical case (README, "Parameters on different scales"), as the README
    runs it. sgldcv with the check's per-parameter dict recovers mu's exact posterior:
    marginally ybar_j ~ N(mu, 1 + 1/n), so mu | y ~ N(sum(ybar)/(1 + 1/n)/P, 1/P), P = J/(1 +
    1/n) + 1/100 (sd 0.224). Seeds 1-3: mean errors -0.011, +0.022, +0.009 posterior sd, sd
    ratios 1.098, 1.096, 1.099, bulk ESS 7,935, 8,184, 7,833 of 40,000 (bounds: 0.5 sd, 0.9-1.3,
    2,000). With stepsize 1e-3 for both (the old way) mu's bulk ESS was 215 (seed 1)."""
    import sgmcmc

    J, n, y = ns["J"], ns["n"], ns["y"]
    ybar = y.astype(np.float64).reshape(J, n).mean(axis=1)
    precision = J / (1 + 1 / n) + 1 / 100
    exact_mean, exact_sd = ybar.sum() / (1 + 1 / n) / precision, precision**-0.5
    table = sgmcmc.summary(ns["out"]).loc["mu"]
    assert abs(table["mean"] - exact_mean) < 0.5 * exact_sd, (table["mean"], exact_mean)
    assert 0.9 < table["sd"] / exact_sd < 1.3, table["sd"] / exact_sd
    assert table["ess_bulk"] > 2000, table["ess_bulk"]


def _check_normal_mean(ns: dict) -> None:
    """The step-by-step example's running mean is mu's posterior mean: N(sum(x)/(N + 1/100), ...)
    within 3 posterior sds (sd 0.00316 at N = 10^5)."""
    x = ns["x"].astype(np.float64)
    precision = len(x) + 1 / 100
    assert abs(ns["running_mean"] - x.sum() / precision) < 3 * precision**-0.5, ns["running_mean"]


def _check_first_example(ns: dict) -> None:
    """The README's first example (``sgmcmc.sample``) against mu's exact posterior
    N(sum(x)/(N + 1/100), 1/(N + 1/100)), sd 0.00316: converged, the mean within 4 reported MCSE
    and the sd within 10 % (seed 1: 0.3 MCSE, sd ratio 1.04; the stepsize rule allows 1.8 %, the
    sd's own MCSE at ESS 545 is 3 %)."""
    x = ns["x"].astype(np.float64)
    precision = len(x) + 1 / 100
    exact_mean, exact_sd = x.sum() / precision, precision**-0.5
    samples = ns["samples"]
    row = samples.summary().loc["mu"]
    assert samples.report.converged
    assert abs(row["mean"] - exact_mean) < 4 * row["mcse_mean"], (row["mean"], exact_mean)
    assert 0.9 < row["sd"] / exact_sd < 1.1, row["sd"] / exact_sd


#: (text in a group's first block, the variables saved from its run, the check on them).
CHECKS: list[tuple[str, list[str], Callable[[dict], None]]] = [
    ("samples = sgmcmc.sample(log_lik, {\"x\": x}", ["x", "samples"], _check_first_example),
    ("check.safe_stepsize_per_parameter, log_prior=log_prior", ["J", "n", "y", "out"], _check_hierarchical),
    ("sampler = sgmcmc.sgldcv_setup(", ["x", "running_mean"], _check_normal_mean),
]


def _check_of(group: list[Block]) -> tuple[list[str], Callable[[dict], None] | None]:
    return next(((keep, check) for text, keep, check in CHECKS if text in group[0].code), ([], None))


# -- running a group ---------------------------------------------------------------------------


def script(group: list[Block], keep: list[str]) -> str:
    """The group as one script: its blocks, a sentinel line on stdout and stderr after each, and
    (when ``keep``) the named variables pickled to ``namespace.pkl``."""
    end = f"\nimport sys as _sys; print({SENTINEL!r}, flush=True); print({SENTINEL!r}, file=_sys.stderr, flush=True)\n"
    text = end.join(b.code for b in group) + end
    if keep:
        text += f"\nimport pickle as _pickle\n_pickle.dump({{k: globals()[k] for k in {keep!r}}}, open('namespace.pkl', 'wb'))\n"
    return text


def user_environment(cache: Path) -> dict[str, str]:
    """The environment a newcomer's shell would give: the test runner's own settings removed,
    and a fresh machine's empty user cache ``cache`` (``XDG_CACHE_HOME``): libraries keep
    once-a-day and first-run notices there (ArviZ's import warning, whose stamp the suite's
    other tests would otherwise have written already). The data sets stay where they are."""
    env = {k: v for k, v in os.environ.items() if k not in ("TF_CPP_MIN_LOG_LEVEL", "PYTHONWARNINGS")}
    env.setdefault("SGMCMC_DATA", str(cache_dir()))
    cache.mkdir(parents=True, exist_ok=True)
    env["XDG_CACHE_HOME"] = str(cache)
    return env


class Runner:
    """The README runner (tests/readme_runner.py): a process of the user's environment that has
    imported sgmcmc, forking one child per group; ``import_stderr`` is what that import printed."""

    def __init__(self, directory: Path):
        with open(directory / "import_stderr.txt", "w") as import_stderr:
            self.process = subprocess.Popen(
                [sys.executable, str(Path(__file__).with_name("readme_runner.py"))], cwd=directory,
                env={**user_environment(directory / "user_cache"), "README_RUNNER_TIMEOUT": str(TIMEOUT)},
                stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=import_stderr, text=True,
            )
        ready = self.process.stdout.readline()
        self.import_stderr = (directory / "import_stderr.txt").read_text()
        assert ready == "READY\n", f"the README runner did not start:\n{self.import_stderr[-4000:]}"

    def run(self, path: Path) -> tuple[int, str, str]:
        """Run the script ``path`` in its directory: return code, stdout, stderr."""
        request = {"script": path.name, "cwd": str(path.parent), "cache": str(path.parent / "user_cache")}
        (path.parent / "user_cache").mkdir(exist_ok=True)
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        reply = self.process.stdout.readline()
        assert reply, "the README runner died"
        read = lambda name: (path.parent / name).read_text()  # noqa: E731
        return json.loads(reply)["returncode"], read("stdout.txt"), read("stderr.txt")

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait(timeout=60)


@pytest.fixture(scope="module")
def runner(tmp_path_factory):
    started = Runner(tmp_path_factory.mktemp("readme_runner"))
    yield started
    started.close()


def import_order_problem(group: list[Block]) -> str | None:
    """Why the group would print TensorFlow's start-up lines in a fresh process: it imports
    TensorFlow, TFP or Keras before sgmcmc (``import sgmcmc`` quiets them only when it comes
    first). The runner's children inherit the import, so this rule stands in for a fresh
    process's stderr on that point."""
    for line in (l.strip() for b in group for l in b.code.splitlines()):
        names = re.findall(r"(?:^import|^from|,)\s*(\w+)", line) if _IMPORT.match(line) else []
        if "sgmcmc" in names:
            return None
        if set(names) & {"tensorflow", "tensorflow_probability", "keras", "tf_keras"}:
            return (f"README.md line {group[0].line}: {line!r} comes before `import sgmcmc`: a fresh process "
                    f"prints TensorFlow's start-up lines")
    return None


def run_group(group: list[Block], directory: Path, keep: list[str], runner: Runner) -> tuple[list[str], list[str], dict]:
    """Run a group in a child of ``runner`` in ``directory``: each block's stdout and stderr,
    and the kept variables."""
    path = directory / f"readme_line_{group[0].line}.py"
    path.write_text(script(group, keep))
    returncode, stdout, stderr = runner.run(path)
    assert returncode == 0, f"README.md line {group[0].line}: the example failed ({returncode}):\n{stderr[-6000:]}"
    out, err = stdout.split(SENTINEL + "\n"), stderr.split(SENTINEL + "\n")
    assert len(out) == len(err) == len(group) + 1, (stdout, stderr)
    namespace = pickle.loads((directory / "namespace.pkl").read_bytes()) if keep else {}
    return out[:-1], err[:-1], namespace


GROUPS = group_blocks(parse_blocks(README.read_text()))


def _group_id(group: list[Block]) -> str:
    return f"line{group[0].line}-" + re.sub(r"\W+", "_", group[0].section).strip("_")[:40]


@pytest.mark.parametrize("group", [g for g in GROUPS if not g[0].skip_reason], ids=_group_id)
def test_readme_group_runs_clean_and_prints_what_it_quotes(group, tmp_path, runner):
    """The group runs without a warning or a stray stderr line (its ``import sgmcmc`` included:
    the runner's), each block prints what the README quotes, and the README's statistical claims
    hold."""
    keep, check = _check_of(group)
    problems = [f"import sgmcmc: {p}" for p in stderr_problems(runner.import_stderr, [])]
    problems += [p for p in [import_order_problem(group)] if p]
    outs, errs, namespace = run_group(group, tmp_path, keep, runner)
    for block, out, err in zip(group, outs, errs):
        where = f"README.md line {block.line}"
        problems += [f"{where}: {p}" for p in stderr_problems(err, block.warnings)]
        if block.output is not None:
            mismatch = output_mismatch(block.output, out)
            if mismatch:
                problems.append(f"{where}: printed output: {mismatch}")
    assert not problems, "\n".join(problems)
    if check is not None:
        check(namespace)


def test_readme_blocks_are_all_placed_and_skips_give_reasons():
    """Every block runs or is skipped with a reason; the examples this file guards are there."""
    blocks = [b for g in GROUPS for b in g]
    assert len(blocks) == len(parse_blocks(README.read_text()))
    for group in GROUPS:
        reason = group[0].skip_reason
        if reason:
            assert len(re.sub(_SKIP, "", reason).strip(" :—-()")) >= 15, f"line {group[0].line}: give the reason: {reason}"
    run = [g[0].code for g in GROUPS if not g[0].skip_reason]
    assert all(any(text in code for code in run) for text, _, _ in CHECKS), "a checked example is gone"
    assert sum(b.output is not None for b in blocks) >= 5


# -- the checker itself: it can fail -----------------------------------------------------------


def test_output_comparison_tolerances():
    assert output_mismatch("(5000,) 0.4951", "(5000,) 0.49542612\n") is None
    assert output_mismatch("(5000,) 0.4951", "(5000,) 0.5102") is not None  # 3 % off
    assert output_mismatch("(5000,) 0.5", "(5000,) 0.5403") is None  # within the quoted digit
    assert output_mismatch("(5000,) 0.5", "(4999,) 0.5") is not None  # a count is exact
    assert output_mismatch("accuracy 0.91 ...", "accuracy 0.912 nll 0.31") is None
    assert output_mismatch("accuracy 0.91", "accuracy 0.912 nll 0.31") is not None  # text left over
    assert output_mismatch("slower than 'theta' (25×)", "slower than 'beta' (25×)") is not None
    assert output_mismatch("about 25× slower", "about 125× slower") is not None  # no partial numbers
    assert output_mismatch("{'mu': 0.0332}", "{'mu': 0.033}") is None
    assert output_mismatch("{'mu': 0.0332}", "{'mu': 0.031}") is not None
    assert output_mismatch("5.67e-05", "5.6e-05") is None and output_mismatch("5.67e-05", "5.4e-05") is not None


def test_stderr_rules():
    bar = "sgldcv:  42%|████▏     | 2100/5000 [00:01<00:01, 2638.84it/s, log_post=-140348]"
    warning = "/x/check.py:12: StepsizeWarning: the stepsize 0.001 leaves 'mu' mixing about 25× slower\n  warnings.warn(\n"
    assert stderr_problems(f"\r{bar}\r{bar}\n", []) == []
    assert stderr_problems("write_npy data_npy: 0.00rows [00:00, ?rows/s]\rwrite_npy data_npy: 1.00krows [00:00, 49krows/s]\n", []) == []
    assert stderr_problems("write_npy data_npy: 1.00krows [00:00, 49krows/s] oops\n", [])
    assert stderr_problems("Traceback (most recent call last):\n", [])
    assert stderr_problems("sgldcv: the mode search ended at least 0.327 posterior sds\n", []) == []
    assert stderr_problems("I0000 12:00:00.1 123 cpu_feature_guard.cc:210] This TensorFlow binary\n", [])
    assert stderr_problems(warning, [])  # undeclared
    assert stderr_problems(warning, [("StepsizeWarning", "... mixing about 25× slower")]) == []
    assert stderr_problems(warning, [("StepsizeWarning", "... mixing about 5× slower")])
    assert stderr_problems("", [("StepsizeWarning", "...")])  # declared, not printed


def test_import_order_rule():
    """Checked on blocks: TensorFlow before sgmcmc is a problem, after it or without it is not."""
    group = lambda code: [Block(1, "", code)]  # noqa: E731
    assert import_order_problem(group("import sgmcmc\nimport tensorflow as tf\n")) is None
    assert import_order_problem(group("import numpy as np\nx = 1\n")) is None
    assert import_order_problem(group("import numpy as np, tensorflow as tf\nimport sgmcmc\n"))
    assert import_order_problem(group("from keras import layers\nimport sgmcmc\n"))
    assert import_order_problem(group("import tensorflow_probability as tfp\n"))


def test_grouping_rules():
    blocks = parse_blocks(
        "# A\n```python\nimport sgmcmc\nx = 1\n```\n\n```text\n1\n```\n## B\n```python\n# comment\nprint(x)\n```\n"
        "```python\n# not run here: needs the network to download\nimport sgmcmc\n```\n"
        "```python\ny = 2\n```\n"
    )
    assert [b.output for b in blocks] == ["1\n", None, None, None]
    try:
        group_blocks(blocks)
    except ValueError as error:
        assert "continues a skipped block" in str(error)
    else:
        raise AssertionError("a continuation of a skipped block was accepted")
    groups = group_blocks(blocks[:3])
    assert [[b.line for b in g] for g in groups] == [[2, 11], [15]] and groups[1][0].skip_reason
