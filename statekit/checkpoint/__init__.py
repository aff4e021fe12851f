"""Checkpoints of keyed state: incremental snapshots per epoch, atomic commit, retention, rescaling.

Layout at a checkpoint location (a path or any ``pyarrow.fs`` URI: ``file://``, ``s3://``, ``hdfs://``)::

    <root>/<operator>/kg=<first>-<last>/                  one partition = a key-group range (inclusive)
        epoch=<e>/manifest.json                           committed last, atomically: lists every file
                                                          the snapshot needs, with size and sha256
        epoch=<e>/<attempt>-<name>                        private files written by attempt <attempt>
                                                          (heap full/delta changelog, RocksDB MANIFEST/
                                                          OPTIONS/CURRENT, logical snapshots)
        shared/<sha256>.sst                               content-addressed files shared by epochs
                                                          (RocksDB SST files, uploaded once)
        _tmp/<attempt>-...                                uploads and manifests before their rename

A snapshot unit is (operator, epoch, partition). A manifest may reference files of earlier epochs
of its partition (a heap changelog chain, shared SST files); retention keeps the newest K epochs per
partition and deletes only files that no retained manifest references. Rescaling restores a new
key-group range from the manifests of one epoch that together cover it, through the backend-neutral
logical snapshot; a native restore is used when backend and range match.

Per epoch, the Spark integration calls::

    store = CheckpointStore(uri, retain=3, retry=RetryPolicy(attempts=5, backoff_ms=200))
    r = store.restore(operator_id, config, key_groups, epoch=last_committed_epoch, backend=kept_backend)
    ...process the epoch with r.backend...
    store.commit(operator_id, epoch, r.backend, metadata={"watermark": wm, ...})
"""

from ..payload import decode, encode
from .errors import CheckpointError, CheckpointUnavailableError, CorruptCheckpointError, NoCheckpointError
from .inspect import (CheckpointInfo, EpochInfo, OperatorInfo, PartitionInfo, format_report, inspect_checkpoint,
                      main_inspect, read_state)
from ..snapshots import LOGICAL, NATIVE
from .lease import CheckpointLease, LeaseHeldError, LeaseLostError, LeaseRecord, fence
from .job import JOB_PATH, JobChangeError, JobRecord, compare as compare_jobs
from .manifest import FileEntry, Manifest, manifest_path, partition_dir, partition_name
from .policy import CheckpointPolicy
from .storage import ExclusiveCreateUnsupported, RetryPolicy, Storage, StoredFile, pyarrow_uri
from .store import CheckpointBase, CheckpointStore, Committed, Restored
from .transfer import CheckpointSnapshotReader, CheckpointSnapshotWriter

__all__ = [
    "CheckpointBase", "CheckpointError", "CheckpointInfo", "CheckpointLease", "CheckpointPolicy", "CheckpointStore",
    "CheckpointUnavailableError", "JOB_PATH", "JobChangeError", "JobRecord", "LeaseHeldError", "LeaseLostError", "LeaseRecord", "compare_jobs", "fence", "Committed", "CorruptCheckpointError", "EpochInfo", "ExclusiveCreateUnsupported", "FileEntry", "LOGICAL",
    "Manifest", "NATIVE", "NoCheckpointError", "OperatorInfo", "PartitionInfo", "Restored", "RetryPolicy",
    "CheckpointSnapshotReader", "CheckpointSnapshotWriter", "Storage", "StoredFile", "decode", "encode", "format_report", "pyarrow_uri",
    "inspect_checkpoint", "main_inspect", "manifest_path", "partition_dir", "partition_name", "read_state",
]
