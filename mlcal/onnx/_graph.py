"""A tiny builder for ONNX graphs: unique names, typed initialisers, one node per call."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper, numpy_helper

# numpy dtype name -> ONNX element type, for the two float types mlcal graphs compute in
ONNX_FLOAT_TYPES = {"float32": TensorProto.FLOAT, "float64": TensorProto.DOUBLE}


class GraphBuilder:
    """Collects nodes and initialisers; every name gets ``prefix`` so a calibration subgraph
    can be appended to a converted base-model graph without name clashes."""

    def __init__(self, prefix: str = "mlcal_") -> None:
        self.prefix = prefix
        self.nodes: list = []
        self.initializers: list = []
        self._count = 0

    def fresh(self, hint: str) -> str:
        """A new unique tensor name."""
        self._count += 1
        return f"{self.prefix}{hint}_{self._count}"

    def const(self, value, hint: str = "c") -> str:
        """Add ``value`` (numpy array or scalar, dtype kept) as an initialiser; returns its name."""
        arr = np.asarray(value)
        name = self.fresh(hint)
        self.initializers.append(numpy_helper.from_array(arr, name))
        return name

    def op(self, op_type: str, inputs: list[str], hint: str | None = None, **attrs) -> str:
        """Append one node with a single output; returns the output name."""
        out = self.fresh(hint or op_type.lower())
        self.nodes.append(helper.make_node(op_type, list(inputs), [out],
                                           name=self.fresh("n_" + op_type), **attrs))
        return out

    def rename(self, name: str, new: str) -> None:
        """Rename tensor ``name`` (produced by one of this builder's nodes) to ``new``
        everywhere, so it can be a graph output with a public name."""
        produced = False
        for node in self.nodes:
            for i, out in enumerate(node.output):
                if out == name:
                    node.output[i] = new
                    produced = True
            for i, inp in enumerate(node.input):
                if inp == name:
                    node.input[i] = new
        if not produced:
            # an input or initialiser: route it through Identity
            self.nodes.append(helper.make_node("Identity", [name], [new],
                                               name=self.fresh("n_Identity")))
