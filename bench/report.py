"""Benchmark reports: figures with units, side-by-side ratios, JSON + Markdown table + PNG plot per part."""

from __future__ import annotations

import json
import os
import platform
import time
from dataclasses import asdict, dataclass, field
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

_PACKAGES = ("statekit", "rocksdict", "msgpack", "pyspark", "pyarrow", "pandas", "protobuf", "psutil")


@dataclass(slots=True)
class Figure:
    """One measured quantity for each backend and its baseline; ratios are backend / baseline."""

    name: str
    unit: str
    heap: float | None = None
    rocksdb: float | None = None
    baseline: float | None = None
    baseline_name: str = ""
    notes: str = ""

    def ratios(self) -> dict[str, float | None]:
        """Baseline over backend for rates (x slower), backend over baseline for sizes and times."""
        out: dict[str, float | None] = {}
        for b in ("heap", "rocksdb"):
            v = getattr(self, b)
            if v is None or not self.baseline:
                out[b] = None
            elif self.unit.endswith("/s"):
                out[b] = self.baseline / v if v else None
            else:
                out[b] = v / self.baseline
        return out


@dataclass(slots=True)
class Series:
    """A line plot: x/y pairs per backend (or baseline)."""

    title: str
    x_label: str
    y_label: str
    lines: dict[str, list[tuple[float, float]]]
    log_x: bool = False
    log_y: bool = False


@dataclass
class BenchReport:
    """What one bench part measured, with the parameters and machine it ran on; ``failures``: what a run got
    wrong (written with the report, then ``statekit bench`` exits non-zero)."""

    part: str
    params: dict[str, Any] = field(default_factory=dict)
    figures: list[Figure] = field(default_factory=list)
    series_list: list[Series] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    def add(self, name: str, unit: str, heap: float | None = None, rocksdb: float | None = None,
            baseline: float | None = None, baseline_name: str = "", notes: str = "") -> Figure:
        fig = Figure(name, unit, heap, rocksdb, baseline, baseline_name, notes)
        self.figures.append(fig)
        return fig

    def series(self, title: str, x_label: str, y_label: str, lines: dict[str, list[tuple[float, float]]],
               log_x: bool = False, log_y: bool = False) -> Series:
        s = Series(title, x_label, y_label, {k: [tuple(p) for p in v] for k, v in lines.items()}, log_x, log_y)
        self.series_list.append(s)
        return s

    def to_json(self) -> dict[str, Any]:
        return {
            "part": self.part,
            "machine": machine_info(),
            "params": self.params,
            "figures": [{**asdict(f), "ratio": f.ratios()} for f in self.figures],
            "series": [asdict(s) for s in self.series_list],
            "failures": self.failures,
        }

    def to_markdown(self) -> str:
        rows = ["| figure | unit | heap | rocksdb | baseline | heap ratio | rocksdb ratio | notes |",
                "|---|---|---:|---:|---:|---:|---:|---|"]
        for f in self.figures:
            r = f.ratios()
            base = f"{_fmt(f.baseline)} ({f.baseline_name})" if f.baseline is not None else ""
            rows.append(f"| {f.name} | {f.unit} | {_fmt(f.heap)} | {_fmt(f.rocksdb)} | {base} | "
                        f"{_fmt(r['heap'], 'x')} | {_fmt(r['rocksdb'], 'x')} | {f.notes} |")
        m = machine_info()
        head = (f"## {self.part}\n\nMachine: {m['cores']} cores, {m['memory_gib']} GiB, Python {m['python']}. "
                f"Ratios: baseline/backend for rates (how many times slower), backend/baseline otherwise.\n\n"
                f"Parameters: `{json.dumps(self.params, sort_keys=True)}`\n\n")
        failed = "".join(f"\n**FAILED:** {f}\n" for f in self.failures)
        return head + "\n".join(rows) + "\n" + failed

    def write(self, out_dir: str | Path) -> dict[str, Path]:
        """Write <part>.json, <part>.md and (when there are series) <part>.png into ``out_dir``."""
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        paths = {"json": out / f"{self.part}.json", "md": out / f"{self.part}.md"}
        paths["json"].write_text(json.dumps(self.to_json(), indent=2, sort_keys=True))
        md = self.to_markdown()
        if self.series_list:
            paths["png"] = out / f"{self.part}.png"
            self._plot(paths["png"])
            md += f"\n![{self.part}]({self.part}.png)\n"
        paths["md"].write_text(md)
        return paths

    def _plot(self, path: Path) -> None:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        n = len(self.series_list)
        fig, axes = plt.subplots(1, n, figsize=(5.5 * n, 4), squeeze=False)
        for ax, s in zip(axes[0], self.series_list):
            for label, pts in s.lines.items():
                if pts:
                    xs, ys = zip(*sorted(pts))
                    ax.plot(xs, ys, marker="o", label=label)
            ax.set_title(s.title)
            ax.set_xlabel(s.x_label)
            ax.set_ylabel(s.y_label)
            if s.log_x:
                ax.set_xscale("log")
            if s.log_y:
                ax.set_yscale("log")
            ax.grid(True, alpha=0.3)
            ax.legend()
        fig.tight_layout()
        fig.savefig(path, dpi=110)
        plt.close(fig)


def _fmt(v: float | None, suffix: str = "") -> str:
    if v is None:
        return ""
    if abs(v) >= 1000:
        return f"{v:,.0f}{suffix}"
    return f"{v:.3g}{suffix}"


def machine_info() -> dict[str, Any]:
    """Cores, memory, Python and package versions of this run."""
    import psutil

    versions = {}
    for p in _PACKAGES:
        try:
            versions[p] = version(p)
        except PackageNotFoundError:
            versions[p] = None
    return {"cores": os.cpu_count(), "memory_gib": round(psutil.virtual_memory().total / (1 << 30), 1),
            "python": platform.python_version(), "platform": platform.platform(), "versions": versions,
            "time": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
