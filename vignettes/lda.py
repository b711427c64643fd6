"""Worked example: latent Dirichlet allocation with SCIR and SGRLD (thesis §5.5.1, Fig. 5.5.1a).

LDA (Blei et al. 2003): topic k is a distribution φ_k over the V words of the vocabulary, a point
on the simplex, with a Dir(α) prior; document d has topic proportions θ_d ~ Dir(a), and each of
its words picks a topic z ~ θ_d, then a word w ~ φ_z. The topics φ (a (K, V) stack of simplices)
are sampled by SCIR / SGRLD: at every iteration a minibatch of documents is drawn, the local step
— Gibbs sampling of the minibatch's topic allocations z (and proportions θ_d) given the current
topics — runs inside the user's ``counts`` function with stateless TF random ops on the ``seed``
the sampler supplies, and the sampler moves the topics with â = α + (N/n)·(topic–word counts).

**No real corpus is used**: the thesis' Wikipedia corpus (and any other real corpus) cannot be
obtained without network access at run time, so the corpus is generated from the LDA model itself
with known, sparse topics. That also lets us measure topic recovery against the truth.

As in the thesis both samplers use the decreasing stepsize h(1 + t/τ)^(−κ) (SCIR: h = 0.5,
τ = 10, κ = 0.33; SGRLD: h = 0.01, τ = 1000, κ = 0.6, Table B.5.2), given as a schedule (a
callable of the iteration t): ``sgmcmc.schedules.polynomial``. One prior for both
(α = 0.05 on the topics, a = 0.1 on the documents' proportions) so the perplexities compare.

Reported: held-out perplexity every few iterations (document completion: θ_d estimated from the
first half of each test document given the sampled topics, the second half predicted), and topic
recovery: the sampled topics matched to the true ones by the Hungarian assignment, mean total
variation distance.

Run ``python vignettes/lda.py`` (a few minutes) or ``--quick``.
"""

from __future__ import annotations

from _common import parse_args, savefig, timed  # first: selects the Agg backend

import matplotlib.pyplot as plt
import numpy as np
import tensorflow as tf
from scipy.optimize import linear_sum_assignment

import sgmcmc

DOC_ALPHA = 0.1  # a: the documents' topic proportions θ_d ~ Dir(a)
TOPIC_ALPHA = 0.05  # α: the topics' prior φ_k ~ Dir(α) (the samplers' alpha)
#: Thesis Table B.5.2: (h, τ, κ) of the decreasing stepsize.
SCHEDULES = {"scir": (0.5, 10.0, 0.33), "sgrld": (0.01, 1000.0, 0.6)}


from sgmcmc.schedules import polynomial  # noqa: E402


# --- The corpus: generated from the model (no network) ---------------------------------------


def make_corpus(n_topics: int, n_words: int, n_docs: int, doc_len: int, rng: np.random.Generator):
    """Sparse true topics φ (K, V) — each concentrated on its own block of words plus a little
    of the rest — and n_docs documents of doc_len word ids, (n_docs, doc_len) int32."""
    block = n_words // n_topics
    base = np.full((n_topics, n_words), 0.02)
    for k in range(n_topics):
        base[k, k * block : (k + 1) * block] = 1.0
    topics = np.array([rng.dirichlet(b) for b in base])
    theta = rng.dirichlet(np.full(n_topics, DOC_ALPHA), size=n_docs)
    z = np.array([rng.choice(n_topics, size=doc_len, p=t) for t in theta])
    cdf = np.cumsum(topics, axis=1)
    u = rng.random(z.shape)
    words = np.array([[min(np.searchsorted(cdf[k], x), n_words - 1) for k, x in zip(zd, ud)] for zd, ud in zip(z, u)])
    return topics, words.astype(np.int32)


# --- The local step: the user's counts function -----------------------------------------------


def make_lda_counts(n_topics: int, n_sweeps: int):
    """``counts(params, minibatch, seed)`` for LDA: Gibbs sampling of the minibatch's local
    variables given the topics φ = ``params["topics"]`` (K, V), alternating

        z_dl | θ_d, φ ~ Categorical(∝ θ_dk φ_{k, w_dl}),   θ_d | z_d ~ Dir(a + n_d·),

    for ``n_sweeps`` sweeps from θ_d uniform, all words of all documents at once; returns the
    topic–word counts Σ_d Σ_l [z_dl = k][w_dl = v], averaged over the second half of the sweeps
    (as Patterson & Teh 2013 average over their Gibbs samples). Every draw is a stateless TF op on
    a seed split from ``seed``: the run is reproducible and compiled."""

    def counts(params, minibatch, seed):
        topics = params["topics"]  # (K, V)
        dtype = topics.dtype
        words = minibatch["words"]  # (n, L)
        n, length = tf.shape(words)[0], tf.shape(words)[1]
        word_given_topic = tf.transpose(tf.gather(topics, words, axis=1), [1, 2, 0])  # (n, L, K)
        log_lik = tf.math.log(tf.maximum(word_given_topic, np.finfo(dtype.as_numpy_dtype).tiny))
        n_words = tf.shape(topics)[1]
        flat_words = tf.reshape(words, [-1])  # (nL,)
        seeds = tf.random.experimental.stateless_split(seed, 2 * n_sweeps)
        theta = tf.fill([n, n_topics], tf.constant(1.0 / n_topics, dtype))
        total = tf.zeros_like(topics)
        kept = n_sweeps - n_sweeps // 2
        for sweep in range(n_sweeps):  # unrolled: n_sweeps is a Python int
            logits = tf.reshape(tf.math.log(theta)[:, None, :] + log_lik, [-1, n_topics])
            z = tf.random.stateless_categorical(logits, 1, seeds[2 * sweep], dtype=tf.int32)[:, 0]
            one_hot_z = tf.one_hot(z, n_topics, dtype=dtype)  # (nL, K)
            per_doc = tf.reduce_sum(tf.reshape(one_hot_z, [n, length, n_topics]), axis=1)  # (n, K)
            gamma = tf.random.stateless_gamma([n, n_topics], seeds[2 * sweep + 1], alpha=DOC_ALPHA + per_doc, dtype=dtype)
            theta = tf.maximum(gamma / tf.reduce_sum(gamma, axis=1, keepdims=True), np.finfo(dtype.as_numpy_dtype).tiny)
            if sweep >= n_sweeps - kept:
                # the (K, V) table of [z = k][w = v], O(nL) (no dense one-hot of the vocabulary)
                cell = z * n_words + flat_words
                table = tf.math.unsorted_segment_sum(tf.ones_like(flat_words, dtype), cell, n_topics * n_words)
                total += tf.reshape(table, tf.shape(topics))
        return {"topics": total / kept}

    return counts


