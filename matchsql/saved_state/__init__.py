"""Matcher state written to disk or sent to another process, never unpickled."""
