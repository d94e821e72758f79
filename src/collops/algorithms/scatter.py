"""scatter algorithms (to be written)."""
