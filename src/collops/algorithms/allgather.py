"""allgather algorithms (to be written)."""
