"""Validation cases of calibration (`pathflow.validation.calibration`)."""
