"""Columnar window engines: event-time windows of an incremental function run an epoch at a time (a cell
per key: the session and aligned-window engines; one table of all keys: the session table), with their
stored layouts (packed cells, session pages, key slots)."""
