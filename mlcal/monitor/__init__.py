"""Monitoring a deployed model's calibration.

* :mod:`mlcal.monitor.sequential` -- :class:`CalibrationMonitor`, the anytime-valid e-process test
  of matured, labelled batches;
* :mod:`mlcal.monitor.state` -- the state files the monitoring loop keeps between batches;
* :mod:`mlcal.monitor.loop` -- the loop behind ``mlcal monitor`` (MLflow; imported on use).
"""

from mlcal.monitor.sequential import (EPS, MONITOR_FORMAT, MONITOR_VERSION, RECOMMENDATIONS,
                                      CalibrationMonitor, MonitorStep)

__all__ = ["CalibrationMonitor", "EPS", "MONITOR_FORMAT", "MONITOR_VERSION", "MonitorStep",
           "RECOMMENDATIONS"]
