"""The Hydra runner: configs, jobs run inline or on Ray, results, loggers and summaries."""
