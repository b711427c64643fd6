"""The public samplers are source generated from the method table (sgmcmc/api/generate.py).

Fails when ``sgmcmc/api/samplers.py`` differs from what the table and the dynamics classes give
(checked: changing one word of ``SGHMC.public.setup_doc`` without regenerating fails it), and
checks that every row has its pair with the dynamics' hyperparameters and defaults, and that
every docstring has the numpy-style sections (OSGLD's whole-chain one once had none).
"""

from __future__ import annotations

import inspect
import re

import sgmcmc
from sgmcmc.api import generate
from sgmcmc.step.methods import METHODS


def test_samplers_py_is_generated_from_the_table():
    assert generate.TARGET.read_text() == generate.render(), (
        "sgmcmc/api/samplers.py is stale: run `python -m sgmcmc.api.generate` and commit the result"
    )


def test_every_row_has_its_pair_with_its_hyperparameters_and_defaults():
    for name, method in METHODS.items():
        for public in (getattr(sgmcmc, name), getattr(sgmcmc, f"{name}_setup")):
            parameters = inspect.signature(public).parameters
            for h in method.dynamics.hyperparameters:
                assert h in parameters, (public.__name__, h)
                if h in method.dynamics.defaults:
                    assert parameters[h].default == method.dynamics.defaults[h], (public.__name__, h)
            assert public.__doc__, public.__name__
            assert public.__name__ in sgmcmc.__all__


def test_every_docstring_has_the_numpy_sections_and_its_run_options():
    for name, method in METHODS.items():
        for public in (getattr(sgmcmc, name), getattr(sgmcmc, f"{name}_setup")):
            assert "\n    Parameters\n    ----------\n    " in public.__doc__, public.__name__
            assert re.search(r"^    params : ", public.__doc__, re.M), public.__name__
        whole = getattr(sgmcmc, name).__doc__
        assert "\n    Returns\n    -------\n    Samples\n" in whole, name
        for option in method.dynamics.public.run_options:  # one entry each, in the chain options
            assert len(re.findall(rf"^    {option} : ", whole, re.M)) == 1, (name, option)
            assert whole.index(f"\n    {option} : ") < whole.index("\n    Returns\n"), (name, option)


def _section_entries(doc: str) -> list[list[str]]:
    """The names of the numpy entries (``    name : type``) of each section of ``doc``, in order."""
    return [re.findall(r"^    (\w+) : ", part, re.M) for part in re.split(r"\n    [^\n]+\n    -{3,}\n", doc)]


def test_every_parameter_has_its_own_entry_in_signature_order():
    """Every parameter of every public sampler function has exactly one numpy entry of its own,
    ``name : type`` (issue 30: sghmc's ``alpha`` and ``L``, sgnht's ``a``, psgld's ``beta`` and
    ``lam``, hamcmc's ``memory``, ``damping`` and ``warmup_stepsize``, baoab's ``gamma`` and the
    CV twins' ``opt_stepsize`` and ``n_iters_opt`` were described in prose only, and ``burn_in,
    thin`` and ``opt_stepsize, n_iters_opt`` shared one entry), and within each section the
    entries follow the signature's order. Checked to fail on c76d8b7: 25 of the 28 functions
    lacked entries (the first, sgld_setup: ``opt_stepsize`` and ``n_iters_opt``)."""
    for name in METHODS:
        for public in (getattr(sgmcmc, f"{name}_setup"), getattr(sgmcmc, name)):
            parameters = list(inspect.signature(public).parameters)
            sections = _section_entries(public.__doc__)
            entries = [e for section in sections for e in section]
            missing = [p for p in parameters if entries.count(p) != 1]
            assert not missing, (public.__name__, "parameters without exactly one entry", missing)
            for section in sections:
                own = [e for e in section if e in parameters]
                assert own == sorted(own, key=parameters.index), (public.__name__, own)
