"""``python -m lifecycle``: the command-line interface."""

import sys

from lifecycle.cli import main

sys.exit(main())
