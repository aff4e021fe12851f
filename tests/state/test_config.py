"""StateConfig: from kwargs, dicts, the environment and Spark conf; errors that list the valid choices."""

from __future__ import annotations

import pytest

from statekit import ConfigError, StateConfig, available_backends, parse_size


def test_config_from_kwargs_and_defaults():
    cfg = StateConfig()
    assert (cfg.backend, cfg.max_parallelism, cfg.local_dir) == ("heap", 128, None)
    cfg = StateConfig(backend="heap", max_parallelism=64, local_dir="/tmp/x", options={"heap.validate_writes": False})
    assert cfg.max_parallelism == 64 and cfg.local_dir == "/tmp/x"
    assert cfg.get("heap.validate_writes") is False


def test_config_from_dict_parses_strings():
    cfg = StateConfig.from_dict({"backend": "heap", "max_parallelism": "32", "heap.validate_writes": "false"})
    assert cfg.max_parallelism == 32
    assert cfg.get("heap.validate_writes") is False
    nested = StateConfig.from_dict({"options": {"heap.validate_writes": "yes"}})
    assert nested.get("heap.validate_writes") is True
    assert StateConfig.from_dict(cfg.to_dict()) == cfg


def test_config_from_env():
    env = {"STATEKIT_BACKEND": "heap", "STATEKIT_MAX_PARALLELISM": "256", "STATEKIT_LOCAL_DIR": "/data",
           "STATEKIT_HEAP_VALIDATE_WRITES": "0", "PATH": "/bin", "OTHER_BACKEND": "nope"}
    cfg = StateConfig.from_env(env)
    assert (cfg.backend, cfg.max_parallelism, cfg.local_dir) == ("heap", 256, "/data")
    assert cfg.get("heap.validate_writes") is False
    with pytest.raises(ConfigError, match="STATEKIT_NONSENSE"):
        StateConfig.from_env({"STATEKIT_NONSENSE": "1"})


def test_config_from_env_reads_os_environ(monkeypatch):
    monkeypatch.setenv("STATEKIT_MAX_PARALLELISM", "48")
    assert StateConfig.from_env().max_parallelism == 48


SPARK_CONF = {"spark.statekit.backend": "heap", "spark.statekit.max_parallelism": "512",
              "spark.statekit.heap.validate_writes": "false", "spark.app.name": "x", "spark.executor.memory": "1g"}


def test_config_from_spark_conf_dict():
    cfg = StateConfig.from_spark_conf(SPARK_CONF)
    assert (cfg.backend, cfg.max_parallelism) == ("heap", 512)
    assert cfg.get("heap.validate_writes") is False
    assert StateConfig.from_spark_conf(list(SPARK_CONF.items())) == cfg


def test_config_from_spark_conf_object():
    from pyspark import SparkConf

    conf = SparkConf(loadDefaults=False)
    for k, v in SPARK_CONF.items():
        conf.set(k, v)
    cfg = StateConfig.from_spark_conf(conf)
    assert (cfg.backend, cfg.max_parallelism) == ("heap", 512)
    assert cfg.get("heap.validate_writes") is False


def test_config_unknown_backend_lists_valid_ones():
    with pytest.raises(ConfigError) as err:
        StateConfig(backend="leveldb")
    assert "leveldb" in str(err.value)
    for name in available_backends():
        assert name in str(err.value)
    with pytest.raises(ConfigError, match="heap"):
        StateConfig.from_spark_conf({"spark.statekit.backend": "nope"})


def test_config_unknown_option_lists_valid_ones():
    with pytest.raises(ConfigError) as err:
        StateConfig(options={"heap.validate_wirtes": True})
    assert "heap.validate_wirtes" in str(err.value) and "heap.validate_writes" in str(err.value)
    with pytest.raises(ConfigError) as err:
        StateConfig.from_dict({"nosuchbackend.x": 1})
    for name in available_backends():
        assert name in str(err.value)
    with pytest.raises(ConfigError):
        StateConfig.from_spark_conf({"spark.statekit.heap.bogus": "1"})


def test_config_bad_values():
    with pytest.raises(ConfigError, match="validate_writes"):
        StateConfig(options={"heap.validate_writes": "maybe"})
    for mp in (0, -1, 1 << 16, "many"):
        with pytest.raises(ConfigError):
            StateConfig(max_parallelism=mp)


def test_config_with_options():
    cfg = StateConfig(max_parallelism=64).with_options(max_parallelism=32, options={"heap.validate_writes": "off"})
    assert cfg.max_parallelism == 32 and cfg.get("heap.validate_writes") is False


@pytest.mark.parametrize("text,expected", [("100", 100), (100, 100), ("64m", 64 << 20), ("64MB", 64 << 20),
                                           ("1g", 1 << 30), ("512KiB", 512 << 10), (" 2 t ", 2 << 40), ("0", 0)])
def test_parse_size(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize("bad", ["", "1.5g", "12x", "-1", "g", True, None])
def test_parse_size_rejects(bad):
    with pytest.raises(ValueError):
        parse_size(bad)
