"""The analyses' defaults, in a module that imports nothing, so the command line can show
them in its help without loading numpy or scipy."""

ALPHA = 0.05
"""False discovery rate (explain, investigate) and significance (compare, canary)."""

TOP_VALUES = 50
"""Values tested per field by explain: the most common overall."""

BOUNDARIES = ("pocock", "obrien-fleming", "bonferroni")
"""How canary spends alpha over its looks (docs/compare.md)."""
