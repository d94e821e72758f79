"""reduce_scatter algorithms (to be written)."""