# --- Evaluation -------------------------------------------------------------------------------


def perplexity(topics: np.ndarray, observed: np.ndarray, held_out: np.ndarray, n_iter: int = 30) -> float:
    """Document completion: θ_d from the observed words by the EM fixed point
    θ_dk ∝ a + Σ_l r_dlk, r_dlk ∝ θ_dk φ_{k,w_dl}, then exp(−mean log Σ_k θ_dk φ_{k,w}) over the
    held-out words."""
    phi = np.maximum(topics.astype(np.float64), 1e-300)
    k = phi.shape[0]
    lik = phi[:, observed].transpose(1, 2, 0)  # (D, L_obs, K)
    theta = np.full((observed.shape[0], k), 1.0 / k)
    for _ in range(n_iter):
        r = theta[:, None, :] * lik
        r /= r.sum(-1, keepdims=True)
        theta = DOC_ALPHA + r.sum(1)
        theta /= theta.sum(-1, keepdims=True)
    pred = np.einsum("dk,dlk->dl", theta, phi[:, held_out].transpose(1, 2, 0))
    return float(np.exp(-np.mean(np.log(pred))))


def topic_tv(sampled: np.ndarray, true: np.ndarray) -> float:
    """Mean total variation distance between the sampled and the true topics, matched by the
    Hungarian assignment (topics are exchangeable: their labels are arbitrary)."""
    cost = 0.5 * np.abs(sampled[:, None, :] - true[None, :, :]).sum(-1)
    rows, cols = linear_sum_assignment(cost)
    return float(cost[rows, cols].mean())


def main(argv: list[str] | None = None) -> dict:
    """Run the vignette; return its key numbers."""
    args = parse_args("lda", __doc__.splitlines()[0], argv)
    if args.quick:
        K, V, D, L, D_test, n_iters, every, sweeps = 5, 100, 1000, 40, 100, 300, 10, 10
    else:
        K, V, D, L, D_test, n_iters, every, sweeps = 20, 2000, 20_000, 60, 1000, 3000, 25, 20
    rng = np.random.default_rng(2018)
    true_topics, words = make_corpus(K, V, D + D_test, L, rng)
    train, test = words[:D], words[D:]
    observed, held_out = test[:, : L // 2], test[:, L // 2 :]
    start = {"topics": rng.dirichlet(np.ones(V), size=K)}  # random topics: breaks the symmetry
    counts = make_lda_counts(K, sweeps)

    curves, tv, samples = {}, {}, {}
    for method in ("scir", "sgrld"):
        sampler = getattr(sgmcmc, method)
        with timed(method):
            out = sampler(
                counts, {"words": train}, start, polynomial(*SCHEDULES[method]), TOPIC_ALPHA,
                minibatch_size=50, n_iters=n_iters, verbose=False, seed=1, thin=every,
            )
        samples[method] = out["topics"]  # (n_iters // every, K, V)
        curves[method] = np.array([perplexity(t, observed, held_out) for t in out["topics"]])
        tail = out["topics"][len(out["topics"]) // 2 :].mean(0)
        tv[method] = topic_tv(tail, true_topics)
    true_perplexity = perplexity(true_topics, observed, held_out)
    iters = every * np.arange(1, len(curves["scir"]) + 1)

    fig, ax = plt.subplots(figsize=(6, 4))
    for method, colour in (("scir", "C0"), ("sgrld", "C1")):
        ax.plot(iters, curves[method], color=colour, label=method.upper())
    ax.axhline(true_perplexity, color="k", ls="--", lw=1, label="true topics")
    ax.set(xlabel="iteration", ylabel="held-out perplexity", title=f"LDA, synthetic corpus (K={K}, V={V})")
    ax.legend()
    figures = [savefig(fig, args.out / "lda_perplexity.png")]
    for method in curves:
        print(f"{method:5s}: final perplexity {curves[method][-1]:.1f} (true topics {true_perplexity:.1f}), "
              f"topic TV distance {tv[method]:.3f}")
    return {
        "iterations": iters, "perplexity": curves, "true_perplexity": true_perplexity, "topic_tv": tv,
        "figures": figures,
    }


if __name__ == "__main__":
    main()
