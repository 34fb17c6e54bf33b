"""Queue traces as CSV: `time,queue` rows (s, packets) -> `queue` (time, link) in bytes."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import xarray as xr

from pathflow.schema import build_dataset
from pathflow.validation.traces.files import read_head, trace_error

__all__ = ["load_queue_trace"]

_QUEUE_COLUMNS = ("time", "queue")


def load_queue_trace(path: str | Path, packet_bytes: float = 1514.0, link: str = "bottleneck",
                     source: str | None = None) -> xr.Dataset:
    """A queue trace CSV as a Dataset.

    The file has two numeric columns, `time` (s, strictly increasing) and `queue` (packets,
    >= 0), optionally under a `time,queue` header line; lines starting with '#' are comments.
    Returns `queue` (time, link) in bytes (packets * packet_bytes; attrs["packet_bytes"]
    keeps the factor) with `time` in s as in the file (no offset is subtracted).
    """
    path = Path(path)
    head = read_head(path, 1)
    if not head:
        raise trace_error(path, "empty file (expected a time,queue CSV)")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise trace_error(path, "not a text file (expected a time,queue CSV)") from None
    except OSError as error:
        raise trace_error(path, f"cannot read ({error.strerror or error})") from None
    time, queue = _parse_queue_csv(path, text)
    return build_dataset(
        {"queue": (queue * packet_bytes)[:, None]},
        {"time": time, "link": [link]},
        {"engine": source or f"trace {path.name}", "packet_bytes": packet_bytes},
    )


def _parse_queue_csv(path: Path, text: str) -> tuple[np.ndarray, np.ndarray]:
    """Rows of (time, queue); every problem is reported with its line number."""
    times: list[float] = []
    queues: list[float] = []
    seen_data = False
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        cells = [cell.strip() for cell in stripped.split(",")]
        if not seen_data and not _is_number(cells[0]):
            # A header is allowed once, before the data, and must name the two columns.
            if tuple(cell.lower() for cell in cells) != _QUEUE_COLUMNS:
                raise trace_error(path, f"line {number}: header {stripped!r}, expected "
                                        f"'time,queue' (or no header)")
            seen_data = True
            continue
        seen_data = True
        if len(cells) != 2:
            raise trace_error(path, f"line {number}: expected 2 columns (time in s, queue in "
                                    f"packets), got {len(cells)}: {stripped[:60]!r}")
        try:
            t, q = float(cells[0]), float(cells[1])
        except ValueError:
            raise trace_error(path, f"line {number}: not numbers: {stripped[:60]!r}") from None
        if not (math.isfinite(t) and math.isfinite(q)):
            raise trace_error(path, f"line {number}: non-finite value: {stripped[:60]!r}")
        if q < 0:
            raise trace_error(path, f"line {number}: negative queue {q:g}")
        if times and t <= times[-1]:
            raise trace_error(path, f"line {number}: time {t!r} does not increase "
                                    f"(previous {times[-1]!r})")
        times.append(t)
        queues.append(q)
    if not times:
        raise trace_error(path, "no data rows (expected time,queue lines)")
    return np.array(times), np.array(queues)


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True
