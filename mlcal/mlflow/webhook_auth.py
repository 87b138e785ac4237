"""Authenticate MLflow registry webhook deliveries: HMAC signature, timestamp window, replays.

MLflow (3.3+, ``mlflow.webhooks``) sends each delivery as a POST whose body is the JSON payload,
with three headers (read from ``mlflow/webhooks/delivery.py`` of MLflow 3.17):

* ``X-MLflow-Delivery-Id``: a fresh UUID per delivery (kept by MLflow's own retries);
* ``X-MLflow-Timestamp``: the sending time, integer seconds since the epoch;
* ``X-MLflow-Signature``: ``v1,<base64 HMAC-SHA256>`` of ``<delivery id>.<timestamp>.<body>``
  under the webhook's secret (only when the webhook has a secret).

Because the delivery id and the timestamp are inside the signed content, neither can be changed
without the secret. :class:`WebhookVerifier` therefore checks, in this order: the three headers
are present (else *unsigned*), the signature matches (constant-time compare), the timestamp is
within ``max_age`` seconds of now either way (else *stale*), and the delivery id was not
accepted before (else *replayed*). Ids are remembered only for signed, fresh deliveries and
only until their timestamp leaves the window, after which the window check refuses them anyway,
so the memory is bounded by the delivery rate times the window (and by ``max_remembered``).

A delivery id can be *released* again (:meth:`ReplayGuard.release`) when the receiver could not
take the work (queue full): MLflow retries 429/5xx answers with the same id, which must then be
accepted.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import threading
import time
from dataclasses import dataclass
from typing import Callable, Mapping

SIGNATURE_HEADER = "X-MLflow-Signature"
TIMESTAMP_HEADER = "X-MLflow-Timestamp"
DELIVERY_ID_HEADER = "X-MLflow-Delivery-Id"
SIGNATURE_VERSION = "v1"
#: Default accepted clock difference between the sender's timestamp and now, in seconds.
DEFAULT_MAX_AGE = 300.0
#: Longest delivery id accepted (MLflow sends 36-character UUIDs).
MAX_DELIVERY_ID_LENGTH = 128


class WebhookRefused(Exception):
    """A delivery failed authentication. ``status`` is the HTTP answer, ``reason`` a short
    machine-readable word (``unsigned``, ``bad-signature``, ``stale``, ``replayed``, ...) and
    the message says what was found (never the secret or the signature)."""

    def __init__(self, status: int, reason: str, message: str):
        super().__init__(message)
        self.status, self.reason = status, reason


def signature(secret: str | bytes, delivery_id: str, timestamp: str, body: bytes) -> str:
    """The ``X-MLflow-Signature`` value MLflow sends for this delivery: ``v1,`` and the base64
    HMAC-SHA256 of ``<delivery_id>.<timestamp>.<body>`` keyed by ``secret`` (UTF-8).

    Parameters
    ----------
    secret : str or bytes
    delivery_id, timestamp : str
        The ``X-MLflow-Delivery-Id`` and ``X-MLflow-Timestamp`` header values.
    body : bytes
        The request body exactly as received.

    Returns
    -------
    str
    """
    key = secret.encode("utf-8") if isinstance(secret, str) else bytes(secret)
    signed = delivery_id.encode("utf-8") + b"." + timestamp.encode("utf-8") + b"." + body
    digest = hmac.new(key, signed, hashlib.sha256).digest()
    return f"{SIGNATURE_VERSION},{base64.b64encode(digest).decode('ascii')}"


def signed_headers(secret: str | bytes, body: bytes, *, delivery_id: str,
                   timestamp: int | None = None) -> dict[str, str]:
    """The three headers of a delivery of ``body`` signed as MLflow signs it (for tests, and for
    replaying a delivery by hand); ``timestamp`` defaults to now."""
    ts = str(int(time.time()) if timestamp is None else int(timestamp))
    return {DELIVERY_ID_HEADER: delivery_id, TIMESTAMP_HEADER: ts,
            SIGNATURE_HEADER: signature(secret, delivery_id, ts, body)}


class ReplayGuard:
    """Delivery ids accepted within the window, each forgotten when it expires.

    Parameters
    ----------
    max_remembered : int, default=100_000
        Bound on ids held at once; past it new deliveries are refused (``busy``) until old ones
        expire, rather than forgetting an id that is still inside the window.
    clock : callable, default=time.time
    """

    def __init__(self, max_remembered: int = 100_000, clock: Callable[[], float] = time.time):
        self.max_remembered = int(max_remembered)
        self._clock = clock
        self._expiry: dict[str, float] = {}
        self._lock = threading.Lock()

    def _expire(self, now: float) -> None:
        for key in [k for k, t in self._expiry.items() if t <= now]:
            del self._expiry[key]

    def claim(self, delivery_id: str, expires_at: float) -> bool:
        """Remember ``delivery_id`` until ``expires_at``; False if it is already remembered."""
        with self._lock:
            now = self._clock()
            if delivery_id in self._expiry and self._expiry[delivery_id] > now:
                return False
            if len(self._expiry) >= self.max_remembered:
                self._expire(now)
                if len(self._expiry) >= self.max_remembered:
                    raise WebhookRefused(503, "busy", f"{len(self._expiry)} delivery ids are "
                                         "remembered within the window, the limit; retry later")
            self._expiry[delivery_id] = expires_at
            return True

    def release(self, delivery_id: str) -> None:
        """Forget ``delivery_id`` (the delivery was not processed and may be retried)."""
        with self._lock:
            self._expiry.pop(delivery_id, None)

    def __len__(self) -> int:
        with self._lock:
            return len(self._expiry)


@dataclass(frozen=True)
class VerifiedDelivery:
    """What :meth:`WebhookVerifier.verify` established about an accepted delivery."""

    delivery_id: str
    timestamp: int
    age_seconds: float


class WebhookVerifier:
    """Checks a delivery's signature, timestamp window and novelty (module docstring).

    Parameters
    ----------
    secret : str or bytes
        The webhook's secret, as given to ``MlflowClient.create_webhook(secret=...)``.
    max_age : float, default=300
        Largest accepted difference, in seconds, between the delivery's timestamp and now (in
        either direction: a sender's clock may run ahead).
    replay_guard : ReplayGuard, optional
    clock : callable, default=time.time
    """

    def __init__(self, secret: str | bytes, *, max_age: float = DEFAULT_MAX_AGE,
                 replay_guard: ReplayGuard | None = None,
                 clock: Callable[[], float] = time.time):
        if not secret:
            raise ValueError("the webhook secret is empty; an unsigned webhook cannot be "
                             "authenticated (set one with create_webhook(secret=...))")
        if not max_age > 0:
            raise ValueError(f"max_age must be a positive number of seconds, got {max_age!r}")
        self._secret = secret
        self.max_age = float(max_age)
        self.replay_guard = replay_guard or ReplayGuard(clock=clock)
        self._clock = clock

    def __repr__(self) -> str:   # never the secret
        return f"WebhookVerifier(max_age={self.max_age})"

    def verify(self, headers: Mapping[str, str], body: bytes) -> VerifiedDelivery:
        """Accept a delivery or raise :class:`WebhookRefused`.

        ``headers`` is looked up case-insensitively when it is an ``http.client``/``email``
        message (as :mod:`http.server` gives); a plain dict must use the canonical names.
        On success the delivery id is remembered (a second delivery with it is refused)."""
        delivery_id = headers.get(DELIVERY_ID_HEADER)
        stamp = headers.get(TIMESTAMP_HEADER)
        sent = headers.get(SIGNATURE_HEADER)
        missing = [name for name, value in ((SIGNATURE_HEADER, sent),
                                            (TIMESTAMP_HEADER, stamp),
                                            (DELIVERY_ID_HEADER, delivery_id)) if not value]
        if missing:
            raise WebhookRefused(401, "unsigned", f"missing header(s) {', '.join(missing)}: not "
                                 "a signed MLflow webhook delivery")
        if len(delivery_id) > MAX_DELIVERY_ID_LENGTH:
            raise WebhookRefused(400, "bad-delivery-id", f"delivery id is {len(delivery_id)} "
                                 f"characters, over {MAX_DELIVERY_ID_LENGTH}")
        expected = signature(self._secret, delivery_id, stamp, body)
        # MLflow sends one signature; the Standard Webhooks form allows several, space-separated
        offered = sent.split()
        if not any(hmac.compare_digest(s.encode("utf-8", "replace"), expected.encode("ascii"))
                   for s in offered[:8]):
            versions = sorted({s.split(",", 1)[0] for s in offered if "," in s})
            raise WebhookRefused(403, "bad-signature", "signature does not match the body "
                                 "under the configured secret (offered version(s): "
                                 f"{', '.join(versions) or 'none'})")
        try:
            ts = int(stamp)
        except ValueError:
            raise WebhookRefused(400, "bad-timestamp", f"{TIMESTAMP_HEADER} is not an integer "
                                 f"number of seconds: {stamp[:40]!r}") from None
        now = self._clock()
        age = now - ts
        if abs(age) > self.max_age:
            raise WebhookRefused(403, "stale", f"timestamp is {age:+.0f} s from now, outside "
                                 f"the +-{self.max_age:g} s window")
        # + 1 s: an id is still remembered at the last instant the window accepts its timestamp
        if not self.replay_guard.claim(delivery_id, ts + self.max_age + 1.0):
            raise WebhookRefused(409, "replayed", f"delivery {delivery_id} was already "
                                 "accepted")
        return VerifiedDelivery(delivery_id, ts, age)
