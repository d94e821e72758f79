"""alltoall algorithms (to be written)."""
