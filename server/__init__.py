"""The broker process: trio networking, request handlers, config and CLI."""
