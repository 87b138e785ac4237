"""A hostile-document corpus for mlcal's calibrator loaders, generated deterministically.

``generate(out_dir)`` fits a real calibrator of every registered method (and the multiclass
ones) on fixed data, writes each document once as it is and then many times broken in one way
(truncated, wrong types, NaN/Infinity, huge numbers, deep nesting, duplicate keys, unknown
fields, element bombs within the size cap, method/map mismatches, decreasing maps of monotone
methods, wrong lengths, out-of-range parameters, byte-order marks and other encodings), plus
file-system traps (FIFO, device, directory, socket, dangling and good symlinks). It returns one
record per case: ``name``, ``path`` and ``expect`` ("load", "error" or "either": a mutation
that may or may not keep the document valid).

Run it directly to write the corpus to a directory: ``python -m tests.hostile.make_documents
DIR``.
"""

from __future__ import annotations

import copy
import json
import os
import socket
import sys
import warnings
from pathlib import Path
from typing import Any, Callable

import numpy as np

from mlcal.calibrators.multiclass_auto import OVR_PREFIX
from tests.hostile.segmented_cases import TAMPERED, segmented_document

#: size of each element-bomb document (within the 64 MiB cap, so only the element budget
#: stops it)
BOMB_BYTES = 4 * 1024 * 1024
MULTICLASS = ("multiclass-one-vs-rest", "multiclass-temperature", "multiclass-vector",
              "multiclass-matrix", "multiclass-auto")


def fitted_documents() -> dict[str, dict]:
    """A fitted document of every registered binary method, every multiclass method, a
    segmented calibrator and multicalibration (of the score alone)."""
    import mlcal
    from mlcal.calibrators.multiclass import (MatrixScaling, OneVsRest, TemperatureScaling,
                                              VectorScaling)
    from mlcal.calibrators.multiclass_auto import MulticlassAuto

    rng = np.random.default_rng(24)
    s = rng.random(300)
    y = (rng.random(300) < s ** 1.5).astype(int)
    margins = np.log(s) - np.log1p(-s)
    docs = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for method in mlcal.available_calibrators():
            docs[method] = mlcal.get_calibrator(method).fit(s, y).to_dict()
        # raw margins: methods needing [0, 1] record the sigmoid input transform
        for method in ("isotonic", "beta", "histogram"):
            docs[f"{method}@margins"] = mlcal.get_calibrator(method).fit(margins, y).to_dict()
        # quadratic scaling on margins: an on="margin" map (no input transform)
        docs["quadratic@margins"] = mlcal.get_calibrator("quadratic").fit(margins, y).to_dict()
        logits = rng.normal(0.0, 2.0, (300, 3))
        yk = np.argmax(logits + rng.gumbel(size=(300, 3)), axis=1)
        for name, cal in (("ovr-isotonic", OneVsRest("isotonic")),
                          ("ovr-auto", OneVsRest("auto")),
                          ("ovr-platt-spec", OneVsRest(mlcal.get_calibrator("platt"))),
                          ("temperature-k3", TemperatureScaling()),
                          ("vector-k3", VectorScaling()), ("matrix-k3", MatrixScaling()),
                          # multiclass auto: the default candidates (temperature is chosen
                          # here), a matrix and a one-vs-rest auto choice (class_extras)
                          ("mcauto-default", MulticlassAuto()),
                          ("mcauto-matrix", MulticlassAuto(candidates=["matrix", "vector"],
                                                           se_rule=0.0)),
                          ("mcauto-ovr-auto", MulticlassAuto(candidates=["one-vs-rest:auto",
                                                                         "one-vs-rest:isotonic"],
                                                             n_folds=3))):
            docs[name] = cal.fit(logits, yk).to_dict()
    docs["segmented"] = segmented_document()
    # multicalibration fitted without segment features: its document reads the score alone,
    # so every loader and the command line can score it (and its map, placed in the other
    # documents, must be refused there)
    from mlcal.multicalibration import Multicalibration

    docs["multicalibration"] = Multicalibration(max_iter=4, max_depth=2, min_hessian_leaf=2.0,
                                                validation_fraction=None).fit(s, y).to_dict()
    assert len(docs["multicalibration"]["map"]["trees"]) >= 2
    return docs


