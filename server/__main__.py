"""``python -m josefk.server``: the same as the ``josefk`` command."""

import sys

from josefk.server.cli import main

sys.exit(main())
