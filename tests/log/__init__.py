"""Tests of the storage engine (``josefk.log``) and the record batch header codec."""
