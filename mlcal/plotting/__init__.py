"""Plots (matplotlib, imported only when a plot is drawn).

* :mod:`mlcal.plotting.diagrams` -- binned reliability diagrams (binary and multiclass) and
  calibration-map plots;
* :mod:`mlcal.plotting.corp` -- CORP reliability diagrams with consistency bands.
"""

from mlcal.plotting.corp import corp_reliability_diagram, plot_multiclass_corp_reliability
from mlcal.plotting.diagrams import (SCALES, map_breaks, plot_map, plot_multiclass_reliability,
                                     reliability_diagram)

__all__ = ["SCALES", "corp_reliability_diagram", "map_breaks", "plot_map",
           "plot_multiclass_corp_reliability", "plot_multiclass_reliability", "reliability_diagram"]
