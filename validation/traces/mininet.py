"""The Mininet MPTCP / TCP fat-tree study's flow records (silent network, seeds 000/002): the
original JSON or the CSV extract shipped with pathflow -> a Dataset over (record, flow[, path])."""

from __future__ import annotations

import csv
import io
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from pathflow.schema import build_dataset
from pathflow.validation.traces.files import TraceError, read_head, trace_error

__all__ = ["load_mininet_records", "write_mininet_csv"]

_MININET_META = ("router", "proto", "pmanager", "diffports", "juggler", "payloadsize")
_MININET_FLOW = ("goodput", "throughput", "fct", "meanNetworkUtilization")
_MININET_DEBUG = ("fileSize", "totalBytes", "shortestPathTotalBytes", "pathsWithBytes",
                  "flowId")
_CSV_COLUMNS = ("record", "router", "proto", "pmanager", "diffports", "juggler", "payloadsize",
                "flow", "run", "src", "dst", "file_size", "total_bytes", "fct", "paths")
_SERVER_PORT = 50000  # iperf server port of run r is 50000 + r (seed 000's scripts)
_TRANSFERS_PER_RUN = 16
_HOST = re.compile(r"^h([0-9])([0-9])([0-9])$")


@dataclass
class _MininetFlow:
    """One flow record, as read from either file (goodput, throughput, utilization computed
    by the study, or recomputed from the CSV's columns)."""

    record: int
    meta: dict[str, Any]
    flow: int
    run: int
    src: str
    dst: str
    file_size: int
    total_bytes: int
    fct: float
    goodput: float
    throughput: float
    utilization: float
    paths: list[tuple[str, int]]


def load_mininet_records(path: str | Path) -> xr.Dataset:
    """The Mininet MPTCP / TCP fat-tree records (silent network) as a Dataset.

    Reads the original JSON (`silent_network_records.json`: a list of test records, each
    `data.metadata` + `data.unpacked[*]` flow records) or the CSV extract shipped as
    `mininet_fattree_flows.csv` (see `write_mininet_csv`). Returns, over dimensions
    `record` (one test configuration: 5 runs x 16 transfers), `flow` (0..79; run =
    flow // 16) and `path` (slots for the paths that carried bytes, at most 4):
      * `goodput` (record, flow), bytes/s: file size / FCT;
      * `throughput` (record, flow), bytes/s: all bytes seen on the network / FCT (both
        directions and every capture point: it exceeds the 2.5 MB/s line rate for about a
        third of the flows, so it is no wire rate);
      * `fct` (record, flow), s: first request packet to the last FIN;
      * `mean_network_utilization` (record, flow), 1: (1/P) sum_p b_p / max_q b_q over the
        P equal-cost shortest paths of the host pair;
      * `total_bytes`, `shortest_path_bytes` (record, flow), bytes; `path_bytes` (record,
        flow, path), bytes (0 in unused slots), with `path_links` naming each path by its
        link ids ("35 > 17 > 0 > 1 > 21 > 38"; 32..47 host-edge, 16..31 edge-aggregate,
        0..15 aggregate-core; "" in unused slots). Paths are undirected: their bytes count
        data and ACKs, so a single-path TCP transfer shows a second path carrying its ACKs
        when the reverse route differs;
    coordinates `router`, `proto`, `pmanager`, `diffports`, `juggler` (bool), `payloadsize`
    (record); `run` (flow); `src` (the iperf client, which sends the data), `dst` (the iperf
    server), `size` (file size, bytes) and `equal_cost_paths` (P: 4 between pods, 2 within a
    pod, 1 under one edge switch) over (record, flow). Rows missing from a record are NaN.
    """
    path = Path(path)
    head = read_head(path, 1)
    if not head:
        raise trace_error(path, "empty file (expected Mininet records: JSON or the CSV extract)")
    csv_extract = path.suffix.lower() == ".csv"
    flows = _mininet_from_csv(path) if csv_extract else _mininet_from_json(path)
    if not flows:
        raise trace_error(path, "no flow records")
    return _mininet_dataset(path, flows)


