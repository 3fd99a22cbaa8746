"""A person plays one agent of an episode (or several people several agents) beside AI
partners, on a page served on 127.0.0.1: ``python -m benchmark.play`` (``make play``).

:mod:`~benchmark.play.session` holds the episode and its seats, :mod:`~benchmark.play.choices`
the valid actions and messages of a decision, :mod:`~benchmark.play.view` the map and checklist
a seat sees, :mod:`~benchmark.play.app` the pages.
"""
