"""allreduce algorithms (to be written)."""
