"""The board's pure core: bundles and how they are read (``bundle``, ``archive``, ``untrusted``),
tracks (``tracks``), challenges (``challenges``), verification by replay (``verify``,
``episode_pool``) and ranking (``ranking``). No database, no web framework."""
