"""scan algorithms (to be written)."""
