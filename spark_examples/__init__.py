"""PySpark Structured Streaming jobs over Spark's built-in ``format("kafka")``.

Each module runs as ``python -m spark_examples.<name> --bootstrap HOST:PORT ...``
and exposes the functions the compatibility suite (``compat_tests/test_spark.py``)
drives on a shared SparkSession:

- ``word_count``: lines from a topic -> running word counts -> a topic (Kafka sink).
- ``event_time``: JSON events -> windowed counts with a watermark -> a topic.
- ``batch_read``: ``spark.read`` of offset ranges given per partition, or by timestamp.
- ``exactly_once_files``: a topic -> parquet files, exactly once across restarts.
- ``options``: includeHeaders, maxOffsetsPerTrigger, minPartitions,
  subscribePattern, failOnDataLoss.
- ``read_committed``: ``kafka.isolation.level=read_committed`` over a topic with
  aborted transactions (written by a confluent-kafka transactional producer).

``common`` builds the session: local mode, the connector jars fetched by
``tools/spark/fetch.sh`` as ``spark.jars``, small memory and shuffle settings.
Only ``kafka.bootstrap.servers`` is set among the ``kafka.*`` options (and
``kafka.isolation.level`` in ``read_committed``): otherwise every consumer and producer
runs with the Java client's defaults.
"""
