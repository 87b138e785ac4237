"""Strict JSON both ways: bounded parsing of artifacts that may come from anywhere, and
:func:`dumps_safe`, the one encoder of what mlcal writes (never invalid JSON).

``json.loads`` alone accepts ``NaN``/``Infinity``, turns ``1e400`` into ``inf``, keeps the last
of duplicate keys, parses any size and raises ``RecursionError`` on deep nesting. Artifacts are
plain data of small depth, so everything else is rejected here with a ``ValueError`` that names
the problem (and never echoes the document).
"""

from __future__ import annotations

import json
import math
from typing import Any

MAX_DOCUMENT_BYTES = 64 * 1024 * 1024   # a 1M-bin step map is ~40 MB
MAX_DEPTH = 32                          # mlcal documents nest 3 levels deep
MAX_INT_DIGITS = 400                    # far beyond any count; bounds int() parsing time
_BOM = "\ufeff"


def _parse_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"number {text[:40]} is out of the range of a 64-bit float")
    return value


def _parse_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise ValueError(f"an integer has more than {MAX_INT_DIGITS} digits")
    return int(text)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON (non-finite numbers are not allowed)")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    doc = dict(pairs)
    if len(doc) != len(pairs):
        seen: set[str] = set()
        dup = next(k for k, _ in pairs if k in seen or seen.add(k))
        raise ValueError(f"duplicate key {dup[:40]!r} in an object")
    return doc


def _depth(doc: Any) -> int:
    """Nesting depth, iteratively (a recursive walk could itself overflow)."""
    deepest, stack = 0, [(doc, 1)]
    while stack:
        node, level = stack.pop()
        if isinstance(node, (dict, list)):
            deepest = max(deepest, level)
            if deepest > MAX_DEPTH:
                return deepest
            children = node.values() if isinstance(node, dict) else node
            stack.extend((c, level + 1) for c in children if isinstance(c, (dict, list)))
    return deepest


def loads_strict(data: str | bytes | bytearray, *, max_bytes: int = MAX_DOCUMENT_BYTES) -> Any:
    """Parse one JSON document strictly.

    Raises
    ------
    ValueError
        Too large, not UTF-8, starts with a byte-order mark, not JSON, non-finite or overflowing
        numbers, duplicate keys, or nested deeper than ``MAX_DEPTH``.
    """
    if isinstance(data, (bytes, bytearray)):
        if len(data) > max_bytes:
            raise ValueError(f"document is {len(data)} bytes, over the {max_bytes}-byte limit")
        try:
            data = bytes(data).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ValueError(f"document is not UTF-8 text ({exc.reason} at byte "
                             f"{exc.start})") from None
    elif not isinstance(data, str):
        raise ValueError(f"expected JSON text, got {type(data).__name__}")
    elif len(data) > max_bytes:
        raise ValueError(f"document is {len(data)} characters, over the {max_bytes} limit")
    if data.startswith(_BOM):
        raise ValueError("document starts with a byte-order mark (U+FEFF); JSON files must not "
                         "(save it as UTF-8 without BOM)")
    try:
        doc = json.loads(data, parse_float=_parse_float, parse_int=_parse_int,
                         parse_constant=_reject_constant, object_pairs_hook=_unique_keys)
    except RecursionError:
        raise ValueError(f"document is nested deeper than {MAX_DEPTH} levels") from None
    except ValueError as exc:   # json.JSONDecodeError is a ValueError too
        raise ValueError(f"not valid JSON: {exc}") from None
    if _depth(doc) > MAX_DEPTH:
        raise ValueError(f"document is nested deeper than {MAX_DEPTH} levels")
    return doc


NONFINITE_POLICIES = ("null", "error")


def _plain(obj: Any, nonfinite: str, where: str) -> Any:
    """A copy of ``obj`` made of JSON types: numpy scalars/arrays become Python numbers/lists
    and non-finite floats become None (or raise, per ``nonfinite``)."""
    import numpy as np

    if isinstance(obj, dict):
        return {k: _plain(v, nonfinite, f"{where}.{k}" if where else str(k))
                for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(v, nonfinite, f"{where}[{i}]") for i, v in enumerate(obj)]
    if isinstance(obj, np.ndarray):
        return _plain(obj.tolist(), nonfinite, where)
    if isinstance(obj, (bool, np.bool_)):
        return bool(obj)
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        value = float(obj)
        if math.isfinite(value):
            return value
        if nonfinite == "error":
            raise ValueError(f"{where or 'the document'} is {value}; JSON has no non-finite "
                             "numbers")
        return None
    return obj


def dumps_safe(obj: Any, *, indent: int | None = None, nonfinite: str = "null") -> str:
    """Encode ``obj`` as strict JSON that :func:`loads_strict` (and any JSON parser) reads.

    Parameters
    ----------
    obj
        Dicts, lists, tuples, strings, numbers, booleans, None; numpy scalars and arrays too.
    indent : int, optional
        As in :func:`json.dumps`.
    nonfinite : {"null", "error"}, default="null"
        What a NaN or infinite float becomes: ``null`` (reports: e.g. AUC on one class is
        undefined), or a ``ValueError`` naming where it is (documents that must stay loadable,
        such as a calibrator's map). ``json.dumps`` would write the invalid tokens ``NaN`` and
        ``Infinity``.
    """
    if nonfinite not in NONFINITE_POLICIES:
        raise ValueError(f"nonfinite must be one of {NONFINITE_POLICIES}, got {nonfinite!r}")
    return json.dumps(_plain(obj, nonfinite, ""), indent=indent, allow_nan=False)
