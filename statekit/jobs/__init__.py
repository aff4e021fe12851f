"""Jobs built on the Spark integration: ``sessionize`` (session windows per key over files)."""

from .aggregates import Agg, RowAggregate, parse_aggs
from .sample import write_clickstream
from .sessionize import (DEFAULT_STATE_LAYOUT, SessionOperatorFactory, SessionRows,
                         recorded_sessions, sessionize)

__all__ = ["Agg", "DEFAULT_STATE_LAYOUT", "RowAggregate", "SessionOperatorFactory", "SessionRows", "parse_aggs", "recorded_sessions",
           "sessionize",
           "write_clickstream"]
