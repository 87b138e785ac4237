"""A :class:`~mlcal.report.data.CalibrationReport` as one self-contained HTML page.

No network and no JavaScript: the CSS is inline, the figures are inline SVG
(:mod:`mlcal.report.figures`), the map's JSON sits in a ``<details>`` element. Every piece of
text that can come from the user (title, class names, model and data names, parameters, gate
notes) goes through :func:`html.escape`.
"""

from __future__ import annotations

import html
import json
import math
from typing import Any

from mlcal._safe_json import dumps_safe
from mlcal.metrics.reliability_bands import DEFAULT_BAND_LEVEL, DEFAULT_BAND_RESAMPLES
from mlcal.report.data import CalibrationReport, is_finite_number
from mlcal.report.figures import ReportFigure, report_figures

CSS = """
:root { --fg: #1d2330; --muted: #5b6475; --line: #d8dce4; --bg: #ffffff; --panel: #f6f7fa;
        --good: #1a7f37; --bad: #b42318; --na: #6e7781; }
* { box-sizing: border-box; }
body { margin: 0; background: var(--bg); color: var(--fg);
       font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; }
main { max-width: 1180px; margin: 0 auto; padding: 24px 28px 48px; }
h1 { font-size: 24px; margin: 0 0 4px; }
h2 { font-size: 18px; margin: 32px 0 8px; padding-bottom: 4px;
     border-bottom: 1px solid var(--line); }
h3 { font-size: 15px; margin: 18px 0 6px; }
p.sub, .note { color: var(--muted); }
.note { font-size: 12.5px; }
table { border-collapse: collapse; margin: 6px 0 10px; font-variant-numeric: tabular-nums; }
th, td { border-bottom: 1px solid var(--line); padding: 4px 10px; text-align: right;
         vertical-align: top; }
th { background: var(--panel); font-weight: 600; }
td:first-child, th:first-child { text-align: left; }
td.text { text-align: left; }
.ci { color: var(--muted); font-size: 12px; white-space: nowrap; }
.better { color: var(--good); } .worse { color: var(--bad); }
.badge { display: inline-block; padding: 2px 10px; border-radius: 12px; font-weight: 600;
         font-size: 13px; }
.pass { background: #dafbe1; color: var(--good); } .fail { background: #ffebe9; color: var(--bad); }
.na { background: #eaeef2; color: var(--na); }
.chosen td { font-weight: 600; background: #eef6ff; }
figure { margin: 12px 0 20px; }
figure svg.figure { width: 100%; height: auto; display: block; }
figcaption { color: var(--muted); font-size: 12.5px; margin-top: 4px; }
details { margin: 6px 0; } summary { cursor: pointer; color: var(--muted); }
pre { background: var(--panel); padding: 10px; overflow: auto; max-height: 420px;
      font-size: 12px; }
dl.kv { display: grid; grid-template-columns: max-content 1fr; gap: 2px 14px; margin: 6px 0; }
dl.kv dt { color: var(--muted); } dl.kv dd { margin: 0; }
"""


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _num(v: Any, digits: int = 4) -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "n/a"
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return _e(v)
    return f"{v:.{digits}f}" if abs(v) >= 1e-3 or v == 0 else f"{v:.2e}"


def _interval(iv: dict | None, signed: bool = False) -> str:
    if not iv or iv.get("estimate") is None:
        return '<span class="ci">n/a</span>'
    est = iv["estimate"]
    head = _num(est)
    if signed and is_finite_number(est) and est >= 0:
        head = "+" + head
    if iv.get("lower") is None:
        return head
    return (f'{head} <span class="ci">[{_num(iv["lower"])}, {_num(iv["upper"])}]</span>')


