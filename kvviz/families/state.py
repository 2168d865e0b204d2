"""Placeholder: filled in by the state family."""
