"""Handlers of the group coordinator's APIs: the classic group protocol, offsets, and
transactional offset commits."""
