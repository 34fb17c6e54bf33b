"""Loading traces and measurements into Datasets with the names and units of simulation results.

Every loader returns an `xarray.Dataset` labelled by `pathflow.schema`, the vocabulary of
simulation results (dimensions `time`, `link`, `flow`; rates in bytes/s, sizes in bytes, times in
s; every number carries a `units` attribute), so that `pathflow.metrics` and the comparison
functions apply unchanged. A trace has the variables its file holds, not all of an engine's. A
file that cannot be read raises `TraceError` (a `ValueError`) whose one-line message starts with
the file name and says what is wrong.

=========================  ==============================================================
loader                     returns
=========================  ==============================================================
`load_pcap`                pcap / pcapng / gzip of either: `flow_rate`, `payload_rate`
                           (time, flow) and `link_departure` (time, link), bytes/s, binned
                           by numba; flows are data-carrying TCP/UDP 5-tuples
`read_packets`             the per-packet table behind `load_pcap` (`Packets`)
`load_ns3`                 a saved ns-3 result (netCDF from `run_ns3` / `simulate_ns3`)
`load_queue_trace`         a `time,queue` CSV (s, packets) -> `queue` (time, link), bytes
`load_queue_file`          whatever holds a queue, told apart by content: a netCDF result
                           with `queue` (fluid, packet, ns-3) or a `time,queue` CSV (what
                           calibration reads)
`load_mininet_records`     the Mininet MPTCP fat-tree records (JSON, or the shipped CSV
                           extract) -> (record, flow[, path]) goodput, throughput, fct, ...
`write_mininet_csv`        writes that CSV extract from the JSON
`reference_path`           the copies shipped in `pathflow/validation/data/`
=========================  ==============================================================

Modules, one per source format: `queue_csv`, `pcap` (on `packets`, which reads
`capture_files` record by record and decodes `frames`), `ns3`, `mininet`, `queue_file`;
`files` holds what they share (the error, first bytes, netCDF, shipped references).
Tests: tests/test_traces.py (synthetic and shipped files, every error), tests/test_cli_calibrate.py
(traces given to `pathflow calibrate`).
"""

from pathflow.validation.traces.files import TraceError, reference_path
from pathflow.validation.traces.mininet import load_mininet_records, write_mininet_csv
from pathflow.validation.traces.ns3 import load_ns3
from pathflow.validation.traces.packets import Packets, read_packets
from pathflow.validation.traces.pcap import load_pcap
from pathflow.validation.traces.queue_csv import load_queue_trace
from pathflow.validation.traces.queue_file import load_queue_file

__all__ = [
    "Packets",
    "TraceError",
    "load_mininet_records",
    "load_ns3",
    "load_pcap",
    "load_queue_file",
    "load_queue_trace",
    "read_packets",
    "reference_path",
    "write_mininet_csv",
]
