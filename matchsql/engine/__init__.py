"""Row pattern matching: pattern AST -> automaton program -> matchers.

Contract shared by every matcher (reference, compiled, GPU):

* ``matcher = new_partition_matcher(spec, partition_key)`` creates the run of
  one partition; ``partition_key`` is the tuple of the partition columns'
  values (``()`` without PARTITION BY).
* ``matcher.feed(batch)`` takes the next rows of that partition, in ORDER BY
  order, as a ``pyarrow.RecordBatch`` with ``spec.columns``' schema, and
  returns the output batches (``spec.output_schema()``) of every match that
  became final; it keeps whatever state later rows need.
* ``matcher.finish()`` marks the end of the partition and returns the rest.

Feeding a partition in any split into batches gives exactly the output of
feeding it as one batch.
"""