def _mininet_from_json(path: Path) -> list[_MininetFlow]:
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise trace_error(path, "not a text file (expected Mininet records JSON)") from None
    except json.JSONDecodeError as error:
        raise trace_error(path, f"not valid JSON ({error.msg} at line {error.lineno} column "
                                f"{error.colno})") from None
    if not isinstance(raw, list):
        raise trace_error(path, f"expected a JSON list of test records, got {type(raw).__name__}")
    flows: list[_MininetFlow] = []
    for i, record in enumerate(raw):
        where = f"[{i}]"
        data = _field(path, record, "data", dict, where)
        meta = _field(path, data, "metadata", dict, f"{where}.data")
        unpacked = _field(path, data, "unpacked", list, f"{where}.data")
        record_id = _field(path, record, "id", int, where)
        clean = _clean_meta(path, {k: _field(path, meta, k, (str, int), f"{where}.data.metadata")
                                   for k in _MININET_META}, f"{where}.data.metadata")
        for j, item in enumerate(unpacked):
            at = f"{where}.data.unpacked[{j}]"
            values = {k: float(_field(path, item, k, (int, float), at)) for k in _MININET_FLOW}
            flow_id = _field(path, item, "id", int, at)
            debug = _field(path, item, "debug", dict, at)
            dbg = {k: _field(path, debug, k, (int, dict, list), f"{at}.debug")
                   for k in _MININET_DEBUG}
            paths = [(str(k), int(v)) for k, v in dbg["pathsWithBytes"].items()]
            run = flow_id // _TRANSFERS_PER_RUN
            src, dst = _client_server(path, dbg["flowId"], _SERVER_PORT + run, at)
            flows.append(_MininetFlow(
                record=record_id, meta=clean, flow=flow_id, run=run, src=src, dst=dst,
                file_size=int(dbg["fileSize"]), total_bytes=int(dbg["totalBytes"]),
                fct=values["fct"], goodput=values["goodput"], throughput=values["throughput"],
                utilization=values["meanNetworkUtilization"], paths=paths,
            ))  # fmt: skip
    return flows


def _field(path: Path, obj: Any, key: str, kind: type | tuple[type, ...], where: str) -> Any:
    if not isinstance(obj, dict):
        raise trace_error(path, f"{where}: expected an object, got {type(obj).__name__}")
    if key not in obj:
        raise trace_error(path, f"{where}.{key}: missing (not Mininet records JSON?)")
    value = obj[key]
    if isinstance(value, bool) or not isinstance(value, kind):
        names = kind.__name__ if isinstance(kind, type) else "/".join(k.__name__ for k in kind)
        raise trace_error(path, f"{where}.{key}: expected {names}, got {type(value).__name__}")
    return value


def _clean_meta(path: Path, meta: dict[str, Any], where: str) -> dict[str, Any]:
    juggler = str(meta["juggler"]).lower()
    if juggler not in ("true", "false"):
        raise trace_error(path, f"{where}.juggler: expected 'true' or 'false', got {juggler!r}")
    try:
        diffports = int(meta["diffports"])
    except ValueError:
        raise trace_error(path, f"{where}.diffports: not an integer: {meta['diffports']!r}"
                          ) from None
    return {"router": str(meta["router"]), "proto": str(meta["proto"]),
            "pmanager": str(meta["pmanager"]), "diffports": diffports,
            "juggler": juggler == "true", "payloadsize": str(meta["payloadsize"])}


def _client_server(path: Path, flow_ids: Any, server_port: int, where: str) -> tuple[str, str]:
    """(client, server) from the subflows' "hostA portA hostB portB" strings: the server is the
    end on the run's iperf port, the client (iperf -c, the data sender) the other end."""
    if not isinstance(flow_ids, list) or not flow_ids:
        raise trace_error(path, f"{where}.debug.flowId: expected a non-empty list")
    ends: set[tuple[str, str]] = set()
    for text in flow_ids:
        parts = str(text).split()
        if len(parts) != 4 or not (parts[1].isdigit() and parts[3].isdigit()):
            raise trace_error(path, f"{where}.debug.flowId: expected 'host port host port', "
                                    f"got {text!r}")
        a, pa, b, pb = parts[0], int(parts[1]), parts[2], int(parts[3])
        if pa == server_port and pb != server_port:
            ends.add((b, a))
        elif pb == server_port and pa != server_port:
            ends.add((a, b))
        else:
            raise trace_error(path, f"{where}.debug.flowId: no end on server port {server_port} "
                                    f"in {text!r}")
    if len(ends) != 1:
        raise trace_error(path, f"{where}.debug.flowId: subflows disagree on client/server {ends}")
    return ends.pop()


