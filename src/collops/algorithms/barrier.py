"""barrier algorithms (to be written)."""
