"""Cluster metadata, controller, replication and coordinators."""
