"""The JSON API's routers: submissions, challenges and the board (tracks, entries, export)."""
