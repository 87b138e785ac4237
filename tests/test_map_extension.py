"""A new map type is one class plus one registration per consumer.

A toy map defined here, ``p = clip(c0 + c1 * s, 0, 1)``, enters the kind table by being defined
(JSON round trip through ``map_from_dict``) and becomes exportable, bounded and plottable by
registering an ONNX builder, an error bound and its break points -- no edit to mlcal. Oracles:
the toy's own numpy evaluation, onnxruntime on the exported graph, the clip points worked out by
hand.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import onnxruntime as ort
import pytest

from mlcal.maps import MAP_TYPES, CalibrationMap, MapFormatError, StepMap, map_from_dict
from mlcal.onnx import error_bound, to_onnx
from mlcal.onnx._bounds import map_error_bound
from mlcal.onnx._graph import GraphBuilder
from mlcal.onnx._maps import map_subgraph
from mlcal.plotting import map_breaks, plot_map


def _affine_clip_class(kind_: str):
    """A toy map class; defining it enters ``kind`` in the kind table."""

    @dataclass(frozen=True, eq=False)
    class AffineClipMap(CalibrationMap):
        kind: ClassVar[str] = kind_
        c0: float = 0.0
        c1: float = 1.0

        def __post_init__(self) -> None:
            super().__post_init__()
            if self.input_transform != "identity" or self.c1 == 0:
                raise MapFormatError(f"{self.kind} map: identity transform and c1 != 0 only")
            object.__setattr__(self, "c0", float(self.c0))
            object.__setattr__(self, "c1", float(self.c1))

        @property
        def size(self) -> int:
            return 2

        def _evaluate(self, s: np.ndarray) -> np.ndarray:
            return np.clip(self.c1 * s + self.c0, 0.0, 1.0)

        def to_dict(self) -> dict[str, Any]:
            d = self._common_dict()
            d.update(c0=self.c0, c1=self.c1)
            return d

        @classmethod
        def _from_dict(cls, doc: dict, where: str, common: dict[str, Any]):
            return cls(float(doc["c0"]), float(doc["c1"]), **common)

    return AffineClipMap


@pytest.fixture(scope="module")
def toy():
    """The toy type with its three registrations; leaves the kind table as it found it."""
    before = dict(MAP_TYPES)
    cls = _affine_clip_class("affine_clip")

    @map_subgraph.register(cls)
    def _(m, g: GraphBuilder, x: str, dtype: np.dtype, method):
        # numpy's order: c1 * s, then + c0, then clip (Clip passes NaN through in onnxruntime,
        # which the test checks; +-inf gives 0 or 1 as in numpy, but predict rejects inf and
        # the built-in maps return NaN, so add (x - x))
        y = g.op("Add", [g.op("Mul", [g.const(dtype.type(m.c1), "c1"), x], "c1_s"),
                         g.const(dtype.type(m.c0), "c0")], "affine")
        y = g.op("Clip", [y, g.const(dtype.type(0), "zero"), g.const(dtype.type(1), "one")],
                 "clipped")
        return g.op("Add", [y, g.op("Sub", [x, x], "zero_or_nan")], "p"), "none"

    @map_error_bound.register(cls)
    def _(m, dtype: np.dtype) -> float:
        if dtype == np.float64:
            return 0.0   # same operations in the same order as numpy
        u = 2.0 ** -24
        # Clip is 1-Lipschitz; where the result is unclipped |c1 s| <= 1 + |c0|: rounding of
        # c0, c1, the product and the sum, plus float64 numpy's own (negligible) rounding
        return 4 * u * (1 + 2 * abs(m.c0)) + 2.0 ** -149

    @map_breaks.register(cls)
    def _(m) -> np.ndarray:
        return np.sort([-m.c0 / m.c1, (1 - m.c0) / m.c1])

    yield cls
    MAP_TYPES.clear()
    MAP_TYPES.update(before)


def test_defining_the_class_enters_the_kind_table_and_json_round_trips(toy):
    assert MAP_TYPES["affine_clip"] is toy
    m = toy(0.25, 0.5, domain=(-1.0, 2.0))
    doc = json.loads(json.dumps(m.to_dict()))
    assert doc == {"type": "affine_clip", "format_version": 1, "input_transform": "identity",
                   "domain": [-1.0, 2.0], "c0": 0.25, "c1": 0.5}
    back = map_from_dict(doc)
    assert type(back) is toy and back == m
    s = np.linspace(-3, 3, 13)
    np.testing.assert_array_equal(back(s), np.clip(0.25 + 0.5 * s, 0, 1))
    # the common fields are still validated by map_from_dict for the new type
    with pytest.raises(MapFormatError, match="format_version"):
        map_from_dict({**doc, "format_version": 2})
    with pytest.raises(MapFormatError, match="domain"):
        map_from_dict({**doc, "domain": [1.0]})


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_registered_toy_exports_within_its_bound(toy, dtype):
    m = toy(-0.2, 0.7)
    rng = np.random.default_rng(3)
    breaks = map_breaks(m)
    big = float(np.finfo(dtype).max)
    x = np.concatenate((rng.normal(0, 2, 5000), breaks, np.nextafter(breaks, -np.inf),
                        [0.0, -0.0, big, -big]))
    model = to_onnx(m, dtype=dtype)
    meta = {p.key: p.value for p in model.metadata_props}
    assert meta["mlcal_map_type"] == "affine_clip" and meta["mlcal_index_search"] == "none"
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    xd = x.astype(dtype)
    got = sess.run(None, {"scores": xd})[0]
    want = m(xd.astype(np.float64))
    bound = error_bound(m, dtype)
    if dtype == "float64":
        assert bound == 0.0
        np.testing.assert_array_equal(got, want)
    else:
        assert 0 < bound < 1e-6
        assert np.abs(got.astype(np.float64) - want).max() <= bound
    nan_in = np.array([np.nan, np.inf, -np.inf], dtype=dtype)
    assert np.isnan(sess.run(None, {"scores": nan_in})[0]).all()


def test_registered_toy_plots_with_sharp_clip_points(toy):
    m = toy(0.1, 0.2, domain=(-5.0, 10.0))
    np.testing.assert_allclose(map_breaks(m), [-0.5, 4.5])
    fig = plot_map(m)
    line = fig.axes[0].lines[0]
    xs, ys = line.get_xdata(), line.get_ydata()
    for b, p in ((-0.5, 0.0), (4.5, 1.0)):
        i = np.flatnonzero(xs == b)
        assert i.size == 1 and ys[i[0]] == pytest.approx(p, abs=1e-15)
    assert line.get_label() == "affine_clip map"


def test_without_registrations_each_consumer_names_the_missing_one():
    before = dict(MAP_TYPES)
    try:
        bare = _affine_clip_class("affine_clip_unregistered")
        m = bare(0.0, 1.0)
        assert type(map_from_dict(m.to_dict())) is bare        # the kind table needs nothing
        with pytest.raises(ValueError,
                           match="cannot export AffineClipMap: no ONNX builder is registered"):
            to_onnx(m)
        with pytest.raises(ValueError, match="no ONNX error bound is registered for AffineClipMap"):
            error_bound(m, "float32")
        with pytest.raises(ValueError,
                           match="cannot draw AffineClipMap: no break points are registered"):
            plot_map(m)
    finally:
        MAP_TYPES.clear()
        MAP_TYPES.update(before)


def test_kind_table_rejects_a_missing_or_taken_kind():
    before = dict(MAP_TYPES)
    try:
        with pytest.raises(TypeError, match="must define its own non-empty 'kind'"):
            type("NoKind", (StepMap,), {})       # would write documents that load as StepMap
        with pytest.raises(TypeError, match="'step' .* already taken by mlcal.maps.binary.StepMap"):
            type("OtherStep", (StepMap,), {"kind": "step"})
        assert MAP_TYPES == before
    finally:
        MAP_TYPES.clear()
        MAP_TYPES.update(before)
