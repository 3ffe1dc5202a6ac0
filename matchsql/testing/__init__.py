"""What the tests check the engine against, kept apart from the engine itself.

The oracle is a second, deliberately naive implementation of row pattern
matching (every way to map a partition's rows to the pattern, then SQL:2016's
preference): it shares no code with the matchers it judges, so a bug in one
is not repeated in the other. Nothing in the engine imports this package.
"""
