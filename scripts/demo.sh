#!/usr/bin/env bash
# The main job on the embedded default: ingest the bundled sample, query it, draw a heatmap.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
export ROOTSIFT_DATA=${ROOTSIFT_DATA:-$(mktemp -d)/rootsift}
rs=.venv/bin/rootsift
$rs ingest samples/requests.jsonl.gz --dataset api
$rs datasets
$rs schema api
$rs query api --where 'status >= 500' --breakdown endpoint --calc count --calc 'p99(duration_ms)' --limit 10
$rs query api --calc count --calc 'p50(duration_ms)' --calc 'p99(duration_ms)' --granularity 1m --limit 10
$rs query api --calc 'heatmap(duration_ms)'
echo "data is in $ROOTSIFT_DATA"
