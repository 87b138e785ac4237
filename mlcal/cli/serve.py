"""``mlcal serve``: serve an MLflow model with ``mlflow models serve``, set up to work as
printed (see :mod:`mlcal.mlflow.serving`)."""

from __future__ import annotations

from mlcal.mlflow.serving import ENV_MANAGERS


def run(args) -> int:
    from mlcal.mlflow.serving import serve

    return serve(args.model_uri, host=args.host, port=args.port, env_manager=args.env_manager,
                 workers=args.workers, out=lambda line: print(line, flush=True))


def register(sub) -> None:
    p = sub.add_parser("serve", help="serve a model with `mlflow models serve` and print a "
                                     "ready-to-run request",
                       description="Run `mlflow models serve` with this Python environment "
                                   "(its bin directory on PATH, so MLflow finds uvicorn even in "
                                   "a virtual environment that is not activated). Prints the "
                                   "model's input columns and a curl request built from its "
                                   "saved input example (or its signature), then serves until "
                                   "interrupted; the exit code is the server's.")
    p.add_argument("model_uri", metavar="MODEL_URI",
                   help="a model directory, runs:/RUN_ID/NAME, models:/NAME/VERSION, ...")
    p.add_argument("--host", default="127.0.0.1",
                   help="interface to bind (default 127.0.0.1; 0.0.0.0 exposes it)")
    p.add_argument("--port", type=int, default=5000, help="port (default 5000)")
    p.add_argument("--env-manager", choices=ENV_MANAGERS, default="local",
                   help="local (default): serve from this environment; virtualenv, uv or "
                        "conda rebuild the model's logged environment first")
    p.add_argument("--workers", type=int, default=1, help="server workers (default 1)")
    p.set_defaults(handler=run)
