"""One module per command group; each exposes `commands`, a list of click commands."""
