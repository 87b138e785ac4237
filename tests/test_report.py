"""The HTML calibration report: its numbers against the metric functions themselves, the gate
and auto sections, escaping of user text and self-containment (run logging and the ``mlcal
report`` command: ``test_report_mlflow.py``)."""

import json
import re

import numpy as np
import pytest

from mlcal.metrics.bootstrap import bootstrap_ci
from mlcal.metrics import ece
from mlcal.metrics.decomposition import corp_decomposition
from mlcal.report import assemble_report, build_report, render_html

EXTERNAL = re.compile(r"""(?:src|href)\s*=\s*["']?\s*(?:https?:)?//|@import|url\(\s*["']?"""
                      r"""\s*(?:https?:)?//""", re.I)


def binary_case(n=600, seed=0):
    rng = np.random.default_rng(seed)
    p = rng.uniform(0.02, 0.98, n)
    y = (rng.uniform(size=n) < p).astype(int)
    return y, np.clip(p ** 0.6, 0, 1), p


GATE = {"model_name": "fraud <model>", "version": "7", "alias": "champion",
        "result": "refused", "decided_at": "2026-11-25T00:00:00+00:00", "source": "data",
        "holder_version": "6", "compared_to": "6", "rounds": 1,
        "notes": ["holder re-read & unchanged"],
        "criteria": [{"name": "ece", "value": 0.031, "limit": 0.02, "passed": False,
                      "lower": 0.021, "upper": 0.041, "note": "interval above the limit"},
                     {"name": "auc_vs_holder", "value": 0.002, "limit": -0.01, "passed": True,
                      "lower": -0.004, "upper": 0.008, "note": None},
                     {"name": "brier_vs_holder", "value": None, "limit": 0.0025,
                      "passed": None, "lower": None, "upper": None, "note": "not computed"}],
        "policy": {"max_ece": 0.02}}


def test_binary_report_numbers_come_from_the_metric_functions():
    y, pb, pa = binary_case()
    r = assemble_report(y, pb, pa, n_resamples=50, seed=3)
    rows = {row["key"]: row for row in r.summary["metrics"]}
    ref = bootstrap_ci(lambda yy, pp: ece(yy, pp, 10, "uniform"), y, pa, n_resamples=50,
                       seed=3, method="basic")
    assert rows["ece"]["after"] == ref.as_dict()
    change = rows["brier"]["change"]
    assert change["estimate"] == pytest.approx(np.mean((pa - y) ** 2) - np.mean((pb - y) ** 2))
    assert change["lower"] <= change["estimate"] <= change["upper"]
    dec = r.summary["decomposition"]["brier"]["after"]
    assert dec == corp_decomposition(y, pa).as_dict()
    assert r.summary["slope_intercept"]["after"]["slope"] == pytest.approx(1.0, abs=0.3)
    assert r.summary["base_rate"] == pytest.approx(y.mean())
    page = render_html(r)
    # the table shows the same numbers
    assert f"{rows['ece']['after']['estimate']:.4f}" in page
    assert f"{dec['mcb']:.4f}" in page


def test_page_is_self_contained_and_escapes_user_text():
    y, pb, pa = binary_case(300)
    evil = "<script>alert(1)</script> & \"q\""
    page = build_report(y, pb, pa, title=evil, source={"model": "<img src=x onerror=1>"},
                        gate=GATE, n_resamples=20)
    assert "<script" not in page.lower() and "onerror=1>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt; &amp; &quot;q&quot;" in page
    assert not EXTERNAL.search(page), EXTERNAL.search(page)
    assert "http://" not in page and "https://" not in page
    # ids are unique across the inlined figures, and every #reference resolves
    ids = re.findall(r'\sid="([^"]+)"', page)
    assert len(ids) == len(set(ids))
    refs = set(re.findall(r'(?:href="#|url\(#)([^")]+)', page))
    assert refs and refs <= set(ids)


def test_gate_decision_every_criterion_and_verdict():
    y, pb, pa = binary_case(300)
    page = build_report(y, pb, pa, gate=GATE, n_resamples=20)
    section = page[page.index("id='gate-section'"):page.index("id='metrics'")]
    assert "REFUSED" in section and "fraud &lt;model&gt; version 7" in section
    for c in GATE["criteria"]:
        assert f"<td>{c['name']}</td>" in section
    verdicts = re.findall(r"class='badge (pass|fail|na)'>", section)
    assert verdicts == ["fail", "fail", "pass", "na"]   # the headline, then each criterion
    assert "[0.02100, 0.04100]" in section and "≥ -0.01000" in section
    assert "holder re-read &amp; unchanged" in section
    with pytest.raises(ValueError, match="gate must be a dict"):
        assemble_report(y, pb, pa, gate="promoted", n_resamples=20)


