"""Multicalibration: boosted logit corrections over the base score and segment features
(:class:`Multicalibration`), reduced to one canonical map (:class:`MulticalibrationMap`)."""

from mlcal.multicalibration.estimator import Multicalibration
from mlcal.multicalibration.map import MulticalibrationMap

__all__ = ["Multicalibration", "MulticalibrationMap"]
