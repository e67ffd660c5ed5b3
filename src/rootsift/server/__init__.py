"""``rootsift serve``: live ingest over HTTP (OTLP, Honeycomb's events API) into the
store through a write-ahead log, and the read API (docs/server.md).

    body.py           request bodies within limits, gzip inflated under a cap
    wal.py            the fsync'd, group-committed write-ahead log
    applier.py        the log moved into the store, one checked ingest per dataset
    otlp.py           OTLP traces and logs into events; otlp_metrics.py metric points
    ingest_routes.py  /v1/traces|logs|metrics, /1/events, /1/batch
    api_routes.py     /api/datasets, /api/schema, /api/query
    app.py            the Starlette application and its lifespan
    run.py            uvicorn on the API and OTLP ports, signals
"""
