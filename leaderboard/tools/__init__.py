"""Tools around the board: team and token administration (``admin``), a local board seeded with
the reference bundles (``seed``), the paper's bundles committed from a reproduction
(``paper``), and the load and hostile-upload benchmarks (``bench``, ``attacks``)."""
