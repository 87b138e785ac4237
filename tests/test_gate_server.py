"""Issue #29 item 4: `mlcal gate-server`, the receiver of MLflow's registry webhooks.

Unit level: real HTTP requests to a GateServer on 127.0.0.1 (the gate behind it a real
`promote` on a sqlite registry); the signature is checked against MLflow's own signer.
Integration (marked): a real `mlflow server` (sqlite, 127.0.0.1) and the real `mlcal
gate-server` command in a subprocess, which registers the webhook; registering versions makes
MLflow itself fire it: a good model is promoted, a constant one refused.
"""

import http.client
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

mlflow = pytest.importorskip("mlflow")

from mlcal.mlflow.webhook_auth import (DELIVERY_ID_HEADER, SIGNATURE_HEADER,  # noqa: E402
                                       TIMESTAMP_HEADER, ReplayGuard, WebhookRefused,
                                       WebhookVerifier, signature, signed_headers)
from mlcal.mlflow.webhook_server import (EventLog, GateServer, gate_runner,  # noqa: E402
                                         read_evaluation_data, read_secret)

ROOT = Path(__file__).resolve().parents[1]
SECRET = "test-secret-9f2c"
MODEL = "gated"


def _payload(entity="model_version", action="created", name=MODEL, version="1") -> bytes:
    return json.dumps({"entity": entity, "action": action, "timestamp": "2026-11-25T00:00:00",
                       "data": {"name": name, "version": version, "source": "models:/m-1",
                                "run_id": None, "tags": {}, "description": None}}).encode()


def _send(url: str, body: bytes, headers: dict | None = None, *, chunked: bool = False):
    """POST ``body`` with ``headers`` (Content-Type and Content-Length added unless chunked);
    returns (status, parsed JSON answer, answer headers)."""
    host, _, rest = url.removeprefix("http://").partition("/")
    conn = http.client.HTTPConnection(host, timeout=30)
    try:
        if chunked:
            conn.request("POST", "/" + rest, body=iter([body]), encode_chunked=True,
                         headers={"Content-Type": "application/json", **(headers or {})})
        else:
            conn.request("POST", "/" + rest, body=body,
                         headers={"Content-Type": "application/json", **(headers or {})})
        resp = conn.getresponse()
        return resp.status, json.loads(resp.read() or b"{}"), dict(resp.getheaders())
    finally:
        conn.close()


def _signed(body: bytes, **kw) -> dict:
    return signed_headers(SECRET, body, delivery_id=kw.pop("delivery_id", str(uuid.uuid4())),
                          **kw)


def _lines(path: Path, kind: str | None = None) -> list[dict]:
    out = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    return [e for e in out if kind is None or e["kind"] == kind]


# ------------------------------------------------------------------ signature (MLflow's signer)
def test_signature_is_mlflows_own():
    from mlflow.webhooks.delivery import _generate_hmac_signature

    body = _payload()
    for secret, delivery, ts in ((SECRET, "d-1", "1795632540"), ("ünï", str(uuid.uuid4()), "0")):
        assert signature(secret, delivery, ts, body) == \
            _generate_hmac_signature(secret, delivery, ts, body.decode())


def test_verifier_refusals_by_name():
    now = 1_800_000_000.0
    v = WebhookVerifier(SECRET, max_age=300, clock=lambda: now)
    body = _payload()
    ok = _signed(body, timestamp=int(now) - 300, delivery_id="a")
    assert v.verify(ok, body).delivery_id == "a"              # exactly at the window's edge
    cases = {
        "unsigned": {k: v_ for k, v_ in ok.items() if k != SIGNATURE_HEADER},
        "bad-signature": {**ok, SIGNATURE_HEADER: signature("other", "a", ok[TIMESTAMP_HEADER],
                                                            body)},
        "stale": _signed(body, timestamp=int(now) - 301, delivery_id="b"),
        "replayed": ok,
    }
    for reason, headers in cases.items():
        with pytest.raises(WebhookRefused) as exc:
            v.verify(headers, body)
        assert exc.value.reason == reason
    # the timestamp and the id are signed: changing either breaks the signature
    for changed in ({TIMESTAMP_HEADER: str(int(now))}, {DELIVERY_ID_HEADER: "c"}):
        with pytest.raises(WebhookRefused, match="does not match"):
            v.verify({**_signed(body, timestamp=int(now) - 5, delivery_id="d"), **changed},
                     body)
    with pytest.raises(ValueError, match="secret is empty"):
        WebhookVerifier("")


