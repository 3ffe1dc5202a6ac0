"""The Python API, shaped after DuckDB's: ``connect`` -> ``Connection`` -> ``Result``."""
