#!/usr/bin/env bash
# Installs everything the project needs on a fresh machine, idempotently:
# a venv in .venv with requirements.txt and this project (editable), and the Kafka jars of the
# stack's release (KR_KAFKA_VERSION, default the one stack/pom.xml pins) from Maven Central under
# .stack/lib-<version>, S3Proxy's under .stack/s3proxy-lib. Needs python3 (3.10+), Java 17, Maven.
# With --browser (what `make test` runs) also, through apt-get when they are missing (as
# root, or sudo): Debian's chromium and chromium-driver for the browser end-to-end test, and
# postgresql and redis-server for the CeleryExecutor test (tests/e2e/test_celery_fleet.py:
# Airflow refuses Celery on SQLite; Redis is the Celery broker), prometheus-alertmanager and
# prometheus (for promtool) for the alert intake's tests (on a machine that runs systemd, Debian's
# packages also start both services on their default ports; stop them if that is not wanted).
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
# once per release; what Maven Central does not serve of it is said each time (docs/local-stack.md)
.venv/bin/python -c "from kafka_runbooks_dev.localstack import jars
for m in jars.missing_parts(jars.ensure_jars()): print('bootstrap:', m.line())"
# S3Proxy, the local object store (its jars and dependencies, from Maven Central like Kafka)
.venv/bin/python -c "from kafka_runbooks_dev.localstack.s3proxy import ensure_jars; ensure_jars()"

# apt_install WHAT PACKAGE...: install Debian packages, as root or through sudo -n;
# the output goes to .venv/apt-WHAT.log and is shown only when the install fails
apt_install() {
  local what=$1 sudo="" logf=".venv/apt-$1.log"
  shift
  if [ "$(id -u)" != 0 ]; then
    command -v sudo >/dev/null && sudo="sudo -n" || {
      echo "bootstrap: $* missing; install them as root: apt-get install -y $*" >&2
      exit 1
    }
  fi
  command -v apt-get >/dev/null || { echo "bootstrap: no apt-get: install $*" >&2; exit 1; }
  echo "bootstrap: installing $* (apt-get) for the $what test"
  export DEBIAN_FRONTEND=noninteractive
  if ! $sudo apt-get install -y -qq "$@" > "$logf" 2>&1; then
    $sudo apt-get update -qq >> "$logf" 2>&1
    $sudo apt-get install -y -qq "$@" >> "$logf" 2>&1 || { cat "$logf" >&2; exit 1; }
  fi
}

# With --alerting (what `make demo` runs): Prometheus and Alertmanager for the demo's alerting,
# when apt-get can install them; without them the demo runs and says alerting is off.
if [ "${1:-}" = "--alerting" ]; then
  if ! { command -v prometheus-alertmanager >/dev/null && command -v prometheus >/dev/null; }; then
    ( apt_install alerting prometheus-alertmanager prometheus ) ||
      echo "bootstrap: prometheus and prometheus-alertmanager not installed: the demo runs without alerting" >&2
  fi
fi

if [ "${1:-}" = "--browser" ]; then
  if ! { command -v chromium >/dev/null && command -v chromedriver >/dev/null; }; then
    apt_install browser chromium chromium-driver
  fi
  # the Celery test runs PostgreSQL's own binaries (initdb, pg_ctl) from /usr/lib/postgresql/<ver>/bin
  if ! { compgen -G "/usr/lib/postgresql/*/bin/pg_ctl" >/dev/null && command -v redis-server >/dev/null; }; then
    apt_install celery postgresql redis-server
  fi
  # the alert intake's end-to-end test runs a real Alertmanager (tests/e2e/test_alert_intake.py);
  # promtool (Debian's prometheus) checks and unit-tests the alert rules (tests/unit/test_prometheus_rules.py)
  if ! { command -v prometheus-alertmanager >/dev/null && command -v promtool >/dev/null; }; then
    apt_install alerts prometheus-alertmanager prometheus
  fi
fi