def _metrics_section(s: dict) -> str:
    conf = s["settings"]["confidence"]
    rows = []
    for r in s["metrics"]:
        change = r.get("change") or {}
        cls = ""
        lo, hi = change.get("lower"), change.get("upper")
        if is_finite_number(lo) and is_finite_number(hi):
            good = (lo > 0) if r["higher_is_better"] else (hi < 0)
            bad = (hi < 0) if r["higher_is_better"] else (lo > 0)
            cls = "better" if good else "worse" if bad else ""
        rows.append(f"<tr><td>{_e(r['label'])}</td><td>{_interval(r.get('before'))}</td>"
                    f"<td>{_interval(r.get('after'))}</td>"
                    f'<td class="{cls}">{_interval(change, signed=True)}</td>'
                    f"<td>{'higher' if r['higher_is_better'] else 'lower'}</td></tr>")
    st = s["settings"]
    return (f"<h2 id='metrics'>Metrics before and after calibration</h2>"
            "<table><tr><th>metric</th><th>before</th><th>after</th><th>change (after − before)"
            "</th><th>better</th></tr>" + "".join(rows) + "</table>"
            f"<p class='note'>Brackets: {conf:.0%} bootstrap intervals ({st['n_resamples']} "
            f"resamples of the rows, seed {st['seed']}; the same resamples for before, after and "
            "the paired change). Calibration errors (ECE, MCB) use the bias-corrected "
            "<em>basic</em> interval, whose lower end may be below 0 (read: consistent with "
            "perfect calibration); the other metrics the percentile interval. A change is "
            "coloured when its whole interval lies on one side of 0.</p>")


def _decomposition_row(label: str, d: dict) -> str:
    if "error" in d:
        return f"<tr><td>{_e(label)}</td><td class='text' colspan='4'>{_e(d['error'])}</td></tr>"
    return (f"<tr><td>{_e(label)}</td><td>{_num(d['score'])}</td><td>{_num(d['mcb'])}</td>"
            f"<td>{_num(d['dsc'])}</td><td>{_num(d['unc'])}</td></tr>")


def _decomposition_section(s: dict) -> str:
    head = ("<table><tr><th>forecast</th><th>score</th><th>MCB (miscalibration)</th>"
            "<th>DSC (discrimination)</th><th>UNC (uncertainty)</th></tr>")
    out = ["<h2 id='decomposition'>CORP decomposition</h2>",
           "<p class='note'>score = MCB − DSC + UNC (Dimitriadis, Gneiting &amp; Jordan 2021): "
           "MCB is what isotonic recalibration would remove, DSC the discrimination that "
           "remains, UNC the score of always forecasting the base rate.</p>"]
    dec = s["decomposition"]
    if s["kind"] == "binary":
        for score, name in (("brier", "Brier score"), ("log_loss", "log loss")):
            out.append(f"<h3>{name}</h3>" + head + "".join(
                _decomposition_row(part, dec[score][part]) for part in ("before", "after"))
                + "</table>")
        out.append(_slope_table(s))
    else:
        out.append("<h3>Top-label forecast (Brier)</h3>" + head + "".join(
            _decomposition_row(part, dec["top_label"][part]) for part in ("before", "after"))
            + "</table>")
        out.append("<h3>Class-wise, one-vs-rest (Brier, summed over the classes)</h3>" + head
                   + "".join(_decomposition_row(part, dec["classwise"][part])
                             for part in ("before", "after")) + "</table>")
        rows = []
        before = dec["classwise"]["before"].get("per_class", [])
        after = dec["classwise"]["after"].get("per_class", [])
        counts = s.get("class_counts", {})
        for b, a in zip(before, after):
            rows.append(f"<tr><td>{_e(b.get('class'))}</td>"
                        f"<td>{_e(counts.get(str(b.get('class')), ''))}</td>"
                        f"<td>{_num(b['mcb'])}</td><td>{_num(a['mcb'])}</td>"
                        f"<td>{_num(b['dsc'])}</td><td>{_num(a['dsc'])}</td></tr>")
        out.append("<details><summary>per class</summary><table><tr><th>class</th><th>rows"
                   "</th><th>MCB before</th><th>MCB after</th><th>DSC before</th>"
                   "<th>DSC after</th></tr>" + "".join(rows) + "</table></details>")
    return "".join(out)