def _json(doc: Any) -> bytes:
    return json.dumps(doc).encode("utf-8")


def _other_kind_map(doc: dict, pool: dict[str, dict]) -> list[tuple[str, dict]]:
    """Maps of other kinds taken from the other fitted documents (binary with binary,
    multiclass with binary and vice versa)."""
    own = doc["map"]["type"]
    seen, out = {own}, []
    for other in pool.values():
        m = other["map"]
        if m["type"] not in seen:
            seen.add(m["type"])
            out.append((m["type"], copy.deepcopy(m)))
    return out


def _decreasing(m: dict) -> dict | None:
    """``m`` made decreasing somewhere (None if it has nothing to reverse)."""
    m = copy.deepcopy(m)
    if m["type"] in ("step", "linear"):
        values = m["values"]
        if len(values) < 2 or values[0] == values[-1]:
            return None
        m["values"] = sorted(values, reverse=True)
    elif m["type"] == "sigmoid":
        m["a"] = abs(m["a"]) + 1.0
    elif m["type"] == "beta":
        m["a"] = -abs(m["a"]) - 1.0
    elif m["type"] == "quadratic":   # decreasing in z everywhere (b = 0, a < 0)
        m["a"], m["b"] = -abs(m["a"]) - 1.0, 0.0
    else:
        return None
    return m


def _first(params: dict, kinds: tuple[type, ...]) -> str | None:
    return next((k for k, v in params.items() if isinstance(v, kinds)
                 and not isinstance(v, bool)), None)


def _rules(doc: dict) -> dict:
    """The method-table entry whose map rules apply to ``doc`` (auto and multiclass auto: their
    chosen method's)."""
    from mlcal.calibrators.document_rules import method_table

    table = method_table()
    method = doc["method"]
    if method == "auto":   # an anchor candidate's rules are its registered method's
        chosen = doc["fit_info"]["chosen"]
        method = table["auto"].get("anchors", {}).get(chosen, chosen)
    elif method == "multiclass-auto":
        chosen = doc["fit_info"]["chosen"]
        method = ("multiclass-one-vs-rest" if chosen.startswith(OVR_PREFIX)
                  else f"multiclass-{chosen}")
    return table[method]


def _ovr_inner(doc: dict) -> str:
    """The binary method of a one-vs-rest document (or of multiclass auto's one-vs-rest
    choice)."""
    if doc["method"] == "multiclass-auto":
        return doc["fit_info"]["chosen"][len(OVR_PREFIX):]
    return doc["params"]["calibrator"]


