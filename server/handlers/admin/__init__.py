"""Handlers of the admin APIs: topics and partitions, and configs."""
