#!/usr/bin/env bash
# Starts one KRaft node (broker or controller) of docker-compose.yaml from its environment:
# every KAFKA_<NAME> variable becomes the property <name>, lower case, "_" -> "."
# (KAFKA_MIN_INSYNC_REPLICAS=2 -> min.insync.replicas=2); KAFKA_OPTS, KAFKA_HEAP_OPTS and
# the other launcher variables are not properties. It formats the log dir with CLUSTER_ID
# once, then runs the broker in the foreground (PID 1: a container stop is a clean SIGTERM
# shutdown). One small script instead of the image's generic entrypoint, so that the
# properties a node runs with are exactly what tests/unit/test_docker_compose.py renders
# (`kafka-node.sh --render`) and compares with the local stack's.
set -euo pipefail

render() {
  local name value key
  while IFS='=' read -r name value; do
    case "$name" in
      KAFKA_OPTS | KAFKA_HEAP_OPTS | KAFKA_JMX_OPTS | KAFKA_LOG4J_OPTS | KAFKA_JVM_PERFORMANCE_OPTS | \
        KAFKA_GC_LOG_OPTS | KAFKA_DEBUG | KAFKA_HOME | KAFKA_VERSION) continue ;;
      KAFKA_*) ;;
      *) continue ;;
    esac
    key=${name#KAFKA_}
    key=${key,,}
    printf '%s=%s\n' "${key//_/.}" "$value"
  done < <(env | LC_ALL=C sort)
}

if [[ "${1:-}" == "--render" ]]; then
  render
  exit 0
fi

: "${CLUSTER_ID:?set CLUSTER_ID (the same on every node)}"
: "${KAFKA_LOG_DIRS:?set KAFKA_LOG_DIRS}"
home=${KAFKA_HOME:-/opt/kafka}
config=$home/config/kafka-runbooks-node.properties
render > "$config"
if [[ ! -f "$KAFKA_LOG_DIRS/meta.properties" ]]; then
  # No JMX exporter for the format tool: the node's own JVM binds the metrics port.
  KAFKA_OPTS="" "$home/bin/kafka-storage.sh" format --cluster-id "$CLUSTER_ID" --config "$config" --ignore-formatted
fi
exec "$home/bin/kafka-server-start.sh" "$config"
