"""The board's HTML pages: the routes (``pages``), the images they show (``images``: plots and
frames) and the episode replays (``replays``), with their ``templates/`` and ``static/`` files."""
