"""Validation cases of the packet-level reference simulator, and of the fluid model against it."""