def _slope_table(s: dict) -> str:
    rows = []
    for part in ("before", "after"):
        si, ici = s["slope_intercept"][part], s["ici"][part]
        if "error" in si:
            slope = inter = f"<span class='ci'>{_e(si['error'])}</span>"
        else:
            slope = _interval({"estimate": si["slope"], "lower": si["slope_profile"][0],
                               "upper": si["slope_profile"][1]})
            inter = _interval({"estimate": si["calibration_intercept"],
                               "lower": si["calibration_intercept_profile"][0],
                               "upper": si["calibration_intercept_profile"][1]})
        ici_cells = ("<td colspan='3'>n/a</td>" if "error" in ici else
                     f"<td>{_num(ici['ici'])}</td><td>{_num(ici['e50'])}</td>"
                     f"<td>{_num(ici['e90'])}</td>")
        rows.append(f"<tr><td>{part}</td><td>{slope}</td><td>{inter}</td>{ici_cells}</tr>")
    return ("<h3>Logistic recalibration and ICI</h3><table><tr><th>forecast</th>"
            "<th>calibration slope (ideal 1)</th><th>calibration-in-the-large (ideal 0)</th>"
            "<th>ICI</th><th>E50</th><th>E90</th></tr>" + "".join(rows) + "</table>"
            "<p class='note'>Slope and intercept from the logistic fit of the labels on "
            "logit(p), with 95 % profile-likelihood intervals; ICI/E50/E90: mean, median and "
            "90th percentile of |p − loess curve| (Austin &amp; Steyerberg 2019).</p>")


def _figures_section(figures: list[ReportFigure], s: dict, keys: tuple[str, ...],
                     heading: str, note: str) -> str:
    chosen = [f for f in figures if f.key in keys]
    if not chosen:
        return ""
    body = "".join(f"<figure id='{_e(f.key)}'>{f.svg}<figcaption>{_e(f.caption)}</figcaption>"
                   "</figure>" for f in chosen)
    return f"<h2 id='{_e(keys[0])}-section'>{heading}</h2><p class='note'>{note}</p>{body}"


def _kv(pairs: list[tuple[str, Any]]) -> str:
    return "<dl class='kv'>" + "".join(f"<dt>{_e(k)}</dt><dd>{_e(v)}</dd>" for k, v in pairs) \
        + "</dl>"


def _map_section(s: dict, figures: list[ReportFigure]) -> str:
    cal = s.get("calibrator")
    if cal is None:
        return ""
    params = ", ".join(f"{k}={v!r}" for k, v in cal["params"].items()) or "(defaults)"
    pairs = [("method", cal["method"]), ("calibrator class", cal["class"]),
             ("map type", cal["map_type"]), ("map size (parameters)", cal["map_size"]),
             ("input transform", cal["input_transform"]),
             ("fitted domain", "n/a" if cal["domain"] is None else
              f"[{cal['domain'][0]:.6g}, {cal['domain'][1]:.6g}]"),
             ("parameters", params)]
    fig = "".join(f"<figure id='{_e(f.key)}'>{f.svg}<figcaption>{_e(f.caption)}</figcaption>"
                  "</figure>" for f in figures if f.key == "map")
    doc = dumps_safe(cal["document"], indent=1)
    return ("<h2 id='map-section'>Calibration map</h2>" + _kv(pairs) + fig +
            "<details><summary>map document (JSON, as saved with the model)</summary><pre>"
            + _e(doc) + "</pre></details>")


