"""Aggregate functions: ``RowAggregate`` over the built-in aggregates, ``VectorAggregate`` (numpy over runs of
rows), and ``PackedRecords``, which packs another AggregateFunction's flat accumulators into int64 words."""