def test_replay_guard_forgets_only_expired_ids():
    t = [0.0]
    g = ReplayGuard(max_remembered=2, clock=lambda: t[0])
    assert g.claim("a", 10) and not g.claim("a", 10) and g.claim("b", 20)
    with pytest.raises(WebhookRefused, match="limit"):
        g.claim("c", 30)                                       # full: never forget a live id
    t[0] = 10.0
    assert g.claim("c", 30) and len(g) == 2                    # "a" expired and was dropped
    g.release("c")
    assert g.claim("c", 30)


# ------------------------------------------------------------------ the receiver over HTTP
@pytest.fixture(scope="module")
def registry(tmp_path_factory):
    """A sqlite registry holding no versions of MODEL yet (the gate fails by name)."""
    from support.mlflow_store import sqlite_store

    root = tmp_path_factory.mktemp("gate-server-unit")
    with sqlite_store(root, "unit") as uri:
        mlflow.MlflowClient().create_registered_model(MODEL)
        yield uri


@pytest.fixture()
def receiver(registry, tmp_path):
    frame = pd.DataFrame({"x": np.linspace(0, 1, 50), "y": np.arange(50) % 2})
    log_path = tmp_path / "gate-server.log"
    server = GateServer(SECRET, [MODEL], gate_runner(alias="champion", data=frame,
                                                     max_ece=0.05, min_rows=10),
                        max_body=4096, log=EventLog(path=str(log_path)))
    with server:
        yield server, log_path


def test_refusals_over_http_are_answered_and_logged(receiver):
    server, log_path = receiver
    body = _payload(version="7")
    stale = _signed(body, timestamp=int(time.time()) - 400)
    future = _signed(body, timestamp=int(time.time()) + 400)
    tampered = _signed(body)
    replay = _signed(_payload(name="someone-else"))
    sent = [
        ("unsigned", _send(server.url, body), 401),
        ("bad-signature", _send(server.url, body, signed_headers("wrong", body,
                                                                 delivery_id="x")), 403),
        ("bad-signature", _send(server.url, body.replace(b'"7"', b'"8"'), tampered), 403),
        ("stale", _send(server.url, body, stale), 403),
        ("stale", _send(server.url, body, future), 403),
        (None, _send(server.url, _payload(name="someone-else"), replay), 200),
        ("replayed", _send(server.url, _payload(name="someone-else"), replay), 409),
        ("too-large", _send(server.url, b"{" + b" " * 100_000 + b"}",
                            _signed(b"{}")), 413),
        ("no-length", _send(server.url, body, _signed(body), chunked=True), 411),
        ("bad-json", _send(server.url, b"{not json", _signed(b"{not json")), 400),
        ("bad-payload", _send(server.url, b"[1, 2]", _signed(b"[1, 2]")), 400),
        ("unknown-path", _send(server.url + "x", body, _signed(body)), 404),
    ]
    for reason, (status, answer, _), expected in sent:
        assert status == expected, (reason, status, answer)
        if reason is not None:
            assert answer["error"] == reason
    logged = _lines(log_path, "request")
    assert [e["status"] for e in logged] == [s[2] for s in sent]
    assert [e.get("reason") for e in logged if e["outcome"] == "refused"] == \
        [r for r, _, s in sent if s >= 400]
    assert all(e["peer"] == "127.0.0.1" for e in logged)
    text = log_path.read_text()
    assert SECRET not in text and tampered[SIGNATURE_HEADER] not in text
    assert server.workers.outcomes == []                    # no refused request ran the gate


def test_claimed_oversized_body_is_refused_unread(receiver):
    server, log_path = receiver
    host = server.url.removeprefix("http://").split("/")[0]
    conn = http.client.HTTPConnection(host, timeout=30)
    conn.putrequest("POST", server.path)
    conn.putheader("Content-Length", str(10 ** 9))
    conn.endheaders(b"{")                       # 1 byte of the announced gigabyte
    resp = conn.getresponse()
    assert resp.status == 413 and json.loads(resp.read())["error"] == "too-large"
    conn.close()
    assert _lines(log_path, "request")[-1]["reason"] == "too-large"


