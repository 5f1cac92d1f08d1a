"""Log directories: the channel that takes a directory offline after an I/O error in it
(Kafka's ``LogDirFailureChannel``) with the logs that report to it, and copying a log to
another directory."""
