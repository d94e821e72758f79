"""reduce algorithms (to be written)."""
