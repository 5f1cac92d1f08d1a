"""Stock Kafka clients against a live broker: josefk, or Apache Kafka to keep the suite honest."""

import importlib
import warnings

# kafka-python 3.0 loads its protocol schemas at import time through importlib.resources
# calls deprecated since Python 3.11; import it once here, quietly, before pytest records
# warnings for the session.
with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    for _module in ("kafka", "kafka.admin", "kafka.protocol.consumer", "kafka.protocol.metadata"):
        importlib.import_module(_module)
