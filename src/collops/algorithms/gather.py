"""gather algorithms (to be written)."""