def _method_section(s: dict) -> str:
    cal = s.get("calibrator")
    if cal is None or "fit_info" not in cal:
        return ""
    info = cal["fit_info"]
    rows = []
    for c in info.get("candidates", []):
        cls = " class='chosen'" if c.get("method") == info.get("chosen") else ""
        rows.append(f"<tr{cls}><td>{_e(c.get('method'))}</td><td class='text'>"
                    f"{_e(c.get('status'))}</td><td>{_num(c.get('cv_log_loss'), 5)}</td>"
                    f"<td>{_num(c.get('se'), 5)}</td><td>{_num(c.get('complexity'), 1)}</td>"
                    "</tr>")
    pairs = [("chosen", info.get("chosen")), ("lowest CV log loss", info.get("best")),
             ("reason", info.get("reason")), ("rule", f"{info.get('rule')} "
                                                      f"(se_rule {info.get('se_rule')})"),
             ("folds", f"{info.get('n_folds')} over {info.get('fold_unit', 'points')}, seed "
                       f"{info.get('seed')}"),
             ("distinct scores", info.get("n_unique"))]
    return ("<h2 id='method-section'>Method choice (auto)</h2>" + _kv(pairs) +
            "<table><tr><th>candidate</th><th>status</th><th>CV log loss</th>"
            "<th>SE of difference to best</th><th>map size</th></tr>" + "".join(rows)
            + "</table><p class='note'>auto cross-validates every candidate and takes the "
            + ("simplest (smallest mean map size)" if info.get("rule") == "one-se" else
               "first listed candidate") +
            " whose CV log loss is within se_rule standard "
            "errors of the lowest (log loss is a proper score: it rewards calibration and "
            "sharpness together).</p>")


def _gate_corp_table(decomposition: dict | None) -> str:
    """The CORP terms of the candidate (and holder) on the gate's rows, when it had data."""
    if not decomposition:
        return ""
    rows = [f"<tr><td>{_e(who)}</td><td class='text'>{name}</td>"
            + "".join(f"<td>{_num(terms.get(k), 5)}</td>" for k in ("score", "mcb", "dsc", "unc"))
            + "</tr>"
            for who, d in decomposition.items() if d
            for key, name in (("brier", "Brier score"), ("log_loss", "log loss"))
            for terms in [d.get(key, {})]]
    return ("<table><tr><th>on the gate's rows</th><th>score</th><th>value</th><th>MCB</th>"
            "<th>DSC</th><th>UNC</th></tr>" + "".join(rows) + "</table>")


def _gate_segment_table(segments: dict | None) -> str:
    """The gate's per-segment table (``max_segment_citl``): the worst segments first."""
    if not segments:
        return ""
    worst = segments.get("worst", {}).get("label")
    rows = []
    for seg in segments.get("table", []):
        flag = ("worst" if seg.get("label") == worst else
                "used" if seg.get("eligible") else "too small, not used")
        rows.append(f"<tr><td class='text'>{_e(seg.get('label'))}</td>"
                    f"<td>{_num(seg.get('rows'), 0)}</td>"
                    f"<td>{_num(seg.get('mean_prediction'), 4)}</td>"
                    f"<td>{_num(seg.get('observed_rate'), 4)}</td>"
                    f"<td>{_num(seg.get('citl'), 4)}</td>"
                    f"<td class='ci'>[{_num(seg.get('citl_lower'), 4)}, "
                    f"{_num(seg.get('citl_upper'), 4)}]</td>"
                    f"<td>{_num(seg.get('ece'), 4)}</td><td>{_num(seg.get('log_loss'), 4)}</td>"
                    f"<td>{_num(seg.get('brier'), 4)}</td><td class='text'>{flag}</td></tr>")
    more = segments.get("truncated") or 0
    return ("<h3 id='gate-segments'>Segments by " + _e(", ".join(segments.get("columns", [])))
            + "</h3><table><tr><th>segment</th><th>rows</th><th>mean prediction</th>"
            "<th>observed</th><th>O - E</th><th>interval</th><th>ECE</th><th>log loss</th>"
            "<th>Brier</th><th></th></tr>" + "".join(rows) + "</table>"
            f"<p class='note'>Intervals: logit-offset score intervals at "
            f"{_num(segments.get('interval_confidence'), 4)} each (Bonferroni over the "
            f"{_e(segments.get('n_eligible'))} segments with at least "
            f"{_e(segments.get('min_segment_rows'))} rows); the criterion uses the lower bound "
            "of |O - E|." + (f" {more} more segments not shown." if more else "") + "</p>")


