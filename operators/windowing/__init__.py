"""Flink's windowing: assigners, triggers, evictors, merging window sets and the trigger and process
contexts, and the window operators over them (record by record, evicting, columnar on an engine) with
``WindowOperator(...)``, which makes the one that fits."""
