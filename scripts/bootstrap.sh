#!/usr/bin/env bash
# Installs everything the project needs on a fresh machine, idempotently:
# a venv in .venv with requirements.txt and this project (editable), and the pinned
# Kafka jars from Maven Central under .stack/lib. Needs python3 (3.10+), Java 17, Maven.
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
  .venv/bin/python -m pip install -q --no-deps -e .
  echo "$want" > "$stamp"
fi
.venv/bin/python -c "from kafka_runbooks.localstack.stack import ensure_jars; ensure_jars()"