def _gate_section(s: dict) -> str:
    gate = s.get("gate")
    if gate is None:
        return ""
    promoted = gate.get("result") == "promoted"
    badge = (f"<span class='badge {'pass' if promoted else 'fail'}'>"
             f"{_e(str(gate.get('result', 'n/a')).upper())}</span>")
    rows = []
    for c in gate.get("criteria", []):
        verdict = {True: ("pass", "pass"), False: ("FAIL", "fail"), None: ("n/a", "na")}[
            c.get("passed")]
        interval = ("" if c.get("lower") is None else
                    f"[{_num(c.get('lower'), 5)}, {_num(c.get('upper'), 5)}]")
        op = "≥" if c.get("name") == "auc_vs_holder" else "≤"
        rows.append(f"<tr><td>{_e(c.get('name'))}</td><td>{_num(c.get('value'), 5)}</td>"
                    f"<td class='ci'>{interval}</td><td>{op} {_num(c.get('limit'), 5)}</td>"
                    f"<td><span class='badge {verdict[1]}'>{verdict[0]}</span></td>"
                    f"<td class='text'>{_e(c.get('note') or '')}</td></tr>")
    pairs = [("model", f"{gate.get('model_name')} version {gate.get('version')}"),
             ("alias", gate.get("alias")), ("compared with", gate.get("compared_to") or
                                            "no current holder"),
             ("metrics from", gate.get("source")), ("decided at", gate.get("decided_at"))]
    notes = "".join(f"<li>{_e(n)}</li>" for n in gate.get("notes", []))
    policy = json.dumps(gate.get("policy", {}), indent=1, default=str)
    return ("<h2 id='gate-section'>Gate decision " + badge + "</h2>" + _kv(pairs) +
            "<table><tr><th>criterion</th><th>value</th><th>interval</th><th>limit</th>"
            "<th>verdict</th><th>note</th></tr>" + "".join(rows) + "</table>"
            + _gate_corp_table(gate.get("decomposition"))
            + _gate_segment_table(gate.get("segments"))
            + (f"<ul class='note'>{notes}</ul>" if notes else "")
            + "<details><summary>policy</summary><pre>" + _e(policy) + "</pre></details>")


def _header(s: dict) -> str:
    facts = [("rows", s["n"])]
    if s["kind"] == "binary":
        facts.append(("positives", f"{s['base_rate']:.2%}"))
    else:
        facts.append(("classes", f"{len(s['classes'])}: " + ", ".join(s["classes"])))
    facts += list(s["source"].items())
    facts += [("created", s["created_at"]), ("mlcal", s["mlcal_version"])]
    return f"<h1>{_e(s['title'])}</h1><p class='sub'>{_e(s['kind'])} classifier</p>" + _kv(facts)


def render_html(report: CalibrationReport) -> str:
    """The report as one self-contained HTML document (see the module docstring)."""
    s = report.summary
    figures = report_figures(report)
    band_note = ("Solid line: the CORP curve (isotonic regression of the labels on the "
                 f"forecasts). Shaded: the {DEFAULT_BAND_LEVEL:.0%} consistency band, where "
                 "the curve of a calibrated forecaster with the same forecasts would fall "
                 f"(labels redrawn from the forecasts, {DEFAULT_BAND_RESAMPLES} resamples); "
                 f"hollow markers: {s['settings']['n_bins']} "
                 f"{_e(s['settings']['strategy'])} bins with their item counts; below: "
                 "histogram of the forecasts.")
    parts = [_header(s), _gate_section(s), _metrics_section(s),
             _figures_section(figures, s,
                              ("reliability", "reliability-logit", "reliability-classes"),
                              "Reliability diagrams", band_note),
             _decomposition_section(s), _map_section(s, figures), _method_section(s)]
    return ("<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
            "<meta name='viewport' content='width=device-width, initial-scale=1'>"
            f"<title>{_e(s['title'])}</title><style>{CSS}</style></head><body><main>"
            + "".join(parts) + "</main></body></html>\n")
