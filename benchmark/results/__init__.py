"""Results: the suite and its episodes, run directories, the references join, aggregation
by each metric's declared interval, and challenges. Imported by the runner, the paper tables and
the leaderboard alike (the leaderboard never imports ``benchmark.runner``)."""
