"""Analyses over the query layer, one per module: ``explain`` (selection vs baseline) so
far; each returns a result with findings (most explanatory first) and warnings, rendered
as text, JSON or HTML by the callers. ``stats`` holds the statistics they share."""
