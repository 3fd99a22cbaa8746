"""The paper's tables, regenerated from pinned seeds and checked against the committed ones.

``python -m benchmark.reproduce table=<name>|all`` (:mod:`benchmark.reproduce.__main__`). A table
is a YAML file under ``configs/paper/`` (:mod:`~benchmark.reproduce.spec`); its runs are
``benchmark.run`` invocations (:mod:`~benchmark.reproduce.sources`), its records are built by
:mod:`~benchmark.reproduce.build`, written by :mod:`~benchmark.reproduce.render` and compared
with the committed reference by :mod:`~benchmark.reproduce.check`.
"""
