"""The log cleaner (Kafka's LogCleaner) for ``cleanup.policy=compact``: ``manager``
picks the dirtiest log and keeps ``cleaner-offset-checkpoint``; ``cleaner`` builds the
offset map and rewrites segments; ``txn`` keeps transaction markers and aborted data
right; ``swap`` replaces segments through ``.cleaned`` / ``.swap`` files that survive a
crash. Sits above ``log`` (it cleans `Log` objects); ``log`` uses only ``swap``'s
recovery."""
