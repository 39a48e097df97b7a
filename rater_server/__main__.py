"""``python -m rater_server``: :func:`rater_server.cli.main`."""

import sys

from rater_server.cli import main

sys.exit(main())
