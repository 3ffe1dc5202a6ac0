"""matchsql inside other systems."""
