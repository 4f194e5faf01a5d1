#!/usr/bin/env bash
# Drive a running scaler with the real grpcurl binary: list and describe by reflection, check
# health, and call all four RPCs. Usage: smoke.sh HOST:PORT REDIS_URL QUEUE
# The queue should hold at least one job, so IsActive answers true.
set -euo pipefail
addr=$1 redis_url=$2 queue=$3
grpcurl=${GRPCURL:-grpcurl}
fail() { echo "smoke: $*" >&2; exit 1; }
expect() {  # what output
  grep -q -- "$1" <<<"$2" || fail "expected '$1' in: $2"
}

services=$("$grpcurl" -plaintext "$addr" list)
for service in externalscaler.ExternalScaler grpc.health.v1.Health grpc.reflection.v1alpha.ServerReflection; do
  expect "$service" "$services"
done
described=$("$grpcurl" -plaintext "$addr" describe externalscaler.ExternalScaler)
for rpc in IsActive StreamIsActive GetMetricSpec GetMetrics; do expect "rpc $rpc" "$described"; done
expect "double metricValueFloat = 3" "$("$grpcurl" -plaintext "$addr" describe externalscaler.MetricValue)"

expect '"status": "SERVING"' "$("$grpcurl" -plaintext -d '{"service": ""}' "$addr" grpc.health.v1.Health/Check)"

ref="{\"name\": \"smoke\", \"namespace\": \"default\", \"scalerMetadata\": {\"scalerAddress\": \"$addr\", \"url\": \"$redis_url\", \"queue\": \"$queue\", \"format\": \"sidekiq\", \"workerThroughput\": \"1\"}}"
spec=$("$grpcurl" -plaintext -d "$ref" "$addr" externalscaler.ExternalScaler/GetMetricSpec)
expect "\"metricName\": \"queue-age-workers-$queue\"" "$spec"
expect '"targetSizeFloat": 1' "$spec"

metrics=$("$grpcurl" -plaintext -d "{\"scaledObjectRef\": $ref, \"metricName\": \"queue-age-workers-$queue\"}" "$addr" externalscaler.ExternalScaler/GetMetrics)
expect '"metricValueFloat": 1' "$metrics"

expect '"result": true' "$("$grpcurl" -plaintext -d "$ref" "$addr" externalscaler.ExternalScaler/IsActive)"

# StreamIsActive runs until the client stops it: read for two seconds
stream=$("$grpcurl" -plaintext -max-time 2 -d "$ref" "$addr" externalscaler.ExternalScaler/StreamIsActive 2>&1 || true)
expect '"result": true' "$stream"

bad=$("$grpcurl" -plaintext -d '{"scalerMetadata": {"queue": "q", "tragetAge": "1"}}' "$addr" externalscaler.ExternalScaler/IsActive 2>&1 || true)
expect "InvalidArgument" "$bad"
expect "did you mean 'targetAge'" "$bad"
echo "smoke: all checks passed"
