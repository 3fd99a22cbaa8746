"""The board's server: the FastAPI app (``app``, ``serve``), its JSON routes (``api/``) and pages
(``web/``), the verification worker (``worker``), the database (``db/``, ``migrations/``,
``crud``), tokens (``auth``), the board as data (``board``), pictures (``render``), the export
archive (``export``) and its settings (``settings``)."""