def test_requests_http_server_refuses_itself_are_logged_too(receiver):
    server, log_path = receiver
    host = server.url.removeprefix("http://").split("/")[0]
    conn = http.client.HTTPConnection(host, timeout=30)
    conn.request("PUT", server.path, body=b"{}")
    assert conn.getresponse().status == 501
    conn.close()
    body = _payload(version="\u0663")            # an Arabic-Indic digit is not a version
    status, answer, _ = _send(server.url, body, _signed(body))
    assert status == 400 and answer["error"] == "bad-payload"
    with urllib.request.urlopen(server.url.rsplit("/", 1)[0] + "/health") as resp:
        assert resp.status == 200
    logged = _lines(log_path, "request")
    assert [(e["status"], e["outcome"], e.get("reason")) for e in logged] == \
        [(501, "refused", "bad-request"), (400, "refused", "bad-payload"),
         (200, "health", None)]
    assert logged[0]["method"] == "PUT"


def test_connections_beyond_the_bound_are_closed_and_logged(tmp_path):
    import socket

    log_path = tmp_path / "log"
    with GateServer(SECRET, [MODEL], lambda m, v: None, max_connections=2,
                    log=EventLog(path=str(log_path))) as server:
        host, port = server.httpd.server_address[:2]
        # two connections that send nothing hold both slots (each handler waits for its
        # request line); connections are accepted in order, so the third finds none free
        idle = [socket.create_connection((host, port)) for _ in range(2)]
        try:
            extra = socket.create_connection((host, port))
            extra.settimeout(10)
            assert extra.recv(100) == b""          # closed at once, not after the 10 s
            extra.close()
        finally:
            for s in idle:
                s.close()
    refused = [e for e in _lines(log_path, "request") if e["reason"] == "too-many-connections"]
    assert len(refused) == 1 and refused[0]["peer"] == "127.0.0.1"


def test_other_events_and_models_are_acknowledged_and_ignored(receiver):
    server, log_path = receiver
    for body in (_payload(entity="model_version", action="tag_set"),
                 _payload(entity="registered_model", action="created"),
                 _payload(name="not-gated")):
        status, answer, _ = _send(server.url, body, _signed(body))
        assert status == 200 and answer["result"] == "ignored", answer
    assert [e["reason"] for e in _lines(log_path, "request")] == \
        ["other-event", "other-event", "other-model"]
    assert server.workers.depth() == 0 and server.workers.outcomes == []


def test_accepted_delivery_runs_the_real_gate_and_logs_its_outcome(receiver):
    server, log_path = receiver
    body = _payload(version="42")               # no such version: the real gate says so
    status, answer, _ = _send(server.url, body, _signed(body))
    assert status == 202 and answer == {"result": "queued", "model": MODEL, "version": "42"}
    assert server.wait_idle(60)
    gate = _lines(log_path, "gate")
    assert len(gate) == 1 and gate[0]["outcome"] == "error" and gate[0]["version"] == "42"
    assert "42" in gate[0]["message"] and gate[0]["error"] in ("RestException",
                                                               "MlflowException")
    status, _, _ = _send(server.url, body, _signed(body))   # a new delivery is gated again
    assert status == 202 and server.wait_idle(60) and len(_lines(log_path, "gate")) == 2
    with urllib.request.urlopen(server.url.rsplit("/", 1)[0] + "/health") as resp:
        assert json.loads(resp.read()) == {"status": "ok", "pending_gates": 0}


def test_one_gate_at_a_time_per_model_bounded_queue_and_retry(tmp_path):
    release = threading.Event()
    running, calls, peak = [0], [], [0]
    lock = threading.Lock()

    class Decision:   # what run_gate returns: the GateDecision interface the log reads
        def __init__(self, version):
            self.version = version

        def as_dict(self):
            return {"result": "refused", "alias": "champion", "holder_version": None,
                    "compared_to": None, "criteria": [{"name": "ece", "passed": False}]}

    def slow_gate(model, version):          # a gate slower than MLflow's delivery timeout
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
            calls.append(version)
        release.wait(30)
        with lock:
            running[0] -= 1
        return Decision(version)

    log_path = tmp_path / "log"
    with GateServer(SECRET, [MODEL], slow_gate, queue_size=1,
                    log=EventLog(path=str(log_path))) as server:
        answers = []
        for v in ("1", "2", "3"):
            body = _payload(version=v)
            answers.append(_send(server.url, body, _signed(body, delivery_id=f"d{v}")))
            if v == "1":   # the worker has taken version 1: the queue is empty again
                deadline = time.monotonic() + 30
                while not calls and time.monotonic() < deadline:
                    time.sleep(0.01)
        assert [a[0] for a in answers] == [202, 202, 503]
        assert answers[2][1]["error"] == "queue-full" and answers[2][2]["Retry-After"] == "30"
        dup = _payload(version="2")
        assert _send(server.url, dup, _signed(dup))[1]["result"] == "already-queued"
        # MLflow retries a 503 with the same delivery id: it was released, so not a replay
        body3 = _payload(version="3")
        assert _send(server.url, body3, _signed(body3, delivery_id="d3"))[0] == 503
        release.set()
        assert server.wait_idle(30)
        assert _send(server.url, body3, _signed(body3, delivery_id="d3"))[0] == 202
        assert server.wait_idle(30)
    assert calls == ["1", "2", "3"] and peak[0] == 1
    assert [e["version"] for e in _lines(log_path, "gate")] == ["1", "2", "3"]
    assert _lines(log_path)[-1]["kind"] == "stop"