def test_auto_candidates_scores_and_choice_are_shown():
    from mlcal import get_calibrator

    y, pb, pa = binary_case(800, seed=1)
    cal = get_calibrator("auto", candidates=["platt", "isotonic", "beta"]).fit(pb, y)
    page = build_report(y, pb, cal.predict(pb), calibrator=cal, map_data=(pb, y),
                        n_resamples=20)
    info = cal.selection_
    section = page[page.index("id='method-section'"):]
    for c in info["candidates"]:
        assert f"<td>{c['method']}</td>" in section
        assert f"{c['cv_log_loss']:.5f}" in section
    chosen = re.findall(r"<tr class='chosen'><td>([^<]+)</td>", section)
    assert chosen == [info["chosen"]]
    # the map: a figure, its summary and its JSON document
    assert "id='map'" in page and f"<dd>{cal.map_.kind}</dd>" in page
    doc = re.search(r"map document.*?<pre>(.*?)</pre>", page, re.S).group(1)
    import html
    assert json.loads(html.unescape(doc))["method"] == "auto"


def test_multiclass_report_has_classwise_parts():
    rng = np.random.default_rng(2)
    proba = rng.dirichlet(np.ones(3) * 2, 500)
    y = np.array([rng.choice(3, p=r) for r in proba])
    sharp = proba ** 2 / (proba ** 2).sum(1, keepdims=True)
    r = assemble_report(y, sharp, proba, classes=["cat", "dog", "<b>"], n_resamples=20)
    assert r.multiclass and r.summary["classes"] == ["cat", "dog", "<b>"]
    assert [m["key"] for m in r.summary["metrics"]][:2] == ["top_label_ece", "classwise_ece"]
    page = render_html(r)
    assert "<dd>3: cat, dog, &lt;b&gt;</dd>" in page
    assert page.count("<svg") == 2
    with pytest.raises(ValueError, match="2 names for 3"):
        assemble_report(y, sharp, proba, classes=["a", "b"], n_resamples=20)


def test_figures_fit_their_own_canvas():
    """figure_svg (the report's SVG) and the plots' PNG writer write the figure's canvas as laid
    out (no tight bbox): every figure they draw keeps all of its ink (titles, legends, tick
    labels, bin counts) inside the canvas, at most the layout's few points of white margin away
    from its edges."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from mlcal import Isotonic
    from mlcal.plotting import plot_map, plot_multiclass_reliability, reliability_diagram
    from mlcal.plotting.corp import corp_reliability_diagram, plot_multiclass_corp_reliability

    y, before, after = binary_case(800, seed=3)
    rare = np.zeros(800, dtype=int)
    rare[:12] = 1
    rng = np.random.default_rng(1)
    proba = rng.dirichlet(np.ones(4), 300)
    yk = rng.integers(0, 4, 300)
    figures = [corp_reliability_diagram(y, before, after, n_resamples=20),
               corp_reliability_diagram(rare, before * 0.05, after * 0.03, scale="logit",
                                        n_resamples=20),
               plot_multiclass_corp_reliability(yk, proba, proba ** 1.5 / (proba ** 1.5).sum(
                   1, keepdims=True), panels="classes", n_resamples=20),
               plot_map(Isotonic().fit(before, y), scores=before, y=y),
               reliability_diagram(y, before, after),
               reliability_diagram(rare, before * 0.05, scale="logit"),
               plot_multiclass_reliability(yk, proba, class_names=["a", "b", "c", "d"])]
    for fig in figures:
        FigureCanvasAgg(fig)
        fig.draw_without_rendering()             # the layout, as savefig runs it
        ink, canvas = fig.get_tightbbox(), fig.bbox_inches
        assert ink.x0 >= -1e-9 and ink.y0 >= -1e-9, (ink, canvas)
        assert ink.x1 <= canvas.x1 + 1e-9 and ink.y1 <= canvas.y1 + 1e-9, (ink, canvas)
        # and less than a quarter inch of white margin on any side
        assert max(ink.x0, ink.y0, canvas.x1 - ink.x1, canvas.y1 - ink.y1) < 0.25, (ink, canvas)