def _multiclass_auto_mutations(doc: dict) -> list[tuple[str, str, Callable[[dict], Any]]]:
    """(case, expect, edit) of a multiclass auto document: its fit_info (which names the
    chosen candidate whose rules the map must follow) tampered with."""
    info = doc["fit_info"]
    chosen = info["chosen"]
    ovr = chosen.startswith(OVR_PREFIX)
    # a candidate of the other kind, added to the candidates and chosen: the map is not its
    other = "vector" if ovr else "one-vs-rest:isotonic"
    listed = {r["method"] for r in info["candidates"]}
    unlisted = next(n for n in ("temperature", "vector", "matrix", OVR_PREFIX + "platt")
                    if n not in listed)

    def choose(name: str) -> Callable[[dict], Any]:
        def edit(d: dict) -> None:
            rows = d["fit_info"]["candidates"]
            if name not in [r["method"] for r in rows]:
                rows.append({"method": name, "status": "ok"})
            d["fit_info"]["chosen"] = name
        return edit

    def info_edit(**changes: Any) -> Callable[[dict], Any]:
        return lambda d: d["fit_info"].update(changes)

    cases = [
        ("fit-info-missing", "error", lambda d: d.pop("fit_info")),
        ("fit-info-list", "error", lambda d: d.update(fit_info=[])),
        ("fit-info-chosen-unknown", "error", info_edit(chosen="no-such-candidate")),
        # a real method, but not among the compared candidates
        ("fit-info-chosen-not-a-candidate", "error", info_edit(chosen=unlisted)),
        ("fit-info-chosen-other-kind", "error", choose(other)),
        ("fit-info-candidate-not-multiclass", "error",
         lambda d: d["fit_info"]["candidates"][0].update(method="auto")),
        ("fit-info-candidate-unknown-binary", "error",
         lambda d: d["fit_info"]["candidates"][0].update(method=OVR_PREFIX + "platt2")),
        ("fit-info-unknown-key", "error", info_edit(junk=1)),
        ("fit-info-missing-key", "error", lambda d: d["fit_info"].pop("reason")),
        ("fit-info-input-kind-auto", "error", info_edit(input_kind="auto")),
        ("fit-info-n-rows-float", "error", info_edit(n_rows=float(info["n_rows"]))),
        ("fit-info-best-number", "error", info_edit(best=3)),
        ("fit-info-row-unknown-key", "error",
         lambda d: d["fit_info"]["candidates"][0].update(junk=1)),
        ("candidates-param-twice", "error",
         lambda d: d["params"].update(candidates=["vector", "vector"])),
        ("candidates-param-auto", "error", lambda d: d["params"].update(candidates=["auto"])),
    ]
    if ovr:
        # a plain binary method chosen instead: its class maps carry auto's fit_info
        cases.append(("fit-info-chosen-isotonic", "error" if "class_extras" in doc else "either",
                      choose(OVR_PREFIX + "isotonic")))
        cases.append(("class-extras-dropped", "either", lambda d: d.pop("class_extras", None)))
    else:
        cases.append(("class-extras-on-softmax", "error",
                      lambda d: d.update(class_extras=[{}] * 3)))
        # the input kind the map was not fitted on
        flipped = "logits" if info["input_kind"] == "probabilities" else "probabilities"
        cases.append(("fit-info-input-kind-flipped", "error", info_edit(input_kind=flipped)))
        if doc["map"]["weights"] and isinstance(doc["map"]["weights"][0], list):
            cases.append(("fit-info-chosen-temperature", "error", choose("temperature")))
        else:
            cases.append(("fit-info-chosen-matrix", "error", choose("matrix")))
    return cases


