"""Table-driven unit tests of the pure core."""