def test_secret_and_data_are_read_with_named_errors(tmp_path):
    assert read_secret(env="S", environ={"S": "abc"}) == "abc"
    f = tmp_path / "secret"
    f.write_text("from-file\n")
    assert read_secret(file=str(f)) == "from-file"
    with pytest.raises(ValueError, match="environment variable S.*unset or empty"):
        read_secret(env="S", environ={})
    frame = pd.DataFrame({"a": [1.0, 2.0], "label": [0, 1]})
    frame.to_parquet(tmp_path / "d.parquet")
    frame.to_csv(tmp_path / "d.csv", index=False)
    for name in ("d.parquet", "d.csv"):
        pd.testing.assert_frame_equal(read_evaluation_data(str(tmp_path / name), "label"),
                                      frame)
    with pytest.raises(ValueError, match="no label column 'y'"):
        read_evaluation_data(str(tmp_path / "d.csv"), "y")


def test_cli_refuses_to_start_without_a_secret(tmp_path, capsys, monkeypatch):
    from mlcal.cli import main

    pd.DataFrame({"a": [1.0], "y": [1]}).to_csv(tmp_path / "d.csv", index=False)
    monkeypatch.delenv("MLCAL_WEBHOOK_SECRET", raising=False)
    code = main(["gate-server", "--model", MODEL, "--data", str(tmp_path / "d.csv"),
                 "--max-ece", "0.05", "--port", "0"])
    assert code == 2
    assert "MLCAL_WEBHOOK_SECRET) is unset or empty" in capsys.readouterr().err


