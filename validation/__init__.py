"""Validation tools: packet-level ground truth (ns-3) and reference data for pathflow models."""