def _mutations(name: str, doc: dict, pool: dict[str, dict]
               ) -> list[tuple[str, str, bytes | Callable[[], bytes]]]:
    """(case, expect, content) for one fitted document."""
    text = json.dumps(doc)
    rules = _rules(doc)
    cases: list[tuple[str, str, bytes | Callable[[], bytes]]] = []

    def edited(case: str, expect: str, edit: Callable[[dict], Any]) -> None:
        d = copy.deepcopy(doc)
        edit(d)
        cases.append((case, expect, _json(d)))

    cases.append(("valid", "load", text.encode()))
    cases.append(("valid-indented", "load", json.dumps(doc, indent=3).encode()))
    for frac in (0.0, 0.1, 0.5, 0.99):
        cases.append((f"truncated-{frac}", "error", text[:int(len(text) * frac)].encode()))
    cases.append(("trailing-garbage", "error", (text + " x").encode()))
    cases.append(("two-documents", "error", (text + text).encode()))
    cases.append(("bom", "error", ("\ufeff" + text).encode()))
    cases.append(("utf-16", "error", text.encode("utf-16")))
    cases.append(("latin-1-byte", "error", text.replace('"map"', '"m\xe4p"', 1)
                  .encode("latin-1")))
    cases.append(("nul-byte", "error", text.replace('"map"', '"m\x00ap"', 1).encode()))
    cases.append(("nan-token", "error", text.replace('"format_version": 1',
                                                     '"format_version": NaN', 1).encode()))
    cases.append(("infinity-token", "error", text[:-1].encode() + b', "x": -Infinity}'))
    cases.append(("huge-float", "error", text[:-1].encode() + b', "x": 1e400}'))
    cases.append(("huge-int", "error", text[:-1].encode() + b', "x": ' + b"9" * 401 + b"}"))
    cases.append(("duplicate-key", "error", text[:-1].encode() + b', "method": "platt"}'))
    cases.append(("deep-nesting", "error", text[:-1].encode() + b', "x": ' + b"[" * 40
                  + b"]" * 40 + b"}"))
    cases.append(("top-level-array", "error", b"[" + text.encode() + b"]"))
    edited("unknown-field", "error", lambda d: d.update(junk=1))
    edited("unknown-field-null", "error", lambda d: d.update(comment=None))
    edited("params-list", "error", lambda d: d.update(params=[]))
    edited("map-string", "error", lambda d: d.update(map="step"))
    edited("method-number", "error", lambda d: d.update(method=5))
    edited("method-unknown", "error", lambda d: d.update(method="platt2"))
    edited("format-version-2", "error", lambda d: d.update(format_version=2))
    edited("format-version-float", "error", lambda d: d.update(format_version=1.0))
    edited("params-unknown-name", "error", lambda d: d["params"].update(junk=1))
    edited("map-type-unknown", "error", lambda d: d["map"].update(type="spline"))
    edited("map-format-version-true", "error",
           lambda d: d["map"].update(format_version=True))
    edited("mlcal-version-number", "load", lambda d: d.update(mlcal_version=3))
    # out-of-range parameters: the first integer and the first float parameter
    ints = _first(doc["params"], (int,))
    if ints is not None:
        edited(f"param-{ints}-1e300", "error", lambda d: d["params"].update({ints: 10 ** 300}))
        edited(f"param-{ints}-negative", "error", lambda d: d["params"].update({ints: -5}))
        edited(f"param-{ints}-float", "error", lambda d: d["params"].update({ints: 2.5}))
    reals = _first(doc["params"], (float,))
    if reals is not None:
        edited(f"param-{reals}-negative", "error", lambda d: d["params"].update({reals: -1.0}))
        edited(f"param-{reals}-string", "error", lambda d: d["params"].update({reals: "1"}))
    if "input_transform" in doc["params"]:
        edited("param-input_transform-logit", "error",
               lambda d: d["params"].update(input_transform="logit"))
    # the map of another method: another kind (or a multiclass map in a binary document)
    for kind, m in _other_kind_map(doc, pool):
        # a kind the method fits may still break its transform or monotonicity rule
        expect = "either" if kind in rules["map_kinds"] else "error"
        edited(f"map-of-kind-{kind}", expect, lambda d, m=m: d.update(map=m))
    mono = _decreasing(doc["map"])
    if mono is not None:
        edited("decreasing-map", "error" if rules["monotone"] else "load",
               lambda d: d.update(map=mono))
    m = doc["map"]
    if m["type"] == "multicalibration":
        tree = m["trees"][0]
        edited("mc-root-left-itself", "error",
               lambda d: d["map"]["trees"][0]["left"].__setitem__(0, 0))
        edited("mc-threshold-string", "error",
               lambda d: d["map"]["trees"][0]["threshold"].__setitem__(0, "0.5"))
        edited("mc-leaf-value-huge", "load",
               lambda d: d["map"]["trees"][0]["value"].__setitem__(-1, 1e300))
        edited("mc-tree-too-many-nodes", "error", lambda d: d["map"]["trees"][0].update(
            feature=[-1] * 70_000))
        edited("mc-trees-repeated", "load", lambda d: d["map"].update(
            trees=[tree] * 2000))
        edited("mc-categorical-score", "error", lambda d: d["map"]["features"][0].update(
            kind="categorical", categories=["a"]))
    if m["type"] in ("step", "linear"):
        edited("values-one-longer", "error", lambda d: d["map"]["values"].append(0.5))
        edited("values-above-1", "error", lambda d: d["map"]["values"].__setitem__(-1, 1.5))
        edited("values-strings", "error",
               lambda d: d["map"].update(values=[str(v) for v in d["map"]["values"]]))
    if name in ("isotonic", "histogram"):   # an element bomb in a known field, within the cap
        cases.append(("values-empty-array-bomb", "error", lambda m=m: _json_with_bomb(
            doc, ["map", "values"], b"[]")))
    if m["type"] == "quadratic":
        edited("quadratic-a-huge", "error", lambda d: d["map"].update(a=10 ** 400))
        edited("quadratic-b-null", "error", lambda d: d["map"].update(b=None))
        edited("quadratic-c-string", "error", lambda d: d["map"].update(c="0.5"))
        edited("quadratic-c-missing", "error", lambda d: d["map"].pop("c"))
        edited("quadratic-b-true", "error", lambda d: d["map"].update(b=True))
        edited("quadratic-floor-negative", "error", lambda d: d["map"].update(floor=-0.1))
        edited("quadratic-floor-half", "error", lambda d: d["map"].update(floor=0.5))
        edited("quadratic-floor-string", "error", lambda d: d["map"].update(floor="0.01"))
        edited("quadratic-floor-zero", "load", lambda d: d["map"].update(floor=0.0))
        edited("quadratic-on-unknown", "error", lambda d: d["map"].update(on="probit"))
        edited("quadratic-on-missing", "error", lambda d: d["map"].pop("on"))
        edited("quadratic-on-list", "error", lambda d: d["map"].update(on=["logit"]))
        edited("quadratic-unknown-field", "error", lambda d: d["map"].update(d=0.0))
        edited("quadratic-unknown-field-null", "error", lambda d: d["map"].update(note=None))
        edited("quadratic-margin-with-sigmoid", "error",
               lambda d: d["map"].update(on="margin", input_transform="sigmoid"))
        edited("quadratic-huge-coefficients", "load",
               lambda d: d["map"].update(a=1.7e308, b=-1.7e308))
    if m["type"] == "beta" or (m["type"] == "quadratic" and m["on"] == "logit"):
        # the score clamp (issue #26): optional, 2^-1022 <= lo <= 2^-40, 1 - 2^-40 <= hi < 1
        for case, expect, clamp in (
                ("clamp-widest", "load", [2.0 ** -1022, 1 - 2.0 ** -53]),
                ("clamp-default-spelled-out", "load", [2.0 ** -40, 1 - 2.0 ** -40]),
                ("clamp-lo-zero", "error", [0.0, 1 - 2.0 ** -40]),
                ("clamp-lo-subnormal", "error", [5e-324, 1 - 2.0 ** -40]),
                ("clamp-lo-above-default", "error", [1e-3, 1 - 2.0 ** -40]),
                ("clamp-hi-one", "error", [1e-300, 1.0]),
                ("clamp-hi-below-default", "error", [1e-300, 0.999]),
                ("clamp-swapped", "error", [1 - 2.0 ** -45, 2.0 ** -45]),
                ("clamp-strings", "error", ["1e-300", "0.99999999999999"]),
                ("clamp-bool", "error", [True, 1 - 2.0 ** -45]),
                ("clamp-three-values", "error", [1e-300, 0.5, 1 - 2.0 ** -45]),
                ("clamp-not-a-list", "error", 1e-300),
                ("clamp-huge-int", "error", [10 ** 400, 1 - 2.0 ** -45])):
            edited(case, expect, lambda d, c=clamp: d["map"].update(clamp=c))
    if m["type"] == "quadratic" and m["on"] == "margin":
        edited("quadratic-margin-with-clamp", "error",
               lambda d: d["map"].update(clamp=[1e-300, 1 - 2.0 ** -45]))
    if m["type"] == "multiclass-ovr":
        edited("ovr-one-class", "error", lambda d: d["map"].update(maps=d["map"]["maps"][:1]))
        edited("ovr-nested", "error",
               lambda d: d["map"]["maps"].__setitem__(0, copy.deepcopy(d["map"])))
        sub = _decreasing(m["maps"][0])
        if sub is not None:   # an error for a monotone binary method (isotonic here)
            edited("ovr-class-map-decreasing",
                   "error" if _ovr_inner(doc) == "isotonic" else "either",
                   lambda d: d["map"]["maps"].__setitem__(0, sub))
    if m["type"] == "softmax-affine":
        edited("softmax-negative-temperature", "error",
               lambda d: d["map"].update(temperature=-1.0))
        edited("softmax-short-bias", "error", lambda d: d["map"]["bias"].pop())
    if doc["method"] == "multiclass-auto":
        for case, expect, edit in _multiclass_auto_mutations(doc):
            edited(case, expect, edit)
    if doc["method"] == "segmented":   # the segment table and its params, one edit each
        for label, (edit, _) in TAMPERED.items():
            edited("tampered-" + label.replace(" ", "-"), "error", edit)
        cases.append(("bare-segmented-map", "error", _json(doc["map"])))
    # another method's extra field
    extra = "interval" if "fit_info" in doc or "interval" not in doc else "fit_info"
    edited(f"foreign-extra-{extra}", "error", lambda d: d.update({extra: {}}))
    return cases


