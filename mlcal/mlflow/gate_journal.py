"""The promotion gate's history journal: intent records written before the alias moves, and
their reconciliation after a promotion was killed.

A history entry is one JSON registered-model tag ``mlcal.gate.history.<alias>.<UTC time>.
v<version>.<nonce>``. :func:`mlcal.mlflow.gate.promote` writes its entry under one key in two
steps: an *intent* (``result: "pending"``, the holder it replaces in ``from_version`` and the
writing process in ``owner``) just before it moves the alias, then the final decision over it.
A process killed in between leaves a pending entry; the next :func:`reconcile` (run by every
``promote`` and ``gate_history``) finds it once its owner is gone and rewrites it with what
actually happened, read from the alias itself:

* the alias is on the intended version: ``result: "promoted"``, ``reconciled.outcome:
  "completed"`` (the move happened; the version's ``mlcal.gate.*`` tags are written too);
* the alias is still on ``from_version``: ``result: "aborted"`` (the move never happened);
* the alias is on a third version: ``result: "interrupted"`` (another promotion moved it since;
  whether this move happened first cannot be told).

An owner is gone when it ran on this host and its process no longer exists (or is a zombie, or
the pid now belongs to a process started at another time), or, for another host, when the
intent is older than ``stale_seconds``.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import random
import socket
from typing import Any, Callable

HISTORY_TAG_PREFIX = "mlcal.gate.history."
#: An intent of another host's process is taken as abandoned after this long (a promotion
#: moves the alias and records its decision within a few settle periods).
DEFAULT_STALE_SECONDS = 600.0


def utc_now() -> str:
    """The current UTC time, ISO 8601 with microseconds (history entries sort on it)."""
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="microseconds")


def history_key(alias: str, decided_at: str, version: str) -> str:
    """A fresh, never reused history tag key for one promotion."""
    stamp = decided_at.replace("+00:00", "Z").replace(":", "").replace("-", "")
    return (f"{HISTORY_TAG_PREFIX}{alias}.{stamp}.v{version}."
            f"{os.getpid()}{random.randrange(16 ** 4):04x}")


def _process_start(pid: int) -> str | None:
    """The kernel's start time of ``pid`` (clock ticks since boot, /proc/<pid>/stat field 22),
    None where /proc is unavailable; tells a reused pid from the original process."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return fields[19]


def _process_state(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None


def owner() -> dict[str, Any]:
    """This process, as recorded in an intent."""
    return {"host": socket.gethostname(), "pid": os.getpid(),
            "process_start": _process_start(os.getpid())}


def _owner_gone(entry: dict, now: _dt.datetime, stale_seconds: float) -> bool:
    who = entry.get("owner") or {}
    if who.get("host") == socket.gethostname() and isinstance(who.get("pid"), int):
        pid = who["pid"]
        if os.path.exists("/proc"):
            start = _process_start(pid)
            return start is None or start != who.get("process_start") \
                or _process_state(pid) == "Z"
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False
        return False
    written = _dt.datetime.fromisoformat(entry["decided_at"])
    return (now - written).total_seconds() > stale_seconds


def pending_entries(tags: dict[str, str]) -> dict[str, dict]:
    """History entries (by tag key) that are intents never completed."""
    out = {}
    for key, value in tags.items():
        if key.startswith(HISTORY_TAG_PREFIX):
            entry = json.loads(value)
            if entry.get("result") == "pending":
                out[key] = entry
    return out


def reconcile(client, model_name: str, *, holder_of: Callable[[str], str | None],
              write_entry: Callable[[str, dict], None],
              write_version_tags: Callable[[dict], None],
              stale_seconds: float = DEFAULT_STALE_SECONDS) -> list[dict]:
    """Rewrite every abandoned intent of ``model_name`` with its real outcome (module
    docstring); returns the rewritten entries.

    ``holder_of(alias)`` reads an alias's current version, ``write_entry(key, entry)`` writes a
    history tag and ``write_version_tags(entry)`` the version's latest-decision tags (the gate
    supplies these, with its retrying writes)."""
    tags = client.get_registered_model(model_name).tags
    now = _dt.datetime.fromisoformat(utc_now())
    done = []
    for key, entry in sorted(pending_entries(tags).items()):
        if not _owner_gone(entry, now, stale_seconds):
            continue   # a live promotion: it will finish its own entry
        holder = holder_of(entry["alias"])
        target, before = entry["version"], entry.get("from_version")
        if holder == target:
            outcome, result = "completed", "promoted"
        elif holder == before:
            outcome, result = "aborted", "aborted"
        else:
            outcome, result = "unknown", "interrupted"
        entry = {**entry, "result": result, "holder_version": holder,
                 "reconciled": {"at": utc_now(), "outcome": outcome, "alias_holder": holder,
                                "by": owner()}}
        entry["notes"] = list(entry.get("notes", [])) + [
            f"the promoting process (pid {entry['owner'].get('pid')}) stopped after recording "
            f"its intent; reconciled from the alias: {outcome} (alias on "
            f"{'nothing' if holder is None else 'version ' + holder})"]
        write_version_tags(entry)
        write_entry(key, entry)
        done.append(entry)
    return done
