# A small image that serves a calibrated mlcal model with `mlflow models serve`.
#
#   docker build -t mlcal .
#   docker run -p 8080:8080 -v "$PWD/my-model:/model:ro" mlcal                 # a model directory
#   docker run -p 8080:8080 -e MLFLOW_TRACKING_URI=http://tracking:5000 \
#              mlcal 'models:/calibrated@champion'                               # a registry URI
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    MPLBACKEND=Agg \
    NUMBA_CACHE_DIR=/opt/mlcal/numba-cache \
    MLCAL_BUILD_KERNEL_CACHE=0 \
    HOST=0.0.0.0 \
    PORT=8080

WORKDIR /opt/mlcal
COPY pyproject.toml README.md ./
COPY build_support ./build_support
COPY mlcal ./mlcal
COPY plugins ./plugins
COPY docker/serve.sh /usr/local/bin/mlcal-serve

# the same install command the test suite runs in a fresh virtual environment
RUN pip install ".[mlflow]" ./plugins/mlcal-mlflow-evaluator \
 && useradd --create-home --uid 10001 mlcal \
 && mkdir -p "$NUMBA_CACHE_DIR" && chown mlcal "$NUMBA_CACHE_DIR"

USER mlcal
# compile every numba kernel now, as the user that runs the image: numba only uses a cache
# directory it can write to (hence no kernel cache in the wheel, which would land in root's
# site-packages: MLCAL_BUILD_KERNEL_CACHE=0), and a first fit in the container then loads
# machine code instead of compiling for seconds (the cache is keyed to this CPU model; another
# CPU recompiles)
RUN mlcal warmup
WORKDIR /home/mlcal
EXPOSE 8080
HEALTHCHECK --interval=30s --timeout=5s --start-period=90s --retries=3 \
  CMD python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8080/ping', timeout=4)"
ENTRYPOINT ["mlcal-serve"]
