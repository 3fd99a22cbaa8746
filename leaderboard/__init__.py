"""The leaderboard: submission bundles of one track of a run, verified by replaying every episode
against the benchmark's own registry (tracks, bundle, pack, verify), and the server that ranks
them."""