def _equal_cost_paths(src: str, dst: str) -> int:
    """Shortest paths between two hosts "h<pod><edge><host>" of a k = 4 fat-tree."""
    a, b = _HOST.match(src), _HOST.match(dst)
    if a is None or b is None:
        return 0
    if a[1] != b[1]:
        return 4  # (k/2)^2 via the core
    return 2 if a[2] != b[2] else 1  # k/2 aggregation switches, or the shared edge switch


def _mininet_dataset(path: Path, flows: list[_MininetFlow]) -> xr.Dataset:
    records = sorted({f.record for f in flows}, key=[f.record for f in flows].index)
    metas: dict[int, dict[str, Any]] = {}
    for f in flows:
        if metas.setdefault(f.record, f.meta) != f.meta:
            raise trace_error(path, f"record {f.record}: rows disagree on its metadata")
    n_rec = len(records)
    n_flow = max(f.flow for f in flows) + 1
    n_path = max((len(f.paths) for f in flows), default=0) or 1
    rec_index = {r: i for i, r in enumerate(records)}

    def grid(fill: float = np.nan) -> np.ndarray:
        return np.full((n_rec, n_flow), fill)

    goodput, throughput, fct, util = grid(), grid(), grid(), grid()
    total, shortest, size, ecmp = grid(), grid(), grid(), grid()
    run = np.arange(n_flow) // _TRANSFERS_PER_RUN
    src = np.full((n_rec, n_flow), "", dtype=object)
    dst = np.full((n_rec, n_flow), "", dtype=object)
    path_bytes = np.zeros((n_rec, n_flow, n_path))
    path_links = np.full((n_rec, n_flow, n_path), "", dtype=object)
    seen = np.zeros((n_rec, n_flow), dtype=bool)
    for f in flows:
        i, j = rec_index[f.record], f.flow
        if j < 0 or seen[i, j]:
            raise trace_error(path, f"record {f.record}: flow id {j} repeated or negative")
        if f.run != j // _TRANSFERS_PER_RUN:
            raise trace_error(path, f"record {f.record} flow {j}: run {f.run}, expected "
                                    f"{j // _TRANSFERS_PER_RUN} (16 transfers per run)")
        seen[i, j] = True
        goodput[i, j], throughput[i, j], fct[i, j] = f.goodput, f.throughput, f.fct
        util[i, j], total[i, j], size[i, j] = f.utilization, f.total_bytes, f.file_size
        shortest[i, j] = sum(b for _, b in f.paths)
        src[i, j], dst[i, j] = f.src, f.dst
        ecmp[i, j] = _equal_cost_paths(f.src, f.dst) or np.nan
        for k, (links, nbytes) in enumerate(f.paths):
            path_links[i, j, k] = links
            path_bytes[i, j, k] = nbytes
    meta = [metas[r] for r in records]
    return build_dataset(
        {
            "goodput": goodput,
            "throughput": throughput,
            "fct": fct,
            "mean_network_utilization": util,
            "total_bytes": total,
            "shortest_path_bytes": shortest,
            "path_bytes": path_bytes,
        },
        {
            "record": np.array(records),
            **{key: np.array([m[key] for m in meta],
                             dtype=object if isinstance(meta[0][key], str) else None)
               for key in _MININET_META},
            "flow": np.arange(n_flow),
            "run": run,
            "path": np.arange(n_path),
            "src": src,
            "dst": dst,
            "size": size,
            "equal_cost_paths": ecmp,
            "path_links": path_links,
        },
        {
            "engine": "Mininet + P4 (bmv2) + Linux MPTCP, seeds 000/002 (silent network)",
            "source": str(path),
            "topology": "fat-tree k=4, 16 hosts, every link 20 Mb/s",
            "link_rate_bps": 20e6,
        },
        stacked_by="record",  # a record is one test configuration, with flows of its own
        comments={"src": "iperf client (data sender)", "dst": "iperf server (data receiver)"},
    )


