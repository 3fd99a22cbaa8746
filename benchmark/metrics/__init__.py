"""Metrics: every metric's declaration (``specs``), the per-episode and per-run metrics of a
trace (``episode``), LLaMAR's MAP-THOR metrics (``llamar``) and the statistics (``stats``)."""
