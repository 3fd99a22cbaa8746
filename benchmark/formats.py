"""Versions of the files the benchmark writes, which readers check before trusting them."""

# Episode traces (benchmark.env.trace). 2: checklist atoms are records, skills carry the reason
# of their failure, and the final outcome holds no credit total (benchmark.metrics.episode is
# the one definition of credit).
TRACE_FORMAT = 2
