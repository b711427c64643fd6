"""The parameter documentation the public functions share, written once.

Each public function has a literal docstring for what is its own (the update, its equation and
paper); :func:`shared_sections` appends the sections below at definition, so
``help(sgmcmc.sgld)`` and editors that run the code show the whole story. A parameter has one
numpy entry, ``name : type`` and its description; the generator (:mod:`sgmcmc.api.generate`)
puts the pieces of the "Parameters" section in the signature's order, the dynamics'
hyperparameters (``PublicFunctions.parameter_docs``) between them.
"""

from __future__ import annotations

from typing import Callable, TypeVar

F = TypeVar("F", bound=Callable)

_MINIBATCH = """    minibatch_size : float or int
        A proportion of N in (0, 1), or a count of rows.
"""

_SEED_DTYPE = """    seed : int, optional
        Makes the run reproducible; None draws fresh randomness.
    dtype : tf.DType, keyword-only
        ``tf.float32`` (default) or ``tf.float64``.
"""

#: The "Parameters" section's start: the model (``log_lik``, ``dataset``, ``params``).
MODEL_PARAMETERS = """
    Parameters
    ----------
    log_lik : callable
        ``log_lik(params, dataset)``: the SUM of the log-likelihood over the rows of
        ``dataset`` it is given, a scalar tensor, written with TF/TFP ops.
    dataset : dict, pandas.DataFrame or tf.data.Dataset
        Name -> array-like, observations on the first axis (all the same length N).
        Floating entries are cast to ``dtype``; integer entries stay integers. The samplers
        without a control variate also take a ``tf.data.Dataset`` whose elements are dicts
        name -> tensor, each a minibatch of n rows (``.batch(n, drop_remainder=True)``), with
        ``n_rows=N``: element j of the repeated pipeline is minibatch d of chain k at
        iteration t, j = ((t − 1)·D + d)·K + k (D minibatches an iteration, K chains); the
        pipeline's order, shuffling and maps are the user's (:mod:`sgmcmc.data.stream`).
    params : dict or list of dicts
        Name -> starting value (scalar or array); its shape is the parameter's. A list of
        ``n_chains`` dicts starts chain k at dict k.
"""

STEPSIZE = """    stepsize : float or dict
        ε: one number for all parameters, or a dict with exactly the names of ``params``.
"""

#: After the leading hyperparameters (and the CV twins' ``opt_stepsize``).
PRIOR_AND_MINIBATCH = (
    """    log_prior : callable, optional
        ``log_prior(params)``, a scalar tensor; None is a flat prior.
"""
    + _MINIBATCH
)

#: The control-variate twins' own arguments (the mode search, :func:`sgmcmc.init_sess`).
OPT_STEPSIZE = """    opt_stepsize : float or dict, optional
        The stepsize of the SGD mode search (None: chosen from the curvature at the first start,
        :func:`sgmcmc.run.mode_search.auto_opt_stepsize`).
"""
N_ITERS_OPT = """    n_iters_opt : int
        The SGD steps of the mode search; 0 anchors the control variate at the first start (no
        mode search).
"""
MODE_SEARCH_VERBOSE = """    verbose : bool
        The default for :func:`sgmcmc.init_sess`'s progress of the mode search (R).
"""

#: After the other hyperparameters (and the CV twins' ``n_iters_opt``, ``verbose``).
SETUP_OPTIONS = (
    _SEED_DTYPE
    + """    n_chains : int, keyword-only
        K chains stepped together in one compiled loop, each with its own minibatches and noise.
    constraints : dict, keyword-only
        Name -> ``tfp.bijectors.Bijector`` θ = b(ξ) (e.g. ``Softplus()`` for a positive
        parameter, ``SoftmaxCentered()`` for a simplex, ``CorrelationCholesky()``). Starting
        values and samples are on the constrained scale (θ) and ``log_lik``/``log_prior`` see
        θ; the chain moves ξ, and the log prior gains log|det J_b(ξ)|. ``log_prior`` is a
        density of θ, so ``log_prior=None`` is flat on the constrained scale (the Jacobian is
        still added). A start outside a bijector's support is refused. Stored gradients are
        with respect to ξ (``Samples.unconstrained``); ``get_params`` returns θ while
        ``sampler.params`` holds the chain's state ξ. See :mod:`sgmcmc.constraints`.
    temperature : float, keyword-only
        T: sample the tempered posterior p(θ | x)^(1/T) (1: the posterior; T < 1
        a colder, sharper one, as for Bayesian neural networks). The chain runs on log p / T with
        the stepsize times T (SGLD, SGHMC, SGNHT: the same drift, the noise scaled by √T), so a
        stepsize keeps its meaning at every T; the recorded log posterior and gradients are the
        tempered density's. See :mod:`sgmcmc.tempering`.
    check_model : bool, keyword-only
        Check the model before compiling: ``log_lik`` is a sum over rows, every parameter is
        used, the values are finite (SPEC §4). False skips the checks that evaluate it twice.
    check_stepsize : bool, keyword-only
        Check the stepsize against the posterior's curvature where sampling starts (the first
        chain's start; the CV samplers: the mode), with the minibatch noise, before anything is
        compiled (a few Hessian-vector products on a row subsample; :mod:`sgmcmc.stability.check`):
        a stepsize beyond the dynamics' stability limit raises :class:`~sgmcmc.StepsizeError`
        naming a safe one; a stable one that stretches the sd by more than 10 % warns
        (:class:`~sgmcmc.StepsizeWarning`). False skips the check. (pSGLD, HAMCMC, OSGLD and
        BAOAB are not checked.)
"""
)

