#!/usr/bin/env bash
# Installs everything the project needs on a fresh machine, idempotently:
# a venv in .venv with requirements.txt and this project (editable), and the pinned
# Kafka jars from Maven Central under .stack/lib, S3Proxy's under .stack/s3proxy-lib. Needs python3 (3.10+), Java 17, Maven.
# With --browser (what `make test` runs) also Debian's chromium and chromium-driver for
# the browser end-to-end test, through apt-get when they are missing (as root, or sudo).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
for tool in "$PY" java mvn; do
  command -v "$tool" >/dev/null || { echo "bootstrap: $tool is not on PATH" >&2; exit 1; }
done
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
stamp=.venv/.requirements.sha
want=$(cat requirements.txt pyproject.toml | sha256sum | cut -c1-16)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q -r requirements.txt
  # setuptools prints an "Editable installation" warning block for this layout (two
  # package roots): keep the output for when the install fails, show nothing otherwise.
  if ! .venv/bin/python -m pip install -q --no-deps -e . > .venv/editable-install.log 2>&1; then
    cat .venv/editable-install.log >&2
    exit 1
  fi
  echo "$want" > "$stamp"
fi
.venv/bin/python -c "from kafka_runbooks_dev.localstack.stack import ensure_jars; ensure_jars()"
# S3Proxy, the local object store (its jars and dependencies, from Maven Central like Kafka)
.venv/bin/python -c "from kafka_runbooks_dev.localstack.s3proxy import ensure_jars; ensure_jars()"

if [ "${1:-}" = "--browser" ] && ! { command -v chromium >/dev/null && command -v chromedriver >/dev/null; }; then
  SUDO=""
  if [ "$(id -u)" != 0 ]; then
    command -v sudo >/dev/null && SUDO="sudo -n" || {
      echo "bootstrap: chromium and chromium-driver are missing; install them as root:" \
        "apt-get install -y chromium chromium-driver" >&2
      exit 1
    }
  fi
  command -v apt-get >/dev/null || { echo "bootstrap: no apt-get: install chromium and chromedriver" >&2; exit 1; }
  echo "bootstrap: installing chromium and chromium-driver (apt-get) for the browser test"
  export DEBIAN_FRONTEND=noninteractive
  if ! $SUDO apt-get install -y -qq chromium chromium-driver > .venv/apt-browser.log 2>&1; then
    $SUDO apt-get update -qq >> .venv/apt-browser.log 2>&1
    $SUDO apt-get install -y -qq chromium chromium-driver >> .venv/apt-browser.log 2>&1 \
      || { cat .venv/apt-browser.log >&2; exit 1; }
  fi
fi
