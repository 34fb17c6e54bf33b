"""Packet-level reference simulator (numba): per-packet queues, TCP Reno and DCTCP senders."""
