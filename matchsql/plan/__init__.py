"""What one MATCH_RECOGNIZE means once analysed: the pattern IR, the MatchSpec and the
bound DEFINE/MEASURES expressions that every execution path consumes.

This package sits below the grammar (which produces it) and below every execution
path (which consume it), so it imports neither.
"""
