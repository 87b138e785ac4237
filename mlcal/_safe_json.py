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
#: Element budget. The size cap alone does not bound memory: parsed, ``[]`` (2 bytes) becomes a
#: 64-byte list, so 57 MiB of empty arrays took 3.2 GB. Every container of a valid mlcal
#: document carries at least ~19 bytes of text (the most compact class map,
#: ``{"type":"step","format_version":1,"thresholds":[],"values":[0]}``, holds 3 in 62 bytes)
#: and every string at least ~10 (``{"type":"sigmoid","format_version":1,"a":0,"b":0}``: 5 in
#: 49), so a document of n bytes may hold ``ELEMENT_SLACK + n // BYTES_PER_CONTAINER`` arrays
#: and objects and ``ELEMENT_SLACK + n // BYTES_PER_STRING`` strings (keys included). That
#: holds parsed containers to ~4x and strings to ~7x the document size; numbers need no budget
#: (each takes at least 2 bytes of text for 8-32 bytes parsed). The Java evaluator applies the
#: same budget (io.mlcal.Json).
BYTES_PER_CONTAINER = 16
BYTES_PER_STRING = 8
ELEMENT_SLACK = 1024


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


def element_limits(n_bytes: int) -> tuple[int, int]:
    """``(containers, strings)``: how many arrays/objects and strings a valid document of
    ``n_bytes`` bytes (UTF-8) may hold; see :data:`BYTES_PER_CONTAINER`."""
    return (ELEMENT_SLACK + n_bytes // BYTES_PER_CONTAINER,
            ELEMENT_SLACK + n_bytes // BYTES_PER_STRING)


def _count(data: str | bytes, chars: str | bytes) -> int:
    return sum(data.count(c) for c in chars)


_CHUNK = 1 << 16   # ~1 MB of temporaries per chunk


def _structure(raw: bytes) -> tuple[int, int, int]:
    """``(containers, strings, depth)`` of JSON text counted exactly outside strings: a quote
    ends or starts a string unless an odd run of backslashes precedes it. Vectorised over
    chunks with the state carried across (inside a string or not, trailing backslashes,
    nesting level), so time is linear and memory bounded whatever the document holds."""
    import numpy as np

    codes = np.frombuffer(raw, dtype=np.uint8)
    containers = quotes = deepest = level = inside = carry = 0
    for start in range(0, codes.size, _CHUNK):
        a = codes[start:start + _CHUNK]
        idx = np.arange(a.size)
        not_bs = a != 92
        last = np.maximum.accumulate(np.where(not_bs, idx, -1))
        # backslashes right before each position (the carry counts those of earlier chunks)
        prev = np.concatenate(([-1], last[:-1]))
        run = np.where(prev >= 0, idx - 1 - prev, idx + carry)
        real = (a == 34) & (run % 2 == 0)
        parity = (np.cumsum(real) + inside) % 2   # odd: inside a string (or its closing quote)
        outside = parity == 0
        opens = ((a == 91) | (a == 123)) & outside
        closes = ((a == 93) | (a == 125)) & outside
        containers += int(opens.sum())
        n_real = int(real.sum())
        quotes += n_real
        levels = np.cumsum(opens.astype(np.int64) - closes) + level
        deepest, level = max(deepest, int(levels.max())), int(levels[-1])
        inside = (inside + n_real) % 2
        carry = carry + a.size if last[-1] < 0 else a.size - 1 - int(last[-1])
    return containers, quotes // 2, deepest


def check_element_budget(data: str | bytes) -> None:
    """Refuse, before parsing, a document holding more containers or strings than
    :func:`element_limits` allows for its size (``ValueError`` naming both numbers).

    Counting brackets and quotes is a few passes of ``bytes.count``; only when that upper
    bound is over the budget is the text scanned exactly (:func:`_structure`), so a bracket
    inside a string never counts.
    """
    text = isinstance(data, str)
    brackets, quote = ("[{", '"') if text else (b"[{", b'"')
    size = len(data)   # characters <= UTF-8 bytes: a budget no larger than the real one
    containers, strings = _count(data, brackets), data.count(quote) // 2
    max_containers, max_strings = element_limits(size)
    if containers <= max_containers and strings <= max_strings:
        return
    raw = data.encode("utf-8") if text else data
    size = len(raw)
    containers, strings, depth = _structure(raw)
    del raw
    if depth > MAX_DEPTH:   # the more telling reason
        raise ValueError(f"document is nested deeper than {MAX_DEPTH} levels")
    max_containers, max_strings = element_limits(size)
    if containers > max_containers:
        raise ValueError(f"document holds {containers} arrays and objects, more than a valid "
                         f"document of {size} bytes can ({max_containers})")
    if strings > max_strings:
        raise ValueError(f"document holds {strings} strings, more than a valid document of "
                         f"{size} bytes can ({max_strings})")


def loads_strict(data: str | bytes | bytearray, *, max_bytes: int = MAX_DOCUMENT_BYTES) -> Any:
    """Parse one JSON document strictly.

    Raises
    ------
    ValueError
        Too large, more arrays/objects or strings than its size allows
        (:func:`check_element_budget`), not UTF-8, starts with a byte-order mark, not JSON,
        non-finite or overflowing numbers, duplicate keys, or nested deeper than ``MAX_DEPTH``.
    """
    if isinstance(data, (bytes, bytearray)):
        if len(data) > max_bytes:
            raise ValueError(f"document is {len(data)} bytes, over the {max_bytes}-byte limit")
        check_element_budget(data)
        try:
            data = bytes(data).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ValueError(f"document is not UTF-8 text ({exc.reason} at byte "
                             f"{exc.start})") from None
    elif not isinstance(data, str):
        raise ValueError(f"expected JSON text, got {type(data).__name__}")
    elif len(data) > max_bytes:
        raise ValueError(f"document is {len(data)} characters, over the {max_bytes} limit")
    else:
        check_element_budget(data)
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
