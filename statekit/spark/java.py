"""Find a Java runtime for Spark before starting it, so a missing Java is one clear sentence."""

from __future__ import annotations

import os
import re
import shutil
import subprocess

from .errors import JavaNotFoundError

MIN_JAVA = 17


def find_java() -> str:
    """Path of the ``java`` Spark will use (``$JAVA_HOME/bin/java``, else ``java`` on PATH), version checked."""
    home = os.environ.get("JAVA_HOME")
    if home:
        java = os.path.join(home, "bin", "java")
        if not os.access(java, os.X_OK):
            raise JavaNotFoundError(f"Spark needs Java {MIN_JAVA}+: JAVA_HOME={home} has no executable bin/java")
    else:
        java = shutil.which("java")
        if java is None:
            raise JavaNotFoundError(f"Spark needs Java {MIN_JAVA}+: no 'java' on PATH and JAVA_HOME is not set; "
                                    f"install a JDK {MIN_JAVA}+ (e.g. apt-get install openjdk-17-jre-headless)")
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as e:
        raise JavaNotFoundError(f"Spark needs Java {MIN_JAVA}+: cannot run {java}: {e}") from None
    m = re.search(r'version "(\d+)(?:\.(\d+))?', out.stderr + out.stdout)
    if m is None:
        raise JavaNotFoundError(f"Spark needs Java {MIN_JAVA}+: cannot read the version of {java}")
    major = int(m.group(2)) if m.group(1) == "1" else int(m.group(1))
    if major < MIN_JAVA:
        raise JavaNotFoundError(f"Spark needs Java {MIN_JAVA}+, {java} is Java {major}")
    return java
