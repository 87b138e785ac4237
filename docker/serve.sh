#!/bin/sh
# Serve a calibrated mlcal model with MLflow's scoring server.
#   mlcal-serve [MODEL_URI]     (default: $MODEL_URI, else the directory mounted at /model)
# MODEL_URI may be a local model directory, runs:/<run_id>/<name>, models:/<name>@<alias>, ...
# (registry URIs also need MLFLOW_TRACKING_URI). HOST and PORT default to 0.0.0.0 and 8080.
set -eu
uri="${1:-${MODEL_URI:-/model}}"
if [ "${uri#*:/}" = "$uri" ] && [ ! -f "$uri/MLmodel" ]; then
  echo "mlcal-serve: no MLflow model at '$uri' (expected $uri/MLmodel); mount a model directory" \
       "at /model or pass a model URI" >&2
  exit 2
fi
exec mlflow models serve -m "$uri" --env-manager local --host "${HOST:-0.0.0.0}" --port "${PORT:-8080}"