#: The "Parameters" section's last entry (after any other parameter of the dynamics' own).
MINIBATCH_REPLACE = """    minibatch_replace : bool, keyword-only
        False (default): each minibatch is n distinct rows (SPEC §3). True: n rows drawn i.i.d.
        uniformly with replacement (one random draw, as the JAX libraries do); the N/n scaling
        keeps the estimate unbiased.
"""

ESTIMATOR_OPTIONS = (
    r"""
    Gradient estimators (keyword-only; SPEC §8, :mod:`sgmcmc.step.estimators`)
    -----------------------------------------------------------------------
    estimator : {"plain", "cv", "svrg", "saga"} or EstimatorSpec
        A name, or a spec carrying its options (``sgmcmc.step.estimators.SVRG(period=50)``,
        ``SAGA(max_memory=...)``, ``ControlVariate(opt_stepsize=..., n_iters_opt=...)``; then
        leave the keywords below at their defaults).
        ``"plain"``: :math:`g = \nabla\log p(\theta) + \frac{N}{n}\sum_{i\in S}\nabla\log p(x_i|\theta)`.
        ``"cv"``: control variates at the mode (Baker et al. 2018; as ``sgldcv``): uses
        ``opt_stepsize`` (None: automatic) and ``n_iters_opt``.
        ``"svrg"``: :math:`g = \nabla\log p(\tilde\theta|x) + g_S(\theta) - g_S(\tilde\theta)`,
        the anchor :math:`\tilde\theta` (per chain) set to the state and its full-data gradient
        recomputed (in batches) at iterations 1, 1 + ``svrg_period``, 1 + 2·``svrg_period``, ….
        ``"saga"``: :math:`g = \nabla\log p(\theta) + \sum_i\phi_i + \frac{N}{n}\sum_{i\in S}(\nabla\log p(x_i|\theta) - \phi_i)`,
        then :math:`\phi_i \leftarrow \nabla\log p(x_i|\theta)` for i ∈ S; the table φ (N × dim per
        chain) starts at the per-row gradients at the start (Dubey et al. 2016).
"""
    + OPT_STEPSIZE
    + N_ITERS_OPT
    + r"""    svrg_period : int
        Iterations between SVRG's anchor refreshes (default 100).
    max_memory : float
        Bytes SAGA's table may use (default 2 GiB): K·N·dim·bytes-per-number above it is refused
        before anything is computed.
    With SGHMC's L inner steps SVRG refreshes at the first; with HAMCMC's two points on one
    minibatch the first point refreshes SVRG's anchor / updates SAGA's table and both see the
    state from before (see :mod:`sgmcmc.step.estimators.variance_reduced`).
"""
)

_CHAIN_LENGTH = """
    Chain options
    -------------
    n_iters : int
        Iterations to run.
    verbose : bool
        Show progress (and the mode search's, for the CV samplers).
    burn_in : int, keyword-only
        Iterations run before any is kept: iterations ``burn_in + thin``, ``burn_in + 2·thin``, …
        are kept (SPEC §7).
    thin : int, keyword-only
        Every ``thin``-th iteration after ``burn_in`` is kept.
"""

CHAIN_OPTIONS = (
    _CHAIN_LENGTH
    + """    store_gradients : bool, keyword-only
        Also keep the estimator's gradient at every kept sample (``Samples.gradients``).
    checkpoint_dir : str or path, keyword-only
        Long runs (SPEC §10): the state and the samples kept so far are saved there every
        ``checkpoint_every`` iterations (atomically, appended as shards); the same call again
        resumes from the last checkpoint, giving the result of an uninterrupted run, and a
        finished run's directory returns its result at once. A directory written with other
        arguments is refused. With a ``strategy`` (:mod:`sgmcmc.run.distributed_checkpoints`): rows
        sharded, the chief (worker 0) writes one checkpoint and every worker resumes from it;
        chains split, each replica checkpoints its own chains in ``replica-<r>/``. Across
        machines it must be a directory every worker sees (a shared filesystem; checked).
    checkpoint_every : int, keyword-only
        Iterations between checkpoints.
"""
)

#: After :data:`CHAIN_OPTIONS` and the dynamics' own run options.
CHAIN_RETURNS = """
    With ``constraints`` the draws are constrained, ``Samples.unconstrained`` holds the chain's
    values and ``settings["constraints"]`` the bijectors.

    Returns
    -------
    Samples
        A dict name -> array, ``(n_kept, *shape)`` for one chain (R's layout), ``(n_chains,
        n_kept, *shape)`` for several; with ``log_posterior``, ``gradients`` and the settings.
"""

