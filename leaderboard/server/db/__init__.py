"""The leaderboard's database: models (:mod:`.models`) and engines, sessions and schema
upgrades (:mod:`.session`)."""
