"""The calibration maps: what every fitted calibrator reduces to, stored as JSON.

* :mod:`mlcal.maps.binary` -- :class:`StepMap`, :class:`LinearMap`, :class:`SigmoidMap`,
  :class:`BetaMap`, :class:`QuadraticMap` and their size reduction (:func:`reduce_map`);
* :mod:`mlcal.maps.multiclass` -- :class:`MulticlassMap` (one-vs-rest) and
  :class:`SoftmaxAffineMap` (temperature, vector and matrix scaling);
* :mod:`mlcal.maps.offset` -- :class:`OffsetMap`, a logit offset composed after a binary map;
* :mod:`mlcal.maps.reoffset` -- :func:`~mlcal.maps.reoffset.reoffset`, which builds one from a
  fitted calibrator or model;
* :mod:`mlcal.maps._core` -- the document format, the kind table and :func:`map_from_dict`.

Every public map name is importable from here (``from mlcal.maps import StepMap``); importing the
package enters every map kind in :data:`MAP_TYPES`.
"""

from mlcal.maps._core import (BETA_EPS, DEFAULT_MAX_MAP_SIZE, INPUT_TRANSFORMS, MAP_FORMAT_VERSION,
                              MAP_TYPES, CalibrationMap, MapFormatError, apply_input_transform,
                              map_from_dict)
from mlcal.maps.binary import (DEFAULT_CLAMP, BetaMap, LinearMap, MapReduction, QuadraticMap,
                               SigmoidMap, StepMap, reduce_map, shrink_map)
from mlcal.maps.multiclass import MulticlassMap, SoftmaxAffineMap
from mlcal.maps.offset import OffsetMap

__all__ = ["BETA_EPS", "BetaMap", "CalibrationMap", "DEFAULT_CLAMP", "DEFAULT_MAX_MAP_SIZE",
           "INPUT_TRANSFORMS",
           "LinearMap", "MAP_FORMAT_VERSION", "MAP_TYPES", "MapFormatError", "MapReduction",
           "MulticlassMap", "OffsetMap", "QuadraticMap", "SigmoidMap", "SoftmaxAffineMap", "StepMap",
           "apply_input_transform", "map_from_dict", "reduce_map", "shrink_map"]
