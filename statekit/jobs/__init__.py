"""Jobs built on the Spark integration: ``sessionize`` (session windows per key over files)."""

from .aggregates import Agg, RowAggregate, parse_aggs
from .sample import write_clickstream
from .sessionize import FORMATS, SessionOperatorFactory, read_input, result_schema, sessionize

__all__ = ["Agg", "FORMATS", "RowAggregate", "SessionOperatorFactory", "parse_aggs", "read_input", "result_schema",
           "sessionize", "write_clickstream"]
