"""The device's commands."""