DISTRIBUTE_OPTIONS = """
    Many devices and machines (keyword-only; SPEC §12, :mod:`sgmcmc.distribute`)
    ------------------------------------------------------------------------------
    strategy : tf.distribute.Strategy, optional
        ``MirroredStrategy`` (this machine's devices) or ``MultiWorkerMirroredStrategy``
        (processes or machines; ``python -m sgmcmc.distribute --workers W script.py`` starts W
        local ones). Without ``shard_rows`` the ``n_chains`` chains are split evenly over the
        replicas (refused unless divisible), each chain the same as in a one-device run with the
        same seed, and every worker returns all chains (whole-chain functions only; not
        ``*_setup``).
    shard_rows : bool, optional
        Under ``MultiWorkerMirroredStrategy`` (default there: True) each worker passes its own
        rows as ``dataset`` (same entries; N = Σ N_w). ``minibatch_size`` is the total n; worker
        w draws n_w ≈ n·N_w/N rows (largest-remainder rounding, each ≥ 1), the gradient
        Σ_w (N_w/n_w)·Σ_{i∈S_w} ∇log p(x_i|θ) + ∇log p(θ) is summed by one all-reduce, and
        every worker holds the same chains (the noise is the same everywhere). The mode search
        (its automatic ``opt_stepsize`` too), the CV anchor's full-data gradient, the checks at
        the mode, SVRG's refreshes and SAGA's tables (each worker the table of its rows) run
        sharded. Not supported (refused): OSGLD (its gradient covariance needs every row's
        gradient on one worker), SCIR/SGRLD (the count estimator is not sharded), SAGA with
        ``checkpoint_dir``. A worker that dies makes the others raise
        :class:`~sgmcmc.SamplingError` with the samples kept so far.
"""

SIMPLEX_PARAMETERS = (
    """
    Parameters
    ----------
    counts : callable
        ``counts(params, minibatch, seed)`` → dict name → the minibatch's category counts
        :math:`\\sum_{i\\in S} z_i`, shaped like the parameter (integers or the model dtype), for ONE
        chain: ``params`` name → ω (on the simplex), ``minibatch`` name → the minibatch's rows of
        ``dataset``, ``seed`` a shape-[2] int64 tensor for stateless random ops
        (``tf.random.stateless_*``) — for a latent-variable model (e.g. LDA) the local step
        (Gibbs sampling of the minibatch's allocations given ω) runs here. Written with TF ops.
    dataset : dict or pandas.DataFrame
        Name -> array-like, observations (rows, documents) on the first axis, all of length N.
    params : dict or list of dicts
        Name -> starting point ω₀ on the simplex: entries >= 0 summing to 1 along the LAST axis;
        several simplices may be stacked (e.g. LDA's topics, shape (K, V)). A list of ``n_chains``
        dicts starts chain k at dict k.
    stepsize : float, callable or dict
        h > 0; or a schedule ``h(t)`` of the 1-based iteration t returning a tensor (e.g.
        h(1 + t/τ)^(−κ), thesis §5.5); or a dict of those by parameter name.
    alpha : float, array or dict
        The Dirichlet prior's concentrations (> 0): a number, an array broadcastable to the
        parameter's shape (per component), or a dict of those by parameter name.
"""
    + _MINIBATCH
    + _SEED_DTYPE
    + """    n_chains : int, keyword-only
        K chains in one compiled loop, each with its own minibatches and seeds.
    minibatch_replace : bool, keyword-only
        True: minibatch rows drawn i.i.d. with replacement (unbiased with the N/n scaling).

    Notes
    -----
    Writing ω = θ / Σⱼθⱼ with θⱼ ~ Gamma(aⱼ, 1), aⱼ = αⱼ + Σᵢ zᵢⱼ (thesis §5.3), each θⱼ follows
    the CIR diffusion dθ = (a − θ)dt + √(2θ) dW (eq. 5.3.1), stationary at Gamma(a, 1); a is
    replaced by â = α + (N/n) Σ_{i∈S} zᵢ (eq. 5.3.3), one fresh minibatch per iteration and chain.
    The chain starts from θ₀ = ω₀ Σⱼ âⱼ (â of the first iteration's minibatch), so ω₀ is where it
    starts. The samples are ω (normalised along the last axis).

    The log-posterior estimate shown in the progress bar and stored in ``log_posterior`` is the
    Dirichlet log density of ω under Dir(â), summed over the simplices (exact with all the data;
    ω clamped at the dtype's smallest normal number). No gradient is used:
    ``store_gradients`` does not apply.
"""
)

SIMPLEX_CHAIN = (
    _CHAIN_LENGTH
    + """
    Returns
    -------
    Samples
        Samples of ω: name -> array ``(n_kept, *shape)`` for one chain, ``(n_chains, n_kept,
        *shape)`` for several; every sample on the simplex. ``gradients`` is None.
"""
)


def shared_sections(*sections: str) -> Callable[[F], F]:
    """Append ``sections`` (the constants above) to the decorated function's docstring."""

    def attach(function: F) -> F:
        function.__doc__ = (function.__doc__ or "").rstrip() + "\n" + "".join(sections)
        return function

    return attach