def write_mininet_csv(json_path: str | Path, csv_path: str | Path) -> None:
    """Write the compact CSV extract of the Mininet JSON: one row per flow record.

    Columns: record, router, proto, pmanager, diffports, juggler, payloadsize (the record's
    metadata), flow, run, src (client), dst (server), file_size, total_bytes (bytes), fct
    (s, as in the JSON), paths ("35-17-0-1-21-38:137374;..." link ids and bytes, in the
    JSON's order). goodput, throughput, the shortest-path total and the mean network
    utilization are left out: `load_mininet_records` recomputes them exactly as the study
    did (file_size / fct, total_bytes / fct, sum of path bytes, (1/P) sum_p b_p / max b),
    bit for bit (tests/test_traces.py checks it against the JSON).
    """
    flows = _mininet_from_json(Path(json_path))
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(_CSV_COLUMNS)
    for f in flows:
        m = f.meta
        paths = ";".join(f"{links.replace(' > ', '-')}:{nbytes}" for links, nbytes in f.paths)
        writer.writerow([f.record, m["router"], m["proto"], m["pmanager"], m["diffports"],
                         "true" if m["juggler"] else "false", m["payloadsize"], f.flow, f.run,
                         f.src, f.dst, f.file_size, f.total_bytes, repr(f.fct), paths])
    Path(csv_path).write_text(out.getvalue(), encoding="utf-8")


def _mininet_from_csv(path: Path) -> list[_MininetFlow]:
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise trace_error(path, "not a text file (expected the Mininet flow CSV)") from None
    rows = csv.reader(io.StringIO(text))
    header = next(rows, None)
    if header is None or tuple(h.strip() for h in header) != _CSV_COLUMNS:
        got = ",".join(header or [])[:80]
        raise trace_error(path, f"header {got!r}, expected {','.join(_CSV_COLUMNS)!r}")
    flows: list[_MininetFlow] = []
    for number, row in enumerate(rows, start=2):
        if not row:
            continue
        if len(row) != len(_CSV_COLUMNS):
            raise trace_error(path, f"line {number}: expected {len(_CSV_COLUMNS)} columns, "
                                    f"got {len(row)}")
        cell = dict(zip(_CSV_COLUMNS, row, strict=True))
        try:
            meta = _clean_meta(path, {k: cell[k] for k in _MININET_META}, f"line {number}")
            file_size, total = int(cell["file_size"]), int(cell["total_bytes"])
            fct = float(cell["fct"])
            paths = []
            for item in filter(None, cell["paths"].split(";")):
                links, nbytes = item.rsplit(":", 1)
                paths.append((links.replace("-", " > "), int(nbytes)))
            flow = _MininetFlow(
                record=int(cell["record"]), meta=meta, flow=int(cell["flow"]),
                run=int(cell["run"]), src=cell["src"], dst=cell["dst"], file_size=file_size,
                total_bytes=total, fct=fct, goodput=file_size / fct, throughput=total / fct,
                utilization=_utilization(paths, _equal_cost_paths(cell["src"], cell["dst"])),
                paths=paths,
            )  # fmt: skip
        except (ValueError, ZeroDivisionError) as error:
            if isinstance(error, TraceError):
                raise
            raise trace_error(path, f"line {number}: bad value ({error})") from None
        flows.append(flow)
    return flows


def _utilization(paths: list[tuple[str, int]], equal_cost: int) -> float:
    # The study's formula, evaluated in the same order (numpy sum over the JSON's path order)
    # so that the CSV gives the JSON's numbers bit for bit.
    if not paths or equal_cost == 0:
        return math.nan
    b = np.array([nbytes for _, nbytes in paths], dtype=np.float64)
    return float((b / b.max()).sum() / equal_cost)
