"""The board's server: the FastAPI app (``app``, ``serve``), its JSON routes (``api/``) and pages
(``web/``), the services the routes and the worker call (``services/``: accepting an upload,
verifying a submission, issuing a challenge), the verification worker loop (``worker``), the
database (``db/``, ``migrations/``, ``crud``), tokens (``auth``), the board as data (``board``),
pictures (``render``), the export archive (``export``) and its settings (``settings``)."""