def _json_with_bomb(doc: dict, path: list[str], item: bytes) -> bytes:
    """``doc`` with the field at ``path`` replaced by an array of ``item`` filling
    :data:`BOMB_BYTES`."""
    marker = "__BOMB__"
    d = copy.deepcopy(doc)
    target = d
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = marker
    head, tail = json.dumps(d).encode().split(b'"' + marker.encode() + b'"')
    n = (BOMB_BYTES - len(head) - len(tail)) // (len(item) + 1)
    return head + b"[" + b",".join([item] * n) + b"]" + tail


def _bombs(doc: dict) -> list[tuple[str, str, Callable[[], bytes]]]:
    """Element bombs in an unknown top-level field, within the size cap: containers,
    numbers (the Java heap), strings, objects."""
    return [(f"bomb-{label}", "error", lambda item=item: _json_with_bomb(doc, ["junk"], item))
            for label, item in (("empty-arrays", b"[]"), ("zeros", b"0"),
                                ("empty-strings", b'""'), ("empty-objects", b"{}"),
                                ("nested-arrays", b"[[0]]"))]


def generate(out_dir: str | os.PathLike) -> list[dict[str, Any]]:
    """Write the corpus to ``out_dir``; returns one record per case (see the module notes)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    docs = fitted_documents()
    records = []

    def add(name: str, expect: str, content: bytes | Callable[[], bytes]) -> Path:
        path = out / f"{len(records):04d}-{name.replace('/', '_')}.json"
        path.write_bytes(content() if callable(content) else content)
        # the command line where the map rules decide, and on every third other case (the
        # CLI loads through the same function; all of them would double the test's time)
        rules = any(k in name for k in ("/valid", "decreasing", "map-of-kind", "param-"))
        # `mlcal evaluate` refuses a segmented calibrator that loads (it reads no segment
        # columns), so the command line is not compared on those cases
        cli = (rules or len(records) % 3 == 0) and not name.startswith("segmented/")
        records.append({"name": name, "path": str(path), "expect": expect,
                        "export_onnx": rules, "cli": cli})
        return path

    for name, doc in docs.items():
        for case, expect, content in _mutations(name, doc, docs):
            add(f"{name}/{case}", expect, content)
    for case, expect, content in _bombs(docs["isotonic"]):
        add(f"isotonic/{case}", expect, content)
    # file-system traps
    good = Path(records[0]["path"])
    traps = out / "traps"
    traps.mkdir(exist_ok=True)
    fifo = traps / "fifo.json"
    os.mkfifo(fifo)
    entries = [("fifo", fifo), ("dev-zero", Path("/dev/zero")), ("dev-null", Path("/dev/null")),
               ("directory", traps)]
    link = traps / "zero-link.json"
    link.symlink_to("/dev/zero")
    entries.append(("symlink-to-dev-zero", link))
    link = traps / "fifo-link.json"
    link.symlink_to(fifo)
    entries.append(("symlink-to-fifo", link))
    link = traps / "dangling.json"
    link.symlink_to(traps / "missing.json")
    entries.append(("dangling-symlink", link))
    entries.append(("missing-file", traps / "nope.json"))
    sock_path = traps / "sock.json"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(sock_path))
    sock.close()   # the socket file stays
    entries.append(("socket", sock_path))
    for name, path in entries:
        records.append({"name": f"file/{name}", "path": str(path), "expect": "error",
                        "cli": True})
    link = traps / "good-link.json"
    link.symlink_to(good)
    records.append({"name": "file/symlink-to-valid", "path": str(link), "expect": "load",
                    "cli": True})
    return records


if __name__ == "__main__":
    cases = generate(sys.argv[1])
    print(f"{len(cases)} cases in {sys.argv[1]}")
