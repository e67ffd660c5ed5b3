#!/usr/bin/env bash
# The main job on the embedded default: generate the five reference incidents, ingest
# them, list what to ask of each (and the findings of every analysis that exists), then
# look at two of them with queries.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
export ROOTSIFT_DATA=${ROOTSIFT_DATA:-$(mktemp -d)/rootsift}
rs=.venv/bin/rootsift
$rs demo
$rs datasets
# cascade: API latency over time; the stalls are the columns that reach a second
$rs query cascade_api --calc 'heatmap(duration_ms)'
# gateway: which upstream the slow requests went to
$rs query gateway_access --where 'request_time_ms > 1000' --breakdown service --breakdown az \
    --calc count --calc 'p99(request_time_ms)' --limit 10
echo "data is in $ROOTSIFT_DATA"
