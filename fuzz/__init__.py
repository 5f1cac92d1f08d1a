"""Fuzzing josefk (issue 27): ``python -m fuzz`` runs the decoder target and a live broker per
listener kind; see fuzz/README.md."""