# ------------------------------------------------------------------ a real MLflow server fires
def _wait_for(predicate, timeout: float, what: str, diagnostics=lambda: ""):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}\n{diagnostics()}")


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    """A real `mlflow server` with webhooks allowed to 127.0.0.1 over http, and `mlcal
    gate-server` in a subprocess that registers its webhook there."""
    from cryptography.fernet import Fernet
    from sklearn.dummy import DummyClassifier
    from sklearn.naive_bayes import GaussianNB

    from mlcal import CalibratedModel, Platt
    from mlcal.datasets import make_circular
    from support.serving import free_port
    from support.tracking_server import TrackingServer

    root = tmp_path_factory.mktemp("gate-server-live")
    quiet = {"MLFLOW_DISABLE_TELEMETRY": "true"}
    tracking = TrackingServer(root, env={
        **quiet,
        # MLflow delivers only to https URLs of public addresses unless told otherwise
        "MLFLOW_WEBHOOK_ALLOWED_SCHEMES": "http,https",
        "MLFLOW_WEBHOOK_ALLOW_PRIVATE_IPS": "true",
        # webhook secrets are stored encrypted; one key for the server's lifetime
        "MLFLOW_WEBHOOK_SECRET_ENCRYPTION_KEY": Fernet.generate_key().decode(),
        # no background job runner (GenAI scorers, trace archival): not needed, costs CPU
        "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false",
    }).launch()
    X, y = make_circular(2400, seed=5)
    order = np.random.default_rng(1).permutation(len(y))
    X, y = X[order], y[order]
    frame = pd.DataFrame(np.column_stack([X, (X ** 2).sum(1)]), columns=["x1", "x2", "r2"])
    tr, cal, te = slice(0, 1000), slice(1000, 2000), slice(2000, 2400)
    holdout = frame[te].assign(y=y[te])
    holdout.to_parquet(root / "eval.parquet")
    log_path = root / "gate-server.log"
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}
    env.update(quiet, MLFLOW_TRACKING_URI=tracking.url, MLCAL_WEBHOOK_SECRET=SECRET,
               PYTHONPATH=os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]))
    # --no-report: the gates' decisions, tags and history are what this test reads; the HTML
    # gate report (logged after the decision is recorded) is checked in test_gate_mcb_report.py
    # launched while the tracking server starts (its webhook registration comes after its
    # imports, and MLflow's client retries a refused connection)
    out_path = root / "gate-server.out"
    with open(out_path, "wb") as out:
        receiver = subprocess.Popen(
            [sys.executable, "-m", "mlcal", "gate-server", "--model", MODEL,
             "--data", str(root / "eval.parquet"), "--max-ece", "0.05", "--port", str(port),
             "--log-file", str(log_path), "--register-webhook", "--no-report"],
            stdout=out, stderr=subprocess.STDOUT, env=env, cwd=root)
    base = GaussianNB().fit(frame[tr], y[tr])
    models = {"good": CalibratedModel(base, Platt()).fit(frame[cal], y[cal]),
              "constant": CalibratedModel(DummyClassifier(strategy="prior").fit(
                  frame[tr], y[tr]), "isotonic").fit(frame[cal], y[cal])}

    def diagnostics():
        text = log_path.read_text() if log_path.exists() else "(no log)"
        return (f"receiver log:\n{text[-4000:]}\nreceiver output:\n"
                f"{out_path.read_text(errors='replace')[-3000:]}\n"
                f"mlflow server:\n{tracking.log_tail()}")

    previous = mlflow.get_tracking_uri()
    try:
        tracking.wait_ready()
        _wait_for(lambda: log_path.exists() and _lines(log_path, "start")
                  and _lines(log_path, "webhook") or receiver.poll() is not None, 180,
                  "gate-server to start", diagnostics)
        assert receiver.poll() is None, diagnostics()
        mlflow.set_tracking_uri(tracking.url)
        mlflow.set_experiment("webhooks")
        yield {"tracking": tracking, "receiver": receiver, "log": log_path, "models": models,
               "holdout": holdout, "diagnostics": diagnostics}
    finally:
        mlflow.set_tracking_uri(previous)
        mlflow.tracking.fluent._active_experiment_id = None
        if receiver.poll() is None:
            os.kill(receiver.pid, signal.SIGTERM)
            try:
                receiver.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.kill(receiver.pid, signal.SIGKILL)
                receiver.wait(timeout=10)
        tracking.stop()


def _register(model, holdout) -> str:
    import mlcal.mlflow as mlcal_mlflow

    with mlflow.start_run():
        info = mlcal_mlflow.log_model(model, name="model", registered_model_name=MODEL,
                                      input_example=holdout.iloc[:2, :3],
                                      pip_requirements=["scikit-learn"], bundle_mlcal=False)
    return str(info.registered_model_version)


@pytest.mark.integration
def test_mlflow_fires_the_webhook_and_the_gate_moves_the_alias(live):
    client = mlflow.MlflowClient()
    log, diag = live["log"], live["diagnostics"]
    hook = next(w for w in client.list_webhooks() if w.name == "mlcal-gate")
    # MLflow's own test delivery (an example payload of another model): signed, acknowledged
    result = client.test_webhook(hook.webhook_id)
    assert result.success and result.response_status == 200, result

    def gates(n):
        return lambda: len(_lines(log, "gate")) >= n and _lines(log, "gate")

    v_good = _register(live["models"]["good"], live["holdout"])
    good = _wait_for(gates(1), 120, "the gate of the good version", diag)[0]
    assert (good["version"], good["outcome"]) == (v_good, "promoted"), diag()
    assert client.get_registered_model(MODEL).aliases == {"champion": v_good}

    v_const = _register(live["models"]["constant"], live["holdout"])
    const = _wait_for(gates(2), 120, "the gate of the constant version", diag)[1]
    assert (const["version"], const["outcome"]) == (v_const, "refused"), diag()
    assert {"log_loss_vs_constant", "brier_vs_constant"} <= set(const["failed_criteria"])
    assert client.get_registered_model(MODEL).aliases == {"champion": v_good}
    # the decisions are in the registry's gate history, as `mlcal promote` records them
    from mlcal.mlflow.gate import gate_history

    assert [(h["version"], h["result"]) for h in gate_history(MODEL)] == \
        [(v_good, "promoted"), (v_const, "refused")]
    requests = _lines(log, "request")
    assert [(r["status"], r["outcome"], r.get("version")) for r in requests] == \
        [(200, "ignored", None), (202, "accepted", v_good), (202, "accepted", v_const)]
    assert len({r["delivery_id"] for r in requests}) == 3
