"""Analyses over the query layer, one per module: ``explain`` (selection vs baseline) and
``investigate`` (finds the anomalous region, then explains it) so far; each returns a result with findings (most explanatory first) and warnings, rendered
as text, JSON or HTML by the callers. ``stats`` holds the statistics they share."""
