"""Run statekit operators inside Spark executors: per-epoch processing with exactly-once results.

The only package that imports pyspark (lazily, inside functions). ``run_keyed`` takes a Spark
DataFrame (streaming or batch) and an operator factory; operators know nothing of Spark.
See ``api`` for the per-epoch protocol, and docs/spark.md.
"""

from .api import FAULT_ENV, RunSummary, resolve_config, run_keyed
from .epochs import EpochLog, EpochRecord
from .errors import InjectedFault, InputError, JavaNotFoundError, StopRequested
from .java import find_java
from .kafka import KafkaInput, kafka_conf, read_topic
from .kafka_sink import KafkaSink
from .plan import LATE_TAG, Fault
from .runtime import warm_up_workers
from .session import DEFAULT_MASTER, spark_session
from .output_dir import METRICS_FILE, OutputDir
from .sinks import DeltaSink, EpochSink, FunctionSink
from .read_state import read_state_df
from .state_transform import read_states, write_checkpoint

__all__ = ["DEFAULT_MASTER", "EpochLog", "EpochRecord", "FAULT_ENV", "Fault", "InjectedFault", "InputError",
           "DeltaSink", "EpochSink", "FunctionSink", "JavaNotFoundError", "KafkaInput", "KafkaSink", "LATE_TAG", "METRICS_FILE", "OutputDir", "RunSummary", "StopRequested", "find_java",
           "kafka_conf", "read_state_df", "read_states", "read_topic", "resolve_config", "run_keyed", "spark_session", "warm_up_workers", "write_checkpoint"]
