"""The GPU path, checked statically (no GPU here): every op of the compiled chunk and step graphs
of a model with a gather has a GPU kernel registered in the installed TensorFlow, so the chain
would run on a GPU without host round trips.

The model is the MNIST BNN's regime (softmax regression with integer labels through
``tf.gather``, n = 500 of N = 55,000 rows), two chains in graph mode. The minibatch indices are
drawn and their rows gathered on the host (:mod:`sgmcmc.data.pipeline`); the compiled graphs read
each iteration's slice of the block (``GatherV2``), run the model and draw the noise (stateless
Philox). An op with a CPU kernel only (e.g. ``RandomIndexShuffle``, the in-graph subset sampler
of earlier rounds) makes the test fail. XLA mode is compiled by XLA for the device, so its ops
are not in this registry.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python.framework import kernels

import sgmcmc

#: Ops that never need a device kernel of their own (graph structure, resolved by the runtime).
STRUCTURAL = {"NoOp", "Placeholder", "_Arg", "_Retval", "PartitionedCall", "StatefulPartitionedCall",
              "While", "StatelessWhile", "If", "StatelessIf", "Const"}


def _op_types(concrete) -> set[str]:
    graph_def = concrete.graph.as_graph_def()
    types = {node.op for node in graph_def.node}
    for function in graph_def.library.function:
        types |= {node.op for node in function.node_def}
    return types


def _without_gpu_kernel(types: set[str]) -> list[str]:
    missing = []
    for op in sorted(types - STRUCTURAL):
        devices = {k.device_type for k in kernels.get_registered_kernels_for_op(op).kernel}
        # DEFAULT kernels (e.g. ReadVariableOp's) are registered for every device, GPUs included.
        if not devices & {"GPU", "DEFAULT"}:
            missing.append(op)
    return missing


@pytest.fixture(scope="module")
def sampler():
    rng = np.random.default_rng(0)
    n_rows, d, classes = 55_000, 20, 10
    data = {"x": rng.normal(size=(n_rows, d)).astype(np.float32), "label": rng.integers(0, classes, n_rows)}

    def log_lik(params, dataset):
        logits = tf.linalg.matmul(dataset["x"], params["W"]) + params["b"]
        log_p = tf.nn.log_softmax(logits)
        return tf.reduce_sum(tf.gather(log_p, dataset["label"], batch_dims=1))

    params = {"W": np.zeros((d, classes), np.float32), "b": np.zeros(classes, np.float32)}
    s = sgmcmc.sgld_setup(log_lik, data, params, 1e-5, minibatch_size=500, seed=1, n_chains=2)
    sgmcmc.sample_chain(s, 6, verbose=False, burn_in=2, thin=2)
    sgmcmc.sgmcmc_step(s, sgmcmc.Session(s))
    return s


def test_chunk_and_step_graphs_have_gpu_kernels(sampler):
    chunks = sampler.programs.made()
    assert chunks, "no compiled chunk"
    types = set()
    for function in chunks:
        for concrete in function._list_all_concrete_functions():
            types |= _op_types(concrete)
    types |= _op_types(sampler.step_call.concrete_function)
    assert any("Gather" in t for t in types)
    assert _without_gpu_kernel(types) == []
