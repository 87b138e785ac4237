"""The promotion gate as the decision tests call it."""

from __future__ import annotations


def promote_without_report(*args, **kwargs):
    """``mlcal.mlflow.gate.promote`` without the HTML gate report: the tests that use it check
    decisions, which the report never changes (it is logged after the decision is recorded,
    and a report failure only adds a note), and rendering its figures was most of each call's
    time. The report itself is tested in test_gate_mcb_report.py and test_report_*.py; the
    CLI's default (report on) in test_registry.py's CLI test, whose other calls pass
    ``--no-report``."""
    from mlcal.mlflow.gate import promote

    return promote(*args, report=False, **kwargs)
