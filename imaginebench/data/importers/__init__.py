"""Importers that convert datasets of other projects into the imaginebench rollout format."""
