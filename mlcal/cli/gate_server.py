"""``mlcal gate-server``: receive MLflow ``model_version.created`` webhooks and run the
promotion gate (the policy options of ``mlcal promote``) on each new version of the given
models (:mod:`mlcal.mlflow.webhook_server`).

The HMAC secret is read from an environment variable (``--secret-env``, default
``MLCAL_WEBHOOK_SECRET``) or a file (``--secret-file``), never from the command line, where
other users could read it in the process list. Runs until interrupted (Ctrl-C or SIGTERM); exit
code 2 on a start-up error.
"""

from __future__ import annotations

import signal

from mlcal.cli.promote import add_policy_arguments, policy_kwargs

DEFAULT_SECRET_ENV = "MLCAL_WEBHOOK_SECRET"


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def run(args) -> int:
    from mlcal.mlflow import webhook_server as ws  # first: names the missing extra
    import mlflow

    if args.max_ece is None:
        raise ValueError("--max-ece is required")
    if args.tracking_uri:
        mlflow.set_tracking_uri(args.tracking_uri)
    secret = ws.read_secret(env=None if args.secret_file else args.secret_env,
                            file=args.secret_file)
    data = ws.read_evaluation_data(args.data, args.label_column)
    run_gate = ws.gate_runner(alias=args.alias, data=data, label_column=args.label_column,
                              **policy_kwargs(args))
    log = ws.EventLog(path=args.log_file) if args.log_file else ws.EventLog()
    server = ws.GateServer(secret, args.models, run_gate, host=args.host, port=args.port,
                           path=args.path, max_age=args.max_age, max_body=args.max_body,
                           queue_size=args.queue_size, log=log)
    if args.register_webhook:
        hook = ws.register_webhook(args.public_url or server.url, secret,
                                   name=args.webhook_name)
        log.write("webhook", name=hook.name, webhook_id=hook.webhook_id, url=hook.url)
    signal.signal(signal.SIGTERM, _interrupt)
    server.serve_forever()
    return 0


def register(sub) -> None:
    p = sub.add_parser(
        "gate-server", help="gate new model versions on MLflow registry webhooks",
        description="Serve an HTTP endpoint for MLflow's model_version.created webhook: "
                    "verify each delivery's HMAC signature and timestamp, refuse replays, and "
                    "run the promotion gate (the options of `mlcal promote`) on every new "
                    "version of the --model names against --data. Every request and gate "
                    "outcome is logged as one JSON line. See docs/webhooks.md.")
    p.add_argument("--model", dest="models", action="append", required=True, metavar="NAME",
                   help="registered model whose new versions are gated (repeatable)")
    p.add_argument("--data", required=True,
                   help="evaluation rows, .csv or .parquet (features + label), read once at "
                        "start-up")
    add_policy_arguments(p)
    p.add_argument("--host", default="127.0.0.1", help="interface to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8787, help="port (default 8787)")
    p.add_argument("--path", default="/mlflow-webhook",
                   help="the POST endpoint (default /mlflow-webhook)")
    secret = p.add_mutually_exclusive_group()
    secret.add_argument("--secret-env", default=DEFAULT_SECRET_ENV, metavar="VAR",
                        help=f"environment variable holding the webhook secret (default "
                             f"{DEFAULT_SECRET_ENV})")
    secret.add_argument("--secret-file", default=None, metavar="PATH",
                        help="read the webhook secret from this file instead")
    p.add_argument("--max-age", type=float, default=300.0,
                   help="accepted clock difference of a delivery's timestamp, seconds "
                        "(default 300)")
    p.add_argument("--max-body", type=int, default=256 * 1024,
                   help="largest accepted request body, bytes (default 262144)")
    p.add_argument("--queue-size", type=int, default=16,
                   help="versions that may wait for the gate per model (default 16)")
    p.add_argument("--log-file", default=None,
                   help="append the JSON-lines log here (default: stderr)")
    p.add_argument("--register-webhook", action="store_true",
                   help="at start-up create (or update) the MLflow webhook --webhook-name to "
                        "send model_version.created to --public-url with the secret")
    p.add_argument("--public-url", default=None,
                   help="the URL MLflow calls (default: this server's http://HOST:PORT/PATH)")
    p.add_argument("--webhook-name", default="mlcal-gate",
                   help="name of the webhook --register-webhook manages (default mlcal-gate)")
    p.set_defaults(handler=run)
