"""Run every benchmark with its default sizes."""

from bench import reference_matcher

reference_matcher.main([])
