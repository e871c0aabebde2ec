#!/usr/bin/env bash
# Starts S3Proxy for docker-compose.yaml from its environment, with the settings the local
# stack gives it (devtools/kafka_runbooks_dev/localstack/s3proxy.py): AWS signatures v2 or
# v4 for one identity, the filesystem back end (objects are files under S3PROXY_DATA).
#
# S3PROXY_BUCKET is created before the server starts: to the filesystem back end a bucket
# is a top-level folder, so making the folder is making the bucket, and the bucket exists
# by the time the health check passes (no one-shot client has to race the server).
# `s3proxy.sh --render` prints the configuration only (tests/unit/test_docker_compose.py
# checks it against the Airflow side's settings).
set -euo pipefail

: "${S3PROXY_PORT:?set S3PROXY_PORT}"
: "${S3PROXY_IDENTITY:?set S3PROXY_IDENTITY (the access key id clients sign with)}"
: "${S3PROXY_CREDENTIAL:?set S3PROXY_CREDENTIAL (the secret access key)}"
: "${S3PROXY_DATA:?set S3PROXY_DATA (the folder objects are kept in)}"
: "${S3PROXY_BUCKET:?set S3PROXY_BUCKET}"

render() {
  printf '%s\n' \
    "s3proxy.endpoint=http://0.0.0.0:${S3PROXY_PORT}" \
    "s3proxy.authorization=aws-v2-or-v4" \
    "s3proxy.identity=${S3PROXY_IDENTITY}" \
    "s3proxy.credential=${S3PROXY_CREDENTIAL}" \
    "jclouds.provider=filesystem" \
    "jclouds.filesystem.basedir=${S3PROXY_DATA}"
}

if [[ "${1:-}" == "--render" ]]; then
  render
  exit 0
fi

config=$(mktemp /tmp/s3proxy.XXXXXX.conf)
render > "$config"
mkdir -p "${S3PROXY_DATA}/${S3PROXY_BUCKET}"
exec java ${S3PROXY_JAVA_OPTS:--Xmx256m} -jar "${S3PROXY_JAR:-/opt/s3proxy/s3proxy.jar}" --properties "$config"
